"""CrossEntropyLossGrad on the standard-ONNX target: the level-2 constructs it adds (the
reductions D and W before the gradient, read through a map to (); the gather w[t], an ONNX
Gather; the class count as a float; math.exp; the label_smoothing FLOAT) translated and run in
stock ONNX Runtime, from lossgrad-level modules and from ONNX models through compile_model.

Agreement with reference.evaluate: bit for bit in float16/bfloat16 (computed in float32 and
rounded once), helpers.tolerances.TIGHT in float32/float64, where ORT's Exp is not numpy's
and its ReduceSum is not the reference's sequential sum (test_onnx_classes_translation's
`assert_agrees`). Standard ONNX cannot raise on a value: a bad target gives a zero row and
the report says so."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper
from xdsl.dialects import func

from lossgrad_compiler import errors, messages, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.backends.onnx import translate_function
from lossgrad_compiler.context import parse_module
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.frontend import import_model
from lossgrad_compiler.runtime.ort_io import make_session, run_session
from tests.helpers.class_cases import ClassCase, make_class_case, out_of_range_case
from tests.helpers.class_models import class_feeds, class_model
from tests.onnx.test_onnx_classes_models import cases_model
from tests.onnx.test_onnx_classes_translation import (
    assert_agrees,
    assert_bits_equal,
    lowered,
    model_of,
    run_case,
    safe_result,
)

CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
SMOOTHINGS = (0.0, 0.25, 1.0)
REDUCTIONS = ("none", "mean", "sum")
FLOAT_DTYPES = [t.dtype for t in spec.FLOAT_TYPES]
MODES = ("functions", "inline")

pytestmark = pytest.mark.usefixtures("registered_schemas")


def ce_case(shape: tuple[int, ...] = (6, 5), dtype: Any = np.float32, **options: Any) -> ClassCase:
    return make_class_case(CE, shape, dtype, **options)


def gathers_of(nodes: Any, source: str) -> list[onnx.NodeProto]:
    """The Gathers from `source` with its zero appended (rules.py: the zero for C = 0)."""
    padded = {n.output[0] for n in nodes if n.op_type == "Concat" and n.input[0] == source}
    return [n for n in nodes if n.op_type == "Gather" and n.input[0] in padded]


# --------------------------------------------------------------------------- level 2 → ONNX


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("smoothing", SMOOTHINGS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_smoothing_reduction_weight_and_ignore_index(dtype: Any, smoothing: float, dynamic):
    grid = itertools.product(REDUCTIONS, (False, True), (-100, 1))
    for k, (reduction, weighted, ignore) in enumerate(grid):
        case = ce_case(dtype=dtype, reduction=reduction, weighted=weighted, ignore_index=ignore,
                       label_smoothing=smoothing, seed=k)  # fmt: skip
        (got,) = run_case(case, dynamic=dynamic)
        assert_agrees(got, case.expected(), case, f"{case.label}, dynamic={dynamic}")


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_larger_weighted_smoothed_mean_is_within_tight(dynamic: bool):
    """N = 257 rows summed into D and C = 33 weights into W by ReduceSum, in ORT's order."""
    for dtype in (np.float32, np.float64):
        case = ce_case((257, 33), dtype, weighted=True, ignore_index=3, label_smoothing=0.25)
        (got,) = run_case(case, dynamic=dynamic)
        assert_agrees(got, case.expected(), case, case.label)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_the_weight_is_gathered_at_each_rows_target(dynamic: bool):
    """Distinct weights, every class a target: only w[t_i] gives the reference's D and the
    nll term; the Gather reads the weight argument (with its zero appended), along axis 0."""
    targets = np.array([4, 0, 3, 1, 2, 4, 0])
    for smoothing in (0.0, 0.25):
        case = ce_case((7, 5), np.float16, weighted=True, targets=targets,
                       label_smoothing=smoothing)  # fmt: skip
        (got,) = run_case(case, dynamic=dynamic)
        assert_bits_equal(got, case.expected(), case.label)
        nodes = translate_function(lowered(case, dynamic=dynamic)).nodes
        gathers = gathers_of(nodes, "weight")
        assert len(gathers) == 2  # in D's reduction and in the gradient
        assert all(helper.get_attribute_value(g.attribute[0]) == 0 for g in gathers)
    unweighted = translate_function(lowered(ce_case((7, 5), targets=targets), dynamic=dynamic))
    assert gathers_of(unweighted.nodes, "weight") == []


def test_the_reductions_are_reduce_sums_to_0d_in_the_compute_type():
    """mean with a weight and smoothing: D (over target) and W (over weight), each one
    ReduceSum over axis 0 with keepdims 0, in float32 for a float16 call."""
    case = ce_case(dtype=np.float16, weighted=True, label_smoothing=0.25)
    model = model_of(lowered(case, dynamic=True), case.present, ["grad_input"])
    sums = [n for n in model.graph.node if n.op_type == "ReduceSum"]
    assert len(sums) == 2
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types = {v.name: v.type.tensor_type for v in inferred.graph.value_info}
    for node in sums:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert attrs.get("keepdims") == 0 and not attrs.get("noop_with_empty_axes", 0)
        assert types[node.output[0]].elem_type == onnx.TensorProto.FLOAT
        assert len(types[node.output[0]].shape.dim) == 0
    plain = ce_case(dtype=np.float16, reduction="sum")  # neither D nor W: no ReduceSum
    nodes = translate_function(lowered(plain, dynamic=True)).nodes
    assert "ReduceSum" not in {n.op_type for n in nodes}


EMPTY_SUM = """
func.func @f(%a: tensor<{n}xf32>) -> tensor<f32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
      iterator_types = ["reduction"]}} ins(%a : tensor<{n}xf32>) outs(%init : tensor<f32>) {{
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  }} -> tensor<f32>
  func.return %r : tensor<f32>
}}"""


@pytest.mark.parametrize("size", ["?", "0", "3"])
def test_a_0d_reduction_of_an_empty_input_is_zero(size: str):
    """An all-reduction into a 0-d result: a 0-d 0 for an empty input (D of an empty
    batch), the sum otherwise."""
    (function,) = parse_module(EMPTY_SUM.format(n=size)).body.block.ops
    assert isinstance(function, func.FuncOp)
    session = make_session(model_of(function, ["a"], ["r"]))
    inputs = [np.zeros(0, np.float32), np.array([1.0, 2.0, 3.0], np.float32)]
    for a in inputs if size == "?" else [inputs[0] if size == "0" else inputs[1]]:
        (got,) = run_session(session, {"a": a})
        assert got.shape == () and got.dtype == np.float32
        assert float(got) == float(a.sum())


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_an_empty_batch_every_reduction(dynamic: bool):
    for reduction, weighted in itertools.product(REDUCTIONS, (False, True)):
        case = ce_case((0, 4), np.float32, reduction=reduction, weighted=weighted,
                       label_smoothing=0.25)  # fmt: skip
        (got,) = run_case(case, dynamic=dynamic)
        assert got.shape == (0, 4) and got.dtype == np.float32


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_every_row_ignored_with_mean_gives_zeros(dynamic: bool):
    """D = 0: the smoothing and nll terms are masked before they meet the 1/0."""
    for dtype, weighted, smoothing in itertools.product(
        (np.float16, np.float32), (False, True), (0.0, 0.25)
    ):
        case = ce_case((4, 3), dtype, weighted=weighted, ignore_index=1,
                       targets=np.ones(4, np.int64), label_smoothing=smoothing)  # fmt: skip
        (got,) = run_case(case, dynamic=dynamic)
        assert_bits_equal(got, np.zeros((4, 3), dtype), case.label)
        assert_bits_equal(got, case.expected(), case.label)


def test_zero_weights_on_kept_rows_give_nan_rows():
    """D = 0 while rows are kept (their weights are 0): those rows are NaN, as in PyTorch."""
    good = ce_case((4, 3), np.float32, weighted=True, targets=np.array([0, 0, 2, 0]))
    weight = np.array([0.0, 1.0, 0.0], np.float32)
    case = dataclasses.replace(good, inputs={**good.inputs, "weight": weight})
    with np.errstate(all="ignore"):
        expected = case.expected()
    assert np.isnan(expected).all()
    (got,) = run_case(case, dynamic=True)
    assert np.isnan(got).all()


def test_one_class_gives_zeros():
    for smoothing in SMOOTHINGS:
        case = ce_case((5, 1), np.float32, weighted=True, label_smoothing=smoothing)
        (got,) = run_case(case, dynamic=True)
        assert_agrees(got, case.expected(), case, case.label)
        assert not got.any()


def _class_counts_as_floats(nodes: Any) -> list[onnx.NodeProto]:
    """Casts to float of a dimension read from a shape (a Gather of a Shape)."""
    dims = {n.output[0] for n in nodes if n.op_type == "Gather" and n.input[0].endswith("shape")}
    to_float = onnx.TensorProto.FLOAT
    return [
        n
        for n in nodes
        if n.op_type == "Cast"
        and n.input[0] in dims
        and helper.get_attribute_value(n.attribute[0]) == to_float
    ]


def test_a_dynamic_class_count_enters_the_smoothing_as_a_float():
    """With C dynamic and ls > 0, ls/C reads the class count (arith.uitofp → Cast to float)
    from self's shape at run time; with ls = 0 it is not computed."""
    smoothed = translate_function(lowered(ce_case(label_smoothing=0.25), dynamic=True)).nodes
    assert len(_class_counts_as_floats(smoothed)) == 1
    plain = translate_function(lowered(ce_case(), dynamic=True)).nodes
    assert _class_counts_as_floats(plain) == []


# --------------------------------------------------------------------------- compile_model


SMOOTHED_CASES = [
    ce_case(dtype=dtype, reduction=reduction, weighted=weighted, ignore_index=1,
            label_smoothing=smoothing, seed=k)
    for k, (dtype, reduction, weighted, smoothing) in enumerate(itertools.product(
        (np.float16, np.float32), REDUCTIONS, (False, True), SMOOTHINGS))
]  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_a_compiled_model_of_every_form(mode: str):
    """One node per case (36 signatures), symbolic shapes, compiled and run in stock ORT."""
    model, feeds = cases_model(SMOOTHED_CASES, static=False)
    result = compile_model(model, mode=mode)
    compiled = result.model
    onnx.checker.check_model(compiled, full_check=True)
    assert len(result.report.signatures) == len(SMOOTHED_CASES)
    if mode == "inline":
        assert spec.DOMAIN not in {n.domain for n in compiled.graph.node}
        assert not compiled.functions
    else:
        assert len(compiled.functions) == len(SMOOTHED_CASES)
        assert {o.domain: o.version for o in compiled.opset_import}[spec.DOMAIN] == 5
    outputs = run_session(make_session(compiled), feeds)
    for got, case in zip(outputs, SMOOTHED_CASES, strict=True):
        assert_agrees(got, case.expected(), case, f"{mode}: {case.label}")


@pytest.mark.parametrize("mode", MODES)
def test_one_compiled_file_serves_every_batch_and_class_count(mode: str):
    probe = ce_case(weighted=True, label_smoothing=0.25)
    session = make_session(compile_model(class_model(probe, symbolic=True), mode=mode).model)
    for k, shape in enumerate(((6, 5), (0, 5), (1, 3), (7, 9), (3, 1))):
        case = ce_case(shape, weighted=True, label_smoothing=0.25, seed=k)
        (got,) = run_session(session, class_feeds(case))
        assert_agrees(got, case.expected(), case, case.label)


def test_the_graph_computes_the_float32_value_of_the_attribute():
    """ONNX keeps label_smoothing as a FLOAT (float32): 0.1 is 0.100000001490116..., which
    the signature and its graph use; float64 shows the difference."""
    stored = float(np.float32(0.1))
    case = ce_case(dtype=np.float64, weighted=True, label_smoothing=0.1)
    (site,) = import_model(class_model(case)).sites
    assert site.signature.attributes["label_smoothing"] == stored != 0.1
    (got,) = run_session(make_session(compile_model(class_model(case)).model), class_feeds(case))
    as_stored = dataclasses.replace(case, attrs={**case.attrs, "label_smoothing": stored})
    assert_agrees(got, as_stored.expected(), as_stored, "float32 label_smoothing")
    assert not np.allclose(got, case.expected(), rtol=1e-12, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_a_bad_target_gives_a_zero_row_and_the_report_says_so(mode: str):
    """Targets C and -7 with a weighted smoothed mean: no crash, the bad rows are zeros and D
    leaves them out (the reference with them ignored); the note names the operator."""
    bad = out_of_range_case(CE)
    case = ce_case(weighted=True, label_smoothing=0.25, targets=bad.inputs["target"])
    with pytest.raises(errors.TargetValueError):
        case.expected()
    result = compile_model(class_model(case, symbolic=True), mode=mode)
    (got,) = run_session(make_session(result.model), class_feeds(case))
    assert_agrees(got, safe_result(case), case, case.label)
    assert not got[[0, -1]].any() and got[1:-1].any()
    (line,) = [line for line in result.artifact.lines if messages.TARGET_RANGE.key in line]
    assert line.startswith(f"note: {CE} (signature cross_entropy_loss_grad__")
    assert "gives a zero row instead of the error aclnn 161002 ACLNN_ERR_PARAM_INVALID" in line


# --------------------------------------------------------------------------- errors


def ce_model(
    attrs: dict[str, Any],
    shapes: dict[str, list] | None = None,
    values: tuple[str, ...] = ("go", "x", "t", "w"),
) -> onnx.ModelProto:
    """One CrossEntropyLossGrad node 'n' on self [3, 5], written with onnx.helper (any
    attribute type goes)."""
    base = {"go": [], "x": [3, 5], "t": [3], "w": [5], "tw": []}
    base.update(shapes or {})
    node = helper.make_node(CE, list(values), ["g"], name="n", domain=spec.DOMAIN)
    node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    f32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    inputs = [helper.make_tensor_value_info(v, i64 if v == "t" else f32, base[v]) for v in values]
    output = helper.make_tensor_value_info("g", f32, [3, 5])
    graph = helper.make_graph([node], "g", inputs, [output])
    return lo.make_model(graph)


@pytest.mark.parametrize("value", [1.5, -0.25, float("nan"), float("inf")])
def test_label_smoothing_outside_0_1_is_an_attribute_value_error(value: float):
    model = ce_model({"label_smoothing": value})
    expected = "attribute 'label_smoothing': must be a float in [0, 1] (not NaN), got"
    for check in (lambda: lo.check_model(model), lambda: import_model(model),
                  lambda: compile_model(model)):  # fmt: skip
        with pytest.raises(errors.AttributeValueError) as info:
            check()
        assert str(info.value).startswith(f"{CE} node 'n': {expected}")
        assert info.value.code == errors.ACLNN_ERR_PARAM_INVALID == 161002
    with pytest.raises(errors.AttributeValueError, match="label_smoothing"):
        lo.make_node(CE, ["go", "x", "t"], "g", label_smoothing=value)


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_the_bounds_themselves_are_valid(value: float):
    lo.check_model(ce_model({"label_smoothing": value}))


@pytest.mark.parametrize(
    ("attrs", "shapes", "values", "error", "words"),
    [
        ({"label_smoothing": 1}, {}, ("go", "x", "t", "w"), errors.AttributeValueError,
         "attribute 'label_smoothing': must be an ONNX FLOAT attribute"),
        ({}, {"x": [5], "t": []}, ("go", "x", "t"), errors.ClassShapeError,
         "self: shape [5] must be rank 2"),
        ({}, {"x": [2, 5, 3], "t": [2, 3]}, ("go", "x", "t"), errors.ClassShapeError,
         "must be rank 2"),
        ({}, {"w": [4]}, ("go", "x", "t", "w"), errors.ClassShapeError,
         "weight: shape [4] must be [5]"),
        ({"reduction": "none"}, {}, ("go", "x", "t"), errors.ClassShapeError,
         "grad_output: shape [] must be [3]"),
        ({}, {}, ("go", "x", "t", "w", "tw"), errors.InvalidArgumentError,
         "input 4: is not an input of CrossEntropyLossGrad"),
    ],
)  # fmt: skip
def test_invalid_nodes_are_spec_errors_naming_the_node(attrs, shapes, values, error, words):
    """CE has no total_weight and takes self [N, C] only."""
    with pytest.raises(error) as info:
        lo.check_model(ce_model(attrs, shapes, values))
    assert str(info.value).startswith(f"{CE} node 'n': ") and words in str(info.value)
    assert info.value.code == errors.ACLNN_ERR_PARAM_INVALID


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("elem", [onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                                  onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE])  # fmt: skip
def test_inference_gives_selfs_type_and_shape(elem: int, weighted: bool):
    values = ["go", "x", "t", "w"] if weighted else ["go", "x", "t"]
    shapes = {"go": ["N"], "x": ["N", "C"], "t": ["N"], "w": ["C"]}
    node = lo.make_node(CE, values, "g", name="n", reduction="none", label_smoothing=0.25)
    index = onnx.TensorProto.INT32 if weighted else onnx.TensorProto.INT64
    types = {v: helper.make_tensor_type_proto(index if v == "t" else elem, shapes[v])
             for v in values}  # fmt: skip
    (out,) = onnx.shape_inference.infer_node_outputs(lo.get_schema(CE), node, types).values()
    assert out.tensor_type.elem_type == elem
    assert [d.dim_param for d in out.tensor_type.shape.dim] == ["N", "C"]
