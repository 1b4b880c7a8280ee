"""The exporter's nll_loss backward written by hand (tests/fusion/nll_graphs.py): the forms
fused into NLLLossBackward / NLLLoss2dBackward compute exactly the graph's elements in every
runtime (negative targets wrapped as ScatterElements reads them, NaN and inf included), and
the near misses and unprovable forms are left with their reasons (fusion/nll.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from lossgrad_compiler import fuse, spec
from lossgrad_compiler.fusion.nll import TOTAL_WEIGHT_ONE
from tests.fusion.contract import ORT_ERRORS, run_ort
from tests.fusion.nll_graphs import NllRecipe, build, check_exact, check_schemas, feeds

pytest.importorskip("onnxruntime", reason="needs onnxruntime (the core dependencies)")

W4 = (0.5, 1.0, 2.0, 3.0)
FUSED = {
    "sum-2d": (NllRecipe(), "NLLLossBackward", "sum"),
    "no-batch": (NllRecipe(rank=1), "NLLLossBackward", "sum"),
    "scaled-f64-ii-1-dynamic": (
        NllRecipe(dtype="float64", ignore_index=-1, scale_value=0.25, dynamic=True),
        "NLLLossBackward",
        "sum",
    ),
    "weight-constant": (NllRecipe(weight="constant", weight_values=W4), "NLLLossBackward", "sum"),
    "weight-alone-f16": (
        NllRecipe(
            dtype="float16", scale="dropped", weight="constant", weight_values=(0.5, 1, 2, 3e4)
        ),
        "NLLLossBackward",
        "sum",
    ),
    "2d-mean-count": (NllRecipe(rank=4, scale="count"), "NLLLoss2dBackward", "sum"),
    "2d-mean-count-weight-ii-class": (
        NllRecipe(rank=4, scale="count", weight="constant", weight_values=W4, ignore_index=2),
        "NLLLoss2dBackward",
        "sum",
    ),
}


@pytest.mark.parametrize("name", list(FUSED))
def test_fused_form_keeps_every_element(name: str) -> None:
    recipe, op_type, reduction = FUSED[name]
    model = build(recipe)
    fused, report = fuse(model)
    ours = [n for n in fused.graph.node if n.domain == spec.DOMAIN]
    assert [n.op_type for n in ours] == [op_type], report.lines()
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in ours[0].attribute}
    assert attrs["reduction"].decode() == reduction
    ii = recipe.ignore_index
    assert attrs["ignore_index"] == (ii - recipe.classes if 0 <= ii < recipe.classes else ii)
    assert not any(n.op_type == "ScatterElements" for n in fused.graph.node)
    check_schemas(fused)  # the ai.lossgrad v4 schema
    rng = np.random.default_rng(sum(map(ord, name)))
    for k in range(4):
        batch = 2 + k if recipe.dynamic else None
        problems = check_exact(model, fused, feeds(recipe, rng, batch=batch))
        assert not problems, "\n".join([*report.lines(), *problems])


LEFT = {
    "grad-output-input": (NllRecipe(scale="input"), "grad_output 'g' is not provably finite"),
    "grad-output-rows": (NllRecipe(scale="rows"), "grad_output 'g_u' is not provably finite"),
    "weight-input": (NllRecipe(weight="input"), "weight 'w' is not provably finite"),
    "product-overflows": (
        NllRecipe(scale_value=3e38, weight="constant", weight_values=(2.0, 1, 1, 1)),
        "is not provably finite",
    ),
    "weight-holds-inf": (
        NllRecipe(weight="constant", weight_values=(1.0, np.inf, 1, 1)),
        "is not provably finite",
    ),
    "other-mask": (NllRecipe(mutation="other_mask"), "another mask than the target's"),
    "scatter-axis": (NllRecipe(mutation="scatter_axis"), "along axis 0, not the class dim"),
    "plus-ones": (NllRecipe(mutation="plus_ones"), "the scattered values are not -1"),
    "other-target": (NllRecipe(mutation="other_target"), "do not take the target the mask"),
    "else-nonzero": (NllRecipe(mutation="else_nonzero"), "else branch is not 0"),
    "weight-other-axis": (
        NllRecipe(batch=4, weight="constant", weight_values=W4, mutation="weight_other_axis"),
        "the weight is not reshaped along the class dimension",
    ),
    "mask-read-elsewhere": (NllRecipe(mutation="mask_read_elsewhere"), "'keep' (Not)"),
}


@pytest.mark.parametrize("name", list(LEFT))
def test_near_miss_is_left_with_its_reason(name: str) -> None:
    recipe, reason = LEFT[name]
    model = build(recipe)
    fused, report = fuse(model)
    assert not report.fused and len(report.left) == 1, report.lines()
    assert reason in report.left[0].reason, report.lines()
    assert report.left[0].op_type == "NLLLossBackward"
    assert fused.graph.node == model.graph.node


def test_unprovable_grad_output_would_change_a_row() -> None:
    """Why an input grad_output is left: g = inf on a kept row is a NaN row in the graph
    (0*inf), where the operator gives -inf at the target and 0 elsewhere."""
    recipe = NllRecipe(scale="input")
    inputs = {"x": np.zeros((3, 4), np.float32), "t": np.array([1, 0, 2]), "g": np.float32(np.inf)}
    (grad,) = run_ort(build(recipe), inputs, "stock", optimize=False)
    assert np.isnan(grad[0, 0]) and grad[0, 1] == -np.inf and np.isnan(grad[0, 2:]).all()


def test_negative_target_and_class_ignore_index_keep_the_graph_meaning() -> None:
    """ScatterElements reads t = -2 as class C - 2; with ignore_index 2 (a class) that row
    is kept in the graph. The fused node reads the wrapped target and ignores ii - C."""
    recipe = NllRecipe(ignore_index=2, scale_value=1.5)
    model = build(recipe)
    fused, report = fuse(model)
    assert "ignores -2 instead" in report.lines()[2], report.lines()
    inputs = {"x": np.zeros((3, 4), np.float32), "t": np.array([-2, 2, 3])}
    (grad,) = run_ort(fused, inputs, "runtime")
    want = np.zeros((3, 4), np.float32)
    want[0, 2], want[2, 3] = -1.5, -1.5
    np.testing.assert_array_equal(grad, want)
    assert not check_exact(model, fused, inputs)


def test_target_outside_the_graph_range_fails_in_both() -> None:
    """t = C: the graph's ScatterElements refuses it; the native kernel raises aclnn 161002."""
    recipe = NllRecipe()
    model = build(recipe)
    fused, _ = fuse(model)
    inputs = {"x": np.zeros((3, 4), np.float32), "t": np.array([0, 4, 1])}
    with pytest.raises(ORT_ERRORS):
        run_ort(model, inputs, "stock", optimize=False)
    with pytest.raises(ORT_ERRORS, match="161002"):
        run_ort(fused, inputs, "stock")


def test_report_says_a_one_element_sum_may_be_the_exporters_mean() -> None:
    _, report = fuse(build(NllRecipe()))
    assert report.lines()[2] == f"    note: {TOTAL_WEIGHT_ONE}"
    _, report = fuse(build(NllRecipe(rank=4, scale="count")))
    assert len(report.lines()) == 2  # a 4-D mean divides by the kept count: no note
    # v is the weight alone (the seed 1 folded away): the same graph as the exporter's mean
    weights = (0.5, 1.0, 1.5, 2.0)
    dropped = NllRecipe(scale="dropped", weight="constant", weight_values=weights)
    _, report = fuse(build(dropped))
    assert report.lines()[2] == f"    note: {TOTAL_WEIGHT_ONE}", report.lines()
