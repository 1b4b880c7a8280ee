"""Real exports of F.cross_entropy with class-index targets (PyTorch 2.13, onnxscript 0.7.2)
through lossgrad_compiler.torch.export_training_step: without label smoothing the backward
becomes one CrossEntropyLossGrad (fusion/cross_entropy.py) giving the exported graph's
elements (negative targets and ignore_index included; exactly under the
ReferenceEvaluator, within another exp's ulps in ONNX Runtime); with label smoothing, or an
unprovable grad_output or weight, it is left with the reason. The exports are made once per
module (about a second each)."""

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
from lossgrad_compiler.fusion.cross_entropy import CE_TOTAL_WEIGHT_ONE, SMOOTHED  # noqa: E402
from lossgrad_compiler.torch import export_training_step  # noqa: E402
from tests.fusion.ce_graphs import check_ce  # noqa: E402
from tests.fusion.contract import run_ort  # noqa: E402
from tests.fusion.nll_graphs import check_schemas  # noqa: E402

C = 5
CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16}
WEIGHT = (0.5, 1.0, 2.0, 1.5, 0.25)


def _step(reduction: str, ii: int, ls: float, weight: str, seed: bool, nll: bool) -> Any:
    """d cross_entropy(x, t) / d x (or nll_loss(log_softmax(x)), the same graph); the
    weight a constant of the step or an input; the seed an input, else ones (none) or
    autograd's own."""

    def grad(x: Any, t: Any, w: Any, g: Any) -> Any:
        x = x.detach().requires_grad_(True)
        if nll:
            value = F.nll_loss(F.log_softmax(x, dim=1), t, weight=w, reduction=reduction,
                               ignore_index=ii)  # fmt: skip
        else:
            value = F.cross_entropy(x, t, weight=w, reduction=reduction, ignore_index=ii,
                                    label_smoothing=ls)  # fmt: skip
        if g is None and reduction == "none":
            g = torch.ones_like(value)
        return torch.autograd.grad(value, x, g)[0]

    def fixed(x: Any, t: Any) -> Any:
        w = torch.tensor(WEIGHT, dtype=x.dtype) if weight == "constant" else None
        return grad(x, t, w, None)

    def with_weight(x: Any, t: Any, w: Any) -> Any:
        return grad(x, t, w, None)

    def with_seed(x: Any, t: Any, g: Any) -> Any:
        return grad(x, t, None, g)

    return with_seed if seed else with_weight if weight == "input" else fixed


def _inputs(config: tuple, batch: int) -> tuple[Any, ...]:
    reduction, ii, _, weight, dtype, _, seed, _ = config
    gen = torch.Generator().manual_seed(7 + batch)
    x = torch.randn(batch, C, generator=gen, dtype=torch.float64).to(DTYPES[dtype])
    t = torch.randint(0, C, (batch,), generator=gen)
    t[1] = ii if ii >= -C else -100  # an ignored row
    out: tuple[Any, ...] = (x, t)
    if weight == "input":
        out += (torch.tensor(WEIGHT, dtype=x.dtype),)
    if seed:
        out += (torch.randn((batch,) if reduction == "none" else (), generator=gen).to(x.dtype),)
    return out


@functools.cache
def _export(config: tuple) -> onnx.ModelProto:
    reduction, ii, ls, weight, _, dynamic, seed, nll = config
    names = ["x", "t", *(["g"] if seed else ["w"] if weight == "input" else [])]
    shapes = {"x": {0: "batch"}, "t": {0: "batch"}} if dynamic else None
    exported, _ = export_training_step(
        _step(reduction, ii, ls, weight, seed, nll), _inputs(config, 4), dynamic_shapes=shapes,
        input_names=names, fuse_gradients=False,
    )  # fmt: skip
    return exported


# (reduction, ignore_index, label_smoothing, weight, dtype, dynamic, seed input, as nll_loss)
# -> the fused node's reduction
FUSED = {
    ("none", -100, 0.0, "", "float32", False, False, False): "none",
    ("none", -100, 0.0, "", "float32", True, False, False): "none",
    ("sum", -100, 0.0, "", "float32", False, False, False): "sum",
    ("mean", -100, 0.0, "", "float32", False, False, False): "sum",
    ("mean", 2, 0.0, "", "float32", True, False, False): "sum",
    ("mean", -1, 0.0, "constant", "float32", False, False, False): "sum",
    ("sum", 2, 0.0, "constant", "float32", True, False, False): "sum",
    ("sum", -100, 0.0, "constant", "float64", False, False, False): "sum",
    ("mean", -100, 0.0, "", "float64", True, False, False): "sum",
    ("mean", -100, 0.0, "", "float16", False, False, False): "sum",
    ("sum", 2, 0.0, "constant", "float16", False, False, False): "sum",
    ("none", -100, 0.0, "", "float16", True, False, False): "none",
    ("mean", -100, 0.0, "", "float32", False, False, True): "sum",
}
LEFT = {
    ("none", -100, 0.1, "", "float32", False, False, False): SMOOTHED,
    ("sum", -100, 0.1, "", "float32", False, False, False): SMOOTHED,
    ("sum", 2, 0.1, "constant", "float16", False, False, False): SMOOTHED,
    ("mean", -100, 0.1, "", "float32", False, False, False): "neither CrossEntropyLossGrad's",
    ("mean", -100, 0.1, "constant", "float32", True, False, False): "neither CrossEntropy",
    ("none", -100, 0.0, "", "float32", False, True, False): "grad_output 'unsqueeze_1' is not",
    ("mean", -100, 0.0, "input", "float32", False, False, False): "the weight 'w' is not provably",
}


def _label(config: tuple) -> str:
    reduction, ii, ls, weight, dtype, dynamic, seed, nll = config
    parts = [reduction, f"ii{ii}", f"ls{ls}", weight and f"w-{weight}", dtype,
             "dynamic" * dynamic, "seed" * seed, "nll" * nll]  # fmt: skip
    return "-".join(p for p in parts if p)


def _feeds(model: onnx.ModelProto, config: tuple, batch: int) -> dict[str, np.ndarray]:
    """Valid targets, ignore_index and negative classes (ScatterElements reads t + C), and
    NaN and inf in x (NaN rows of the log-probabilities)."""
    tensors = [t.numpy() for t in _inputs(config, batch)]
    t = tensors[1]
    t[2], t[3] = -1, -C
    x = tensors[0]
    x[0, 1] = np.nan
    if batch > 4:
        x[4, 0], x[batch - 1, 2] = np.inf, -np.inf
    return {i.name: v for i, v in zip(model.graph.input, tensors, strict=True)}


def _row_scale(config: tuple, batch: int) -> np.ndarray:
    """|g*w[t]| bounded per row: g is 1 (the seed of ones, autograd's 1, the exporter's
    total weight of 1), w at most max(WEIGHT)."""
    scale = max(WEIGHT) if config[3] else 1.0
    return np.full((batch, 1), scale)


@pytest.mark.parametrize("config", list(FUSED), ids=[_label(c) for c in FUSED])
def test_exported_cross_entropy_is_fused_and_keeps_the_graph(config: tuple) -> None:
    exported = _export(config)
    fused, report = fuse(exported)
    ours = [n for n in fused.graph.node if n.domain == spec.DOMAIN]
    assert [n.op_type for n in ours] == [CE], report.lines()
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in ours[0].attribute}
    assert attrs["reduction"].decode() == FUSED[config]
    assert attrs["label_smoothing"] == 0.0
    ii = config[1]
    assert attrs["ignore_index"] == (ii - C if 0 <= ii < C else ii)
    check_schemas(fused)  # the ai.lossgrad v5 schema
    kept = {n.op_type for n in fused.graph.node}
    assert not kept & {"ScatterElements", "Exp", "ReduceSum", "Sub"}, kept
    assert (FUSED[config] == "sum") == (CE_TOTAL_WEIGHT_ONE in "\n".join(report.lines()))
    for batch in (4, 7) if config[5] else (4,):
        inputs = _feeds(exported, config, batch)
        problems = check_ce(_row_scale(config, batch), exported, fused, inputs, config[4])
        assert not problems, "\n".join([*report.lines(), *problems])


@pytest.mark.parametrize("config", list(LEFT), ids=[_label(c) for c in LEFT])
def test_exported_cross_entropy_left_with_its_reason(config: tuple) -> None:
    exported = _export(config)
    fused, report = fuse(exported)
    assert [left.op_type for left in report.left] == [CE], report.lines()
    assert LEFT[config] in report.left[0].reason, report.lines()
    assert not any(n.op_type == CE for n in fused.graph.node)
    assert {"Exp", "ReduceSum", "Sub"} <= {n.op_type for n in fused.graph.node}
    inputs = _feeds(exported, config, 4)
    problems = check_ce(_row_scale(config, 4), exported, fused, inputs, config[4], ())
    assert not problems, "\n".join([*report.lines(), *problems])


def _page_report(first_line: str) -> str:
    page = (Path(__file__).parents[2] / "docs" / "fusion.md").read_text()
    shown = page.split(first_line, 1)[1].split("```", 1)[0]
    return first_line + shown.rstrip("\n")


def test_exported_mean_is_the_sum_and_the_report_says_so() -> None:
    """The exporter's 2-D mean divides by a total weight of 1: the fused node keeps the
    graph's numbers, PyTorch's sum gradient, and the report (the one docs/fusion.md shows)
    says it differs from PyTorch's mean."""
    config = ("mean", -100, 0.0, "", "float32", False, False, False)
    fused, report = fuse(_export(config))
    assert "\n".join(report.lines()) == _page_report("fused 1 CrossEntropyLossGrad;")
    x, t = _inputs(config, 4)
    (got,) = run_ort(fused, {"x": x.numpy(), "t": t.numpy()}, "runtime")
    as_sum = _step("sum", -100, 0.0, "", False, False)(x, t).numpy()
    as_mean = _step("mean", -100, 0.0, "", False, False)(x, t).numpy()
    np.testing.assert_allclose(got, as_sum, rtol=1e-6, atol=1e-7)
    assert not np.allclose(got, as_mean, rtol=1e-3)


def test_smoothed_mean_is_left_and_the_report_says_why() -> None:
    """With label smoothing the mean graph mixes a sum-scaled nll term with a mean-scaled
    smoothing term: left with both reasons (the report docs/fusion.md shows); the nll term
    alone becomes NLLLossBackward."""
    config = ("mean", -100, 0.1, "", "float32", False, False, False)
    _, report = fuse(_export(config))
    assert "\n".join(report.lines()) == _page_report("fused 1 NLLLossBackward; left 1")
    assert [f.op_type for f in report.fused] == ["NLLLossBackward"]
