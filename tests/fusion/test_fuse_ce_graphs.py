"""The exporter's cross_entropy backward written by hand (tests/fusion/ce_graphs.py): without
label smoothing it becomes one CrossEntropyLossGrad that gives the graph's elements (exactly
under the ReferenceEvaluator, NaN and inf included; in ONNX Runtime within another exp's
ulps), and the near misses, label smoothing and the unprovable forms are left with their
reasons (fusion/cross_entropy.py), the nll term inside fused alone where it can be."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from lossgrad_compiler import fuse, reference, spec
from lossgrad_compiler.fusion.cross_entropy import CE_TOTAL_WEIGHT_ONE
from tests.fusion.ce_graphs import CeRecipe, build, check_ce, feeds
from tests.fusion.contract import run_ort
from tests.fusion.nll_graphs import NllRecipe, check_schemas

pytest.importorskip("onnxruntime", reason="needs onnxruntime (the core dependencies)")

CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
W4 = (0.5, 1.0, 2.0, 3.0)
FUSED = {
    "sum": CeRecipe(NllRecipe()),
    "sum-f64-ii-1-dynamic": CeRecipe(
        NllRecipe(dtype="float64", ignore_index=-1, scale_value=0.25, dynamic=True)
    ),
    "weight-constant-ii-class": CeRecipe(
        NllRecipe(weight="constant", weight_values=W4, ignore_index=2, scale_value=-1.5)
    ),
    "weight-alone-f16": CeRecipe(
        NllRecipe(
            dtype="float16", scale="dropped", weight="constant", weight_values=(0.5, 1, 2, 3e4)
        )
    ),
    "scaled-f16": CeRecipe(NllRecipe(dtype="float16", scale_value=3.5, batch=5, classes=6)),
}


def _node_attrs(model: onnx.ModelProto) -> dict:
    ours = [n for n in model.graph.node if n.domain == spec.DOMAIN]
    assert [n.op_type for n in ours] == [CE]
    return {a.name: onnx.helper.get_attribute_value(a) for a in ours[0].attribute}


@pytest.mark.parametrize("name", list(FUSED))
def test_fused_form_keeps_every_element(name: str) -> None:
    recipe = FUSED[name]
    model = build(recipe)
    fused, report = fuse(model)
    attrs = _node_attrs(fused)
    assert attrs["reduction"].decode() == "sum" and attrs["label_smoothing"] == 0.0
    ii, classes = recipe.nll.ignore_index, recipe.nll.classes
    assert attrs["ignore_index"] == (ii - classes if 0 <= ii < classes else ii)
    assert {n.op_type for n in fused.graph.node} & {"ScatterElements", "Exp", "Sub"} == set()
    check_schemas(fused)  # the ai.lossgrad v5 schema
    # one grad_output element (or none, the weight alone): maybe the exporter's mean
    assert report.lines()[2].startswith(f"    note: {CE_TOTAL_WEIGHT_ONE}"), report.lines()
    rng = np.random.default_rng(sum(map(ord, name)))
    for k in range(6):
        batch = 2 + k if recipe.nll.dynamic else None
        problems = check_ce(recipe, model, fused, feeds(recipe, rng, batch), recipe.nll.dtype)
        assert not problems, "\n".join([*report.lines(), *problems])


def test_fused_node_is_the_operator_on_its_inputs() -> None:
    """The fused node's values are reference.evaluate's on the node's own inputs (self = lp,
    the target wrapped as ScatterElements reads it) and equal the original graph's."""
    recipe = CeRecipe(NllRecipe(weight="constant", weight_values=W4, scale_value=0.75))
    model = build(recipe)
    fused, _ = fuse(model)
    x = np.array([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0], [3.0, -2.0, 0.5, 0.25]],
                 np.float32)  # fmt: skip
    t = np.array([2, -100, 3])
    lp = (x - np.log(np.sum(np.exp(x), axis=1, keepdims=True))).astype(np.float32)
    want = reference.evaluate(
        CE,
        {"grad_output": np.float32(0.75), "self": lp, "target": t,
         "weight": np.asarray(W4, np.float32)},
        {"reduction": "sum", "ignore_index": -100, "label_smoothing": 0.0},
    )  # fmt: skip
    (original,) = run_ort(model, {"x": x, "t": t}, "stock", optimize=False)
    np.testing.assert_allclose(want, original, rtol=1e-6, atol=1e-7)
    assert not check_ce(recipe, model, fused, {"x": x, "t": t}, "float32")


LEFT = {
    "swapped-sub": (CeRecipe(mutation="swapped_sub"), "the negated log_softmax backward"),
    "sum-axis0": (CeRecipe(mutation="sum_axis0"), "does not add over the class dimension"),
    "keepdims0": (  # batch == classes: the [N] sum broadcasts along the classes
        CeRecipe(NllRecipe(batch=4), mutation="keepdims0"),
        "does not keep the class dimension",
    ),
    "no-cast-back": (
        CeRecipe(NllRecipe(dtype="float16"), mutation="no_cast_back"),
        "do not have one type and shape",
    ),
    "compute-f64": (CeRecipe(mutation="compute_f64"), "computes in float64; Cross"),
    "exp-read-elsewhere": (CeRecipe(mutation="exp_read_elsewhere"), "'p' (Exp), computed inside"),
    "smoothing": (CeRecipe(mutation="smoothing"), "label smoothing: every class of a kept row"),
    "smoothing-mean": (
        CeRecipe(mutation="smoothing_mean"),
        "neither CrossEntropyLossGrad's mean nor its sum",
    ),
}


@pytest.mark.parametrize("name", list(LEFT))
def test_near_miss_is_left_and_the_nll_term_fused_alone(name: str) -> None:
    """The log_softmax backward stays as written, with the reason; the nll term inside
    (provably finite here) still becomes NLLLossBackward, which keeps its values."""
    recipe, reason = LEFT[name]
    model = build(recipe)
    fused, report = fuse(model)
    assert [left.op_type for left in report.left] == [CE], report.lines()
    assert reason in report.left[0].reason, report.lines()
    assert [f.op_type for f in report.fused] == ["NLLLossBackward"], report.lines()
    kept = {n.op_type for n in fused.graph.node}
    assert {"Exp", "ReduceSum", "Sub"} <= kept and "ScatterElements" not in kept
    rng = np.random.default_rng(sum(map(ord, name)))
    problems = check_ce(recipe, model, fused, feeds(recipe, rng), recipe.nll.dtype, ())
    assert not problems, "\n".join([*report.lines(), *problems])


UNPROVABLE = {
    "grad-output-input": (NllRecipe(scale="input"), "grad_output 'g' is not provably finite"),
    "grad-output-rows": (NllRecipe(scale="rows"), "grad_output 'g_u' is not provably finite"),
    "weight-input": (NllRecipe(weight="input"), "weight 'w' is not provably finite"),
    "weight-holds-inf": (
        NllRecipe(weight="constant", weight_values=(1.0, np.inf, 1, 1)),
        "is not provably finite",
    ),
}


@pytest.mark.parametrize("name", list(UNPROVABLE))
def test_unprovable_nll_term_leaves_the_whole_gradient(name: str) -> None:
    nll, reason = UNPROVABLE[name]
    model = build(CeRecipe(nll))
    fused, report = fuse(model)
    assert not report.fused and len(report.left) == 1, report.lines()
    assert report.left[0].op_type == CE and reason in report.left[0].reason, report.lines()
    assert fused.graph.node == model.graph.node


def test_why_a_non_finite_grad_output_is_left() -> None:
    """g = inf on a kept row: the graph's row is NaN (0*inf, then a NaN row sum); the
    operator's rowsum is -inf, giving +inf (or NaN at the target) instead."""
    model = build(CeRecipe(NllRecipe(scale="input")))
    inputs = {"x": np.zeros((3, 4), np.float32), "t": np.array([1, 0, 2]), "g": np.float32(np.inf)}
    (graph,) = run_ort(model, inputs, "stock", optimize=False)
    assert np.isnan(graph).all()
    lp = np.full((3, 4), np.log(0.25), np.float32)
    node = reference.evaluate(
        CE, {"grad_output": np.float32(np.inf), "self": lp, "target": inputs["t"]},
        {"reduction": "sum", "ignore_index": -100, "label_smoothing": 0.0},
    )  # fmt: skip
    assert np.isposinf(node[0, 0]) and np.isnan(node[0, 1])


def test_why_label_smoothing_is_left() -> None:
    """The graph's ReduceSum over C smoothing terms and the closed form round differently:
    with gl = -0.1 at every class and -1 at the target, C = 7, adding in order gives
    another float32 than (-1) + 7*(-0.1) does."""
    gl = np.array([-1.0, *([-0.1] * 6)], np.float32)
    in_order = np.float32(0)
    for v in gl:
        in_order = np.float32(in_order + v)
    closed = np.float32(np.float32(-0.9) + np.float32(7) * np.float32(-0.1))
    assert in_order != closed
