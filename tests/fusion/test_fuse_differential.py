"""The differential fuzzer: generated graphs run original and fused, checked against the
fusion contract (docs/fusion.md, tests/fusion/contract.py).

Three sources of graphs, each perturbed:
* hand-written forms (tests/fusion/graphs.py): the exporter's and the inline mode's forms
  and their near misses, with drawn constants, compute types and Casts around them (Cast
  attributes in either order), broadcast shapes, ways of computing the scale (among them a
  seed of ones `Expand(1, Shape(x))` divided by a constant, whose dims the compiler's shape
  inference does not know), a target reshaped in the graph from another declared shape,
  extra readers of intermediates, If subgraphs that define the names the pass invents or
  read its intermediates, and ai.onnx opsets 9 to 21; fused with and without
  reassociate=True;
* this project's inline mode (compile_model(..., mode="inline")) over drawn calls of the
  three operators in float16, float32 and float64, at opsets 13 to 21, with a constant
  nudged now and then, Casts listing `saturate` first, extra readers, colliding names;
* PyTorch 2.13's exporter (lossgrad_compiler.torch) on training steps, when the extra
  `torch` is installed;
* the exporter's nll_loss backward written by hand (tests/fusion/nll_graphs.py): drawn
  ranks (1-D, 2-D, 4-D), types, batch (static or dynamic), scales (constants up to overflow,
  an input grad_output, per row, the 4-D mean's 1/count), weights (absent, an input, a
  constant holding inf now and then), ignore_index (-100, -1, a class) and the near misses;
  fed targets that mix classes, ignore_index and negative classes, and checked exactly
  (nll_graphs.check_exact: the fused node must give every element of the graph);
* the exporter's cross_entropy backward written by hand (tests/fusion/ce_graphs.py, drawn by
  strategies.ce_recipes): the nll term's knobs on 2-D input, label smoothing and the near
  misses of the log_softmax backward; checked exactly under the ReferenceEvaluator and
  within another exp's ulps in ONNX Runtime (ce_graphs.check_ce).

Every graph is fed random values mixed with NaN, infinities, signed zeros, subnormals,
values near overflow and exp's overflow and underflow edges, and the fused model runs under
onnx's ReferenceEvaluator (the operators' reference kernels), in stock ONNX Runtime with the
native kernel library, and through lossgrad_compiler.evaluation.ort (compile_model's functions
model, native kernels; now and then without them, the standard ONNX function bodies). The
original runs under the ReferenceEvaluator (its meaning) and ONNX Runtime.

The budget: LOSSGRAD_FUZZ_EXAMPLES graphs of hand-written forms (default 1000), a third as
many inline graphs, a twenty-fifth as many exported steps, a twentieth as many nll_loss
graphs and a fiftieth as many cross_entropy graphs."""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.fusion import fuse
from lossgrad_compiler.fusion.family_forms import ALL_FORMS
from tests.fusion.ce_graphs import build as build_ce
from tests.fusion.ce_graphs import check_ce
from tests.fusion.ce_graphs import feeds as ce_feeds
from tests.fusion.contract import Subject, check_fusion, wrong_compute_types
from tests.fusion.graphs import Recipe, build, feeds, np_type, special_values
from tests.fusion.nll_graphs import MUTATIONS, NllRecipe, check_exact, check_schemas
from tests.fusion.nll_graphs import build as build_nll
from tests.fusion.nll_graphs import feeds as nll_feeds
from tests.fusion.strategies import (
    ce_recipes,
    colliding_branch,
    nudge_constant,
    read_intermediate,
    recipes,
    saturate_first,
)
from tests.helpers.strategies import calls

EXAMPLES = int(os.environ.get("LOSSGRAD_FUZZ_EXAMPLES", "1000"))
SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def _runtimes(functions: bool) -> list[str]:
    return ["reference", "stock", "runtime", *(["functions"] if functions else [])]


def _check(
    subject: Subject,
    inputs: dict[str, np.ndarray],
    reassociate: bool,
    functions: bool,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fused, report = (
            fuse(subject.model, reassociate=True) if reassociate else fuse(subject.model)
        )
    event(f"fused: {', '.join(sorted({f.op_type for f in report.fused})) or 'nothing'}")
    if report.left and not report.fused:
        event(f"left: {report.left[0].reason.split(':')[0][:60]}")
    onnx.checker.check_model(fused, full_check=True)
    # the node computes in the type the graph computes in (docs/fusion.md)
    assert not wrong_compute_types(fused, subject.compute), report.lines()
    problems = check_fusion(
        subject, fused, inputs, reassociate=reassociate, runtimes=_runtimes(functions)
    )
    assert not problems, "\n".join([*report.lines(), *problems])


# --------------------------------------------------------------------------- hand-written


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(
    recipe=recipes(),
    seed=st.integers(0, 2**32 - 1),
    reassociate=st.booleans(),
    functions=st.integers(0, 4),
)
def test_hand_written_forms_keep_the_contract(
    recipe: Recipe, seed: int, reassociate: bool, functions: int
) -> None:
    built = build(recipe)
    inputs = feeds(built, np.random.default_rng(seed))
    if recipe.subgraph:
        inputs["flag"] = np.asarray(seed % 2 == 0)
    event(f"form {recipe.form}")
    event(f"opset {recipe.opset}")
    subject = Subject(built.model, built.op_type, built.attrs, built.terms, np_type(recipe.compute))
    # a grad_output whose dims only data propagation knows is compiled with dynamic dims: the
    # standard-ONNX bodies' size check is where a broadcast one fails (issue 44)
    _check(subject, inputs, reassociate, functions == 0 or recipe.scale == "ones")


# --------------------------------------------------------------------------- inline mode


def _values(shape: tuple[int, ...], dtype: Any, compute: Any, beta: float, rng: Any) -> np.ndarray:
    values = rng.normal(0.0, 1.0, shape) * 10.0 ** rng.integers(-2, 3)
    if values.size:
        pick = rng.random(shape) < 0.3
        values = np.where(pick, rng.choice(special_values(dtype, compute, beta), shape), values)
    with np.errstate(all="ignore"):
        return np.asarray(values).astype(dtype)


@settings(max_examples=max(1, EXAMPLES // 3), **SETTINGS)
@given(
    # the operators with fusion forms
    case=calls(
        ops=sorted({f.op_type for f in ALL_FORMS}), dtypes=(np.float16, np.float32, np.float64)
    ),
    opset=st.sampled_from([13, 15, 17, 19, 21]),
    perturb=st.sets(st.sampled_from(["saturate", "reader", "collide", "nudge"])),
    pick=st.integers(0, 50),
    factor=st.sampled_from([-1.0, 2.0, 1.0 + 2.0**-20, 0.5]),
    seed=st.integers(0, 2**32 - 1),
    functions=st.integers(0, 4),
)
def test_inline_forms_keep_the_contract(
    case: Any, opset: int, perturb: set[str], pick: int, factor: float, seed: int, functions: int
) -> None:
    inputs = [(n, case.inputs[n].dtype, list(case.inputs[n].shape)) for n in spec.INPUT_NAMES]
    node = lo.make_node(case.op_type, list(spec.INPUT_NAMES), "y", name="node", **case.attrs)
    original = lo.make_model(lo.make_graph([node], inputs, ["y"], name="g"), onnx_opset=opset)
    model = compile_model(original, target="onnx", mode="inline").model
    if "saturate" in perturb and opset >= 19:
        saturate_first(model)
    if "reader" in perturb:
        read_intermediate(model, pick)
    if "collide" in perturb:
        colliding_branch(model, "y", case.op_type)
    if "nudge" in perturb:
        nudge_constant(model, pick, factor)
    event(f"inline {case.op_type}")
    arrays = {n: case.inputs[n] for n in spec.INPUT_NAMES}
    infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in arrays.items()}
    compute = spec.validate(case.op_type, infos, case.attrs).compute.dtype
    rng = np.random.default_rng(seed)
    beta = float(case.attrs.get("beta", 0.0))
    feeds_ = {n: _values(a.shape, a.dtype, compute, beta, rng) for n, a in arrays.items()}
    if "collide" in perturb:
        feeds_["flag"] = np.asarray(seed % 2 == 0)
    names = {n: n for n in spec.INPUT_NAMES}
    subject = Subject(model, case.op_type, dict(case.attrs), names, compute)  # type: ignore[arg-type]
    _check(subject, feeds_, False, functions == 0)


# --------------------------------------------------------------------------- PyTorch


EXPORTED_STEPS = [
    ("kl_div", "input", "batchmean", {"log_target": 1}),
    ("kl_div", "input", "mean", {"log_target": 0}),
    ("kl_div", "target", "mean", {"log_target": 1}),
    ("kl_div", "target", "sum", {"log_target": 0}),
    ("smooth_l1", "input", "mean", {"beta": 0.5}),
    ("smooth_l1", "input", "mean", {"beta": 0.3}),
    ("smooth_l1", "input", "sum", {"beta": 2.0}),
    ("smooth_l1", "input", "none", {"beta": 1.0}),
    ("smooth_l1", "input", "mean", {"beta": 0.0}),
    ("mse", "input", "mean", {}),
    ("mse", "input", "none", {}),
    ("huber", "input", "mean", {"delta": 0.5}),
    ("huber", "input", "none", {"delta": 1.0}),
    ("soft_margin", "input", "mean", {}),
    ("bce", "input", "mean", {}),
    ("bce_logits", "input", "sum", {}),
    ("l1", "input", "mean", {}),
    ("l1", "input", "none", {}),
]
OPERATOR = {
    ("kl_div", "input"): "KlDivBackward",
    ("kl_div", "target"): "KlDivTargetBackward",
    ("mse", "input"): "MseLossBackward",
    ("huber", "input"): "HuberLossBackward",
    ("soft_margin", "input"): "SoftMarginLossBackward",
    ("bce", "input"): "BinaryCrossEntropyBackward",
    ("bce_logits", "input"): "BinaryCrossEntropyWithLogitsBackward",
    ("l1", "input"): "L1LossBackward",
}


@functools.cache
def _exported(index: int, dtype: str, dynamic: bool) -> onnx.ModelProto:
    torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
    pytest.importorskip("onnxscript", reason="needs onnxscript: pip install -e '.[torch]'")
    from lossgrad_compiler.torch import export_training_step
    from tests.fusion.steps import loss_gradient_step

    loss, wrt, reduction, attrs = EXPORTED_STEPS[index]
    step = loss_gradient_step(loss, wrt, reduction, **attrs)
    example = tuple(torch.randn(4, 5, dtype=getattr(torch, dtype)) for _ in range(2))
    if loss == "bce":  # the forward refuses values outside [0, 1]
        example = tuple(torch.sigmoid(e) for e in example)
    shapes = {"x": {0: "batch"}, "t": {0: "batch"}} if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, _ = export_training_step(step, example, dynamic_shapes=shapes, fuse_gradients=False)
    return model


@settings(max_examples=max(1, EXAMPLES // 25), **SETTINGS)
@given(
    index=st.integers(0, len(EXPORTED_STEPS) - 1),
    dtype=st.sampled_from(["float32", "float32", "float16", "float64"]),
    dynamic=st.booleans(),
    batch=st.integers(1, 6),
    perturb=st.sets(st.sampled_from(["saturate", "reader", "collide"])),
    pick=st.integers(0, 50),
    reassociate=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_exported_steps_keep_the_contract(
    index: int,
    dtype: str,
    dynamic: bool,
    batch: int,
    perturb: set[str],
    pick: int,
    reassociate: bool,
    seed: int,
) -> None:
    loss, wrt, reduction, attrs = EXPORTED_STEPS[index]
    model = onnx.ModelProto()
    model.CopyFrom(_exported(index, dtype, dynamic))
    if "saturate" in perturb:
        saturate_first(model)
    if "reader" in perturb:
        read_intermediate(model, pick)
    op_type = OPERATOR.get((loss, wrt), "SmoothL1LossBackward")
    output = model.graph.output[0].name
    if "collide" in perturb:
        colliding_branch(model, output, op_type)
    rng = np.random.default_rng(seed)
    shape = (batch if dynamic else 4, 5)
    np_dtype = np.dtype(dtype)
    compute = np.float64 if dtype == "float64" else np.float32
    if dtype == "float16" and loss in ("kl_div", "bce_logits"):
        compute = np.float16  # the exporter computes these gradients in float16
    beta = float(attrs.get("beta", attrs.get("delta", 0.0)))
    inputs = {i.name: _values(shape, np_dtype, compute, beta, rng) for i in model.graph.input[:2]}
    if "collide" in perturb:
        inputs["flag"] = np.asarray(seed % 2 == 0)
    names = [i.name for i in model.graph.input[:2]]
    terms = {"grad_output": None, "self": names[0], "target": names[1]}
    event(f"exported {loss} wrt {wrt} {dtype}")
    subject = Subject(model, op_type, {**attrs, "reduction": reduction}, terms, compute, output)
    _check(subject, inputs, reassociate, False)


# --------------------------------------------------------------------------- nll_loss


@st.composite
def nll_recipes(draw: Any) -> NllRecipe:
    """Mostly forms the pass can prove (constant scales, the 4-D mean's 1/count, finite
    constant weights), with what it must leave mixed in: input grad_outputs and weights,
    weights or products that overflow or hold inf, and the near misses."""
    rank = draw(st.sampled_from([1, 2, 2, 4]))
    classes = draw(st.integers(2, 5))
    kinds = ["constant"] * 3 + ["rows", "input", "dropped"] + ["count"] * 4 * (rank == 4)
    scale = draw(st.sampled_from(kinds))
    weight = draw(st.sampled_from(["", "", "input", "constant", "constant"]))
    if scale == "dropped" and not weight:
        weight = "constant"  # v is the weight alone
    values = [draw(st.sampled_from([0.5, 1.0, 2.0, -3.0, 0.0, 0.1])) for _ in range(classes)]
    if draw(st.integers(0, 3)) == 0:
        values[draw(st.integers(0, classes - 1))] = draw(
            st.sampled_from([6e4, 3e38, float("inf"), float("nan")])
        )
    mutation = draw(st.sampled_from(["", "", "", "", "", "", *MUTATIONS]))
    batch = classes if mutation == "weight_other_axis" else draw(st.integers(1, 4))
    return NllRecipe(
        rank=rank,
        batch=batch,
        classes=classes,
        dtype=draw(st.sampled_from(["float32", "float32", "float64", "float16"])),
        scale=scale,
        scale_value=draw(st.sampled_from([1.0, 0.25, -1.5, 3.5, 3e38, 1e-45])),
        weight=weight,
        weight_values=tuple(values),
        ignore_index=draw(st.sampled_from([-100, -1, 0, classes - 1])),
        dynamic=rank >= 2 and mutation != "weight_other_axis" and draw(st.booleans()),
        mutation=mutation,
    )


@settings(max_examples=max(1, EXAMPLES // 20), **SETTINGS)
@given(recipe=nll_recipes(), seed=st.integers(0, 2**32 - 1))
def test_nll_loss_graphs_keep_every_element(recipe: NllRecipe, seed: int) -> None:
    model = build_nll(recipe)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fused, report = fuse(model)
    event(f"fused: {', '.join(f.op_type for f in report.fused) or 'nothing'}")
    if report.left:
        event(f"left: {report.left[0].reason.split(':')[0][:60]}")
    check_schemas(fused)  # the ai.lossgrad v4 schema
    rng = np.random.default_rng(seed)
    for batch in (None, 3) if recipe.dynamic else (None,):
        problems = check_exact(model, fused, nll_feeds(recipe, rng, batch=batch))
        assert not problems, "\n".join([*report.lines(), *problems])


# --------------------------------------------------------------------------- cross_entropy


@settings(max_examples=max(1, EXAMPLES // 50), **SETTINGS)
@given(recipe=ce_recipes(), seed=st.integers(0, 2**32 - 1))
def test_cross_entropy_graphs_keep_every_element(recipe: Any, seed: int) -> None:
    model = build_ce(recipe)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fused, report = fuse(model)
    event(f"fused: {', '.join(f.op_type for f in report.fused) or 'nothing'}")
    if report.left:
        event(f"left: {report.left[0].reason.split(':')[0][:60]}")
    check_schemas(fused)  # the ai.lossgrad v5 schema
    rng = np.random.default_rng(seed)
    for batch in (None, 3) if recipe.nll.dynamic else (None,):
        inputs = ce_feeds(recipe, rng, batch=batch)
        problems = check_ce(recipe, model, fused, inputs, recipe.nll.dtype)
        assert not problems, "\n".join([*report.lines(), *problems])
