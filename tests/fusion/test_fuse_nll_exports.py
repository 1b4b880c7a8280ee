"""Real exports of F.nll_loss (after F.log_softmax for 1-D and 4-D input; 2-D input is the
log-probabilities themselves, since the 2-D chain is cross_entropy's, fused whole as
CrossEntropyLossGrad in test_fuse_ce_exports.py) (PyTorch 2.13, onnxscript 0.7.2) through
lossgrad_compiler.torch.export_training_step: the decomposition becomes NLLLossBackward or
NLLLoss2dBackward where fusion/nll.py proves it, the fused model computes exactly the
exported graph's elements (negative targets and ignore_index included) in every runtime, and
what is left says why. The exports are made once per module (they take about a second)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
pytest.importorskip("onnxscript", reason="needs onnxscript: pip install -e '.[torch]'")
import torch.nn.functional as F  # noqa: E402

from lossgrad_compiler import fuse, spec  # noqa: E402
from lossgrad_compiler.fusion.nll import TOTAL_WEIGHT_ONE  # noqa: E402
from lossgrad_compiler.torch import export_training_step  # noqa: E402
from tests.fusion.contract import run_ort  # noqa: E402
from tests.fusion.nll_graphs import FUSED_RUNTIMES, check_exact, check_schemas  # noqa: E402

C = 5
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16}
WEIGHT = (0.5, 1.0, 2.0, 1.5, 0.25)


def _step(reduction: str, ignore_index: int, weight: str, seed_input: bool) -> Any:
    """d nll_loss(log_softmax(x), t) / d x; the weight an input ("input") or a constant of
    the step ("constant"); the seed an input, else ones (none) or autograd's own."""

    def loss(x: Any, t: Any, w: Any) -> Any:
        x = x.detach().requires_grad_(True)
        # 2-D: x holds the log-probabilities (the gradient after F.log_softmax of 2-D input
        # is cross_entropy's, which becomes CrossEntropyLossGrad: test_fuse_ce_exports.py)
        lp = x if x.dim() == 2 else F.log_softmax(x, dim=1 if x.dim() > 1 else 0)
        value = F.nll_loss(lp, t, weight=w, reduction=reduction, ignore_index=ignore_index)
        return x, value

    def fixed(x: Any, t: Any) -> Any:
        w = torch.tensor(WEIGHT, dtype=x.dtype) if weight == "constant" else None
        x, value = loss(x, t, w)
        seed = torch.ones_like(value) if reduction == "none" else None
        return torch.autograd.grad(value, x, seed)[0]

    def with_weight(x: Any, t: Any, w: Any) -> Any:
        x, value = loss(x, t, w)
        seed = torch.ones_like(value) if reduction == "none" else None
        return torch.autograd.grad(value, x, seed)[0]

    def with_seed(x: Any, t: Any, g: Any) -> Any:
        x, value = loss(x, t, None)
        return torch.autograd.grad(value, x, g)[0]

    return with_seed if seed_input else with_weight if weight == "input" else fixed


def _inputs(rank: int, dtype: str, batch: int, ii: int, extra: str) -> tuple[Any, ...]:
    gen = torch.Generator().manual_seed(11 + batch)
    shape = {1: (C,), 2: (batch, C), 4: (batch, C, 2, 3)}[rank]
    rows = tuple(d for i, d in enumerate(shape) if i != (1 if rank > 1 else 0))
    x = torch.randn(*shape, generator=gen, dtype=torch.float64).to(DTYPES[dtype])
    t = torch.randint(0, C, rows, generator=gen)
    if t.numel() > 1:
        t.view(-1)[1] = ii if ii >= -C else -100  # an ignored row
    out: tuple[Any, ...] = (x, t)
    if extra == "weight":
        out += (torch.tensor(WEIGHT, dtype=x.dtype),)
    if extra == "seed":
        out += (torch.randn(rows if rank > 1 else (), generator=gen).to(x.dtype),)
    return out


@functools.cache
def _export(config: tuple) -> onnx.ModelProto:
    reduction, rank, dtype, ii, weight, seed_input, dynamic = config
    extra = "seed" if seed_input else "weight" if weight == "input" else ""
    inputs = _inputs(rank, dtype, 4, ii, extra)
    names = ["x", "t", *(["g"] if seed_input else ["w"] if extra else [])]
    shapes = {"x": {0: "batch"}, "t": {0: "batch"}} if dynamic else None
    exported, _ = export_training_step(
        _step(reduction, ii, weight, seed_input), inputs, dynamic_shapes=shapes,
        input_names=names, fuse_gradients=False,
    )  # fmt: skip
    return exported


# (reduction, rank, dtype, ignore_index, weight, seed input, dynamic) -> op, reduction
FUSED = {
    ("none", 2, "float32", -100, "", False, False): ("NLLLossBackward", "none"),
    ("sum", 2, "float32", -100, "", False, False): ("NLLLossBackward", "sum"),
    ("mean", 2, "float32", -100, "", False, False): ("NLLLossBackward", "sum"),
    ("mean", 2, "float32", 2, "", False, True): ("NLLLossBackward", "sum"),
    ("none", 2, "float32", -100, "", False, True): ("NLLLossBackward", "none"),
    ("none", 1, "float32", -100, "", False, False): ("NLLLossBackward", "sum"),
    ("mean", 2, "float32", -1, "constant", False, False): ("NLLLossBackward", "sum"),
    ("sum", 2, "float64", -100, "", False, False): ("NLLLossBackward", "sum"),
    ("sum", 2, "float16", -100, "", False, False): ("NLLLossBackward", "sum"),
    ("mean", 4, "float32", -100, "", False, False): ("NLLLoss2dBackward", "sum"),
    ("mean", 4, "float32", 3, "", False, True): ("NLLLoss2dBackward", "sum"),
    ("mean", 4, "float16", -100, "", False, False): ("NLLLoss2dBackward", "sum"),
    ("none", 4, "float32", -100, "", False, False): ("NLLLoss2dBackward", "none"),
}
LEFT = {
    ("none", 2, "float32", -100, "", True, False): "grad_output 'unsqueeze_1' is not provably",
    ("mean", 2, "float32", -100, "input", False, False): "the weight 'w' is not provably finite",
    ("mean", 4, "float32", 2, "input", False, False): "weight 'w' is not provably finite",
}


def _label(config: tuple) -> str:
    reduction, rank, dtype, ii, weight, seed, dynamic = config
    parts = [reduction, f"{rank}d", dtype, f"ii{ii}", weight and f"w-{weight}",
             "seed" * seed, "dynamic" * dynamic]  # fmt: skip
    return "-".join(p for p in parts if p)


def _feeds(model: onnx.ModelProto, config: tuple, batch: int) -> dict[str, np.ndarray]:
    """Valid targets, ignore_index and negative classes (ScatterElements reads t + C)."""
    _, rank, dtype, ii, weight, seed_input, _ = config
    extra = "seed" if seed_input else "weight" if weight == "input" else ""
    tensors = [t.numpy() for t in _inputs(rank, dtype, batch, ii, extra)]
    t = tensors[1].reshape(-1)
    if t.size > 3:
        t[2], t[3] = -1, -C
    return {i.name: v for i, v in zip(model.graph.input, tensors, strict=True)}


@pytest.mark.parametrize("config", list(FUSED), ids=[_label(c) for c in FUSED])
def test_exported_nll_loss_is_fused_and_keeps_the_graph(config: tuple) -> None:
    exported = _export(config)
    fused, report = fuse(exported)
    op_type, reduction = FUSED[config]
    ours = [n for n in fused.graph.node if n.domain == spec.DOMAIN]
    assert [n.op_type for n in ours] == [op_type], report.lines()
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in ours[0].attribute}
    assert attrs["reduction"].decode() == reduction
    ii = config[3]
    assert attrs["ignore_index"] == (ii - C if 0 <= ii < C else ii)
    check_schemas(fused)  # the ai.lossgrad v4 schema
    assert not any(n.op_type == "ScatterElements" for n in fused.graph.node)
    # ONNX Runtime computes the exported float16 tail (log_softmax's backward) and the
    # 4-D mean's float16 1/count in float32, dropping the graph's roundings (docs/fusion.md):
    # there the fused model is held to ONNX's meaning, and to ORT's run within float16's eps
    half = config[2] == "float16"
    for batch in (4, 7) if config[-1] else (4,):
        inputs = _feeds(exported, config, batch)
        problems = check_exact(
            exported, fused, inputs, False, ("reference",) if half else FUSED_RUNTIMES
        )
        assert not problems, "\n".join([*report.lines(), *problems])
        if half:
            (want,) = run_ort(exported, inputs, "stock", optimize=False)
            for how in ("stock", "functions"):
                (got,) = run_ort(fused, inputs, how)
                np.testing.assert_allclose(got, want, rtol=2**-10, atol=2**-24)


def test_exported_mean_is_the_sum_and_the_report_says_so() -> None:
    """Fact (a): the exporter's 2-D mean divides by a total weight of 1. The fused model
    keeps the graph's numbers, PyTorch's sum gradient, and the report says it differs from
    PyTorch's mean."""
    config = ("mean", 2, "float32", -100, "", False, False)
    exported = _export(config)
    fused, report = fuse(exported)
    assert report.lines()[2] == f"    note: {TOTAL_WEIGHT_ONE}", report.lines()
    page = (Path(__file__).parents[2] / "docs" / "fusion.md").read_text()
    shown = page.split("fused 1 NLLLossBackward", 1)[1].split("```", 1)[0]
    assert "fused 1 NLLLossBackward" + shown.rstrip("\n") == "\n".join(report.lines())
    x, t = _inputs(2, "float32", 4, -100, "")
    (got,) = run_ort(fused, {"x": x.numpy(), "t": t.numpy()}, "runtime")
    as_sum = _step("sum", -100, "", False)(x, t).numpy()
    as_mean = _step("mean", -100, "", False)(x, t).numpy()
    np.testing.assert_allclose(got, as_sum, rtol=1e-6, atol=1e-7)
    assert not np.allclose(got, as_mean, rtol=1e-3)


def test_exported_4d_mean_divides_by_the_kept_count() -> None:
    """The 4-D mean's 1/count is the graph's: the fused model gives PyTorch's mean."""
    config = ("mean", 4, "float32", -100, "", False, False)
    fused, report = fuse(_export(config))
    assert len(report.lines()) == 2, report.lines()  # no note
    x, t = _inputs(4, "float32", 4, -100, "")
    (got,) = run_ort(fused, {"x": x.numpy(), "t": t.numpy()}, "runtime")
    want = _step("mean", -100, "", False)(x, t).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("config", list(LEFT), ids=[_label(c) for c in LEFT])
def test_exported_nll_loss_left_with_its_reason(config: tuple) -> None:
    exported = _export(config)
    fused, report = fuse(exported)
    assert not report.fused and len(report.left) == 1, report.lines()
    assert LEFT[config] in report.left[0].reason, report.lines()
    assert "0*inf" in report.left[0].reason
    assert len(fused.graph.node) == len(exported.graph.node)
