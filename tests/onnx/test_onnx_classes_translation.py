"""The classification operators' level 2 (docs/level2.md, "Beyond elementwise") translated to
standard ONNX and run in stock ONNX Runtime, from lossgrad-level modules
(tests/helpers/class_cases.py → lower-lossgrad → translate_function): bit-identical to
reference.evaluate for every case of all_class_cases (the four float types, int64 and int32
targets, each reduction, with and without weight, ignore_index, label smoothing, [C],
[N, C, H, W], an empty batch), static and dynamic shapes; CrossEntropyLossGrad in
float32/float64 within TIGHT instead (`assert_agrees`: ORT's Exp and ReduceSum).

Also the rules one by one: `arith.cmpi` predicates, operands whose maps are not
right-aligned (Unsqueezed only there), `linalg.index` (a Range), the target check (left out
by default, listed in `unchecked`; translated when its result is named), and a bad target
(zero rows, no crash)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from xdsl.dialects import func

from lossgrad_compiler import messages, reference, spec
from lossgrad_compiler.backends.onnx import translate_function
from lossgrad_compiler.backends.onnx.types import element_type_of, static_shape
from lossgrad_compiler.context import make_context, parse_module
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.level2 import Level2ContractError
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from lossgrad_compiler.runtime.ort_io import make_session, run_session
from tests.helpers.class_cases import (
    CLASS_OP_TYPES,
    ClassCase,
    all_class_cases,
    class_case_module,
    make_class_case,
    out_of_range_case,
)
from tests.helpers.tolerances import TIGHT, assert_matches, bits

COUNT = "bad_targets"


def lowered(case: ClassCase, *, dynamic: bool) -> func.FuncOp:
    """The case's level-2 function (gradient, then the target check's count)."""
    module = class_case_module(case, dynamic=dynamic)
    LowerLossgradPass().apply(make_context(), module)
    (function,) = module.body.block.ops
    assert isinstance(function, func.FuncOp)
    return function


def model_of(
    function: func.FuncOp, names: Sequence[str], outputs: Sequence[str]
) -> onnx.ModelProto:
    """A model of the translated function: inputs `names`, outputs `outputs` (the first
    results of the function), every dynamic size symbolic."""
    translated = translate_function(function, names, outputs)
    inputs = [
        helper.make_tensor_value_info(
            name,
            element_type_of(arg.type),
            [d if d is not None else f"{name}_{j}" for j, d in enumerate(static_shape(arg.type))],
        )
        for name, arg in zip(names, function.args, strict=True)
    ]
    results = [
        helper.make_tensor_value_info(
            name, element_type_of(t), [f"{name}_{j}" for j in range(len(static_shape(t)))]
        )
        for name, t in zip(outputs, function.function_type.outputs, strict=False)
    ]
    graph = helper.make_graph(list(translated.nodes), "f", inputs, results)
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 21)])
    onnx.checker.check_model(model, full_check=True)
    return model


def run_case(case: ClassCase, *, dynamic: bool, count: bool = False) -> list[np.ndarray]:
    outputs = ["grad_input", COUNT] if count else ["grad_input"]
    model = model_of(lowered(case, dynamic=dynamic), case.present, outputs)
    return run_session(make_session(model), case.inputs)


def assert_bits_equal(got: np.ndarray, expected: np.ndarray, context: str) -> None:
    assert got.dtype == expected.dtype, f"{context}: {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{context}: {got.shape} != {expected.shape}"
    if not np.array_equal(bits(got), bits(expected)):
        worst = np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))
        pytest.fail(f"{context}: not bit-identical to the reference (max |diff| {worst})")


def sums_or_exps(case: ClassCase) -> bool:
    """Whether ONNX Runtime may differ from the reference by roundings: CrossEntropyLossGrad
    in float32/float64, whose Exp is ORT's (within an ulp of numpy's, not always equal) and
    whose ReduceSum of D and W is not the reference's sequential sum. A half type computes
    both in float32 and rounds once to the half type, which absorbs those differences: its
    results stay bit-identical."""
    dtype = case.inputs["self"].dtype
    return case.op_type == spec.CROSS_ENTROPY_LOSS_GRAD.name and dtype.itemsize >= 4


def assert_agrees(got: np.ndarray, expected: np.ndarray, case: ClassCase, context: str) -> None:
    """Bit for bit, or helpers.tolerances.TIGHT where `sums_or_exps` (exp and sum order only)."""
    if sums_or_exps(case):
        assert_matches(got, expected, *case.call, tolerance=TIGHT, context=context)
    else:
        assert_bits_equal(got, expected, context)


def safe_result(case: ClassCase) -> np.ndarray:
    """What the graph gives for bad targets: the reference with each of them ignored (its
    row zero), total_weight as given."""
    target = case.inputs["target"]
    classes = case.inputs["self"].shape[spec.operator(case.op_type).class_dim(target.ndim + 1)]
    ignore = case.attrs["ignore_index"]
    bad = ((target < 0) | (target >= classes)) & (target != ignore)
    inputs = {**case.inputs, "target": np.where(bad, ignore, target).astype(target.dtype)}
    return reference.evaluate(case.op_type, inputs, case.attrs)


# --------------------------------------------------------------------------- every case

CASES = list(all_class_cases())


def _groups() -> dict[str, list[ClassCase]]:
    """The cases by operator, float type and target type (one test each: ~10 groups)."""
    groups: dict[str, list[ClassCase]] = {}
    for case in CASES:
        key = "-".join(
            (case.op_type, case.inputs["self"].dtype.name, case.inputs["target"].dtype.name)
        )
        groups.setdefault(key, []).append(case)
    return groups


GROUPS = _groups()


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_class_case_is_bit_identical_in_onnxruntime(group: str, dynamic: bool):
    for case in GROUPS[group]:
        (got,) = run_case(case, dynamic=dynamic)
        assert_agrees(got, case.expected(), case, case.label)


def test_the_groups_cover_every_type_reduction_and_shape():
    seen = {(c.op_type, c.inputs["self"].dtype.name, c.inputs["target"].dtype.name) for c in CASES}
    for op_type, float_type in itertools.product(CLASS_OP_TYPES, spec.FLOAT_TYPES):
        assert (op_type, float_type.dtype.name, "int64") in seen
    assert {(c.op_type, c.inputs["target"].dtype.name) for c in CASES} >= {
        (op, "int32") for op in CLASS_OP_TYPES
    }
    shapes = {c.inputs["self"].shape for c in CASES}
    assert {(5,), (0, 4), (2, 4, 3, 3), (0, 2, 2, 2)} <= shapes  # [C], empty batches, 2d
    assert {(c.attrs["reduction"], "weight" in c.inputs) for c in CASES} == set(
        itertools.product(("none", "mean", "sum"), (False, True))
    )


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["float16", "float32"])
def test_a_one_element_grad_output_of_shape_1_broadcasts(dtype: Any):
    """grad_output [1] (not 0-d) of a reduced loss and of [C]: read through (0), a broadcast."""
    for op_type, shape, reduction in [
        ("NLLLossBackward", (6, 5), "mean"),
        ("NLLLossBackward", (5,), "none"),
        ("NLLLoss2dBackward", (2, 3, 2, 2), "sum"),
    ]:
        case = make_class_case(op_type, shape, dtype, reduction=reduction, weighted=True,
                               ignore_index=1, grad_output_shape=(1,))  # fmt: skip
        for dynamic in (False, True):
            (got,) = run_case(case, dynamic=dynamic)
            assert_bits_equal(got, case.expected(), f"{case.label}, dynamic={dynamic}")


# --------------------------------------------------------------------------- the target check


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_default_names_leave_the_check_out_and_say_so(op_type: str):
    function = lowered(out_of_range_case(op_type), dynamic=True)
    by_default = translate_function(function)
    assert by_default.outputs == (spec.operator(op_type).output,)
    assert by_default.unchecked == (messages.TARGET_RANGE.key,)
    named = translate_function(function, None, ["grad_input", COUNT])
    assert named.unchecked == ()
    assert "ReduceSum" in {n.op_type for n in named.nodes}
    assert "ReduceSum" not in {n.op_type for n in by_default.nodes}  # the count's sum


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_a_bad_target_gives_zero_rows_in_onnxruntime(op_type: str, dynamic: bool):
    """Targets C and -7 (not ignore_index): no crash, their rows are zeros, the others are
    the reference's; the count, where it is named, is 2."""
    case = out_of_range_case(op_type)
    with pytest.raises(Exception, match="161002"):
        case.expected()
    (got,) = run_case(case, dynamic=dynamic)
    assert_agrees(got, safe_result(case), case, case.label)
    axis = spec.operator(op_type).class_dim(got.ndim)
    rows = np.moveaxis(got, axis, -1)
    target = case.inputs["target"]
    classes = got.shape[axis]
    bad = (target < 0) | (target >= classes)
    assert bad.sum() == 2
    assert not rows[bad].any()
    assert rows[~bad].any()
    _, count = run_case(case, dynamic=dynamic, count=True)
    assert count.dtype == np.int64 and count.shape == () and int(count) == 2


@pytest.mark.parametrize(
    "op_type,shape,reduction,weighted",
    [
        ("NLLLossBackward", (5,), "mean", True),  # a 0-d target: the check has no loop
        ("NLLLossBackward", (4, 3), "none", False),
        ("NLLLoss2dBackward", (2, 3, 2, 2), "mean", True),
    ],
)
def test_bad_targets_in_other_forms_give_zero_rows(op_type, shape, reduction, weighted):
    rows = shape[:1] + shape[2:] if len(shape) > 1 else ()
    good = make_class_case(
        op_type, shape, np.float32, reduction=reduction, weighted=weighted,
        targets=np.full(rows, 1, np.int64),
    )  # fmt: skip
    targets = good.inputs["target"].copy()
    targets.reshape(-1)[0] = 99
    case = dataclasses.replace(good, inputs={**good.inputs, "target": targets})
    for dynamic in (False, True):
        got, count = run_case(case, dynamic=dynamic, count=True)
        assert_bits_equal(got, safe_result(case), f"{case.label}, dynamic={dynamic}")
        assert int(count) == 1


def test_good_targets_count_zero():
    for case in CASES[::29]:
        _, count = run_case(case, dynamic=True, count=True)
        assert int(count) == 0, case.label


# --------------------------------------------------------------------------- the rules


def _constant_of(nodes: Sequence[onnx.NodeProto], name: str) -> list[int]:
    (node,) = [n for n in nodes if n.op_type == "Constant" and n.output[0] == name]
    return numpy_helper.to_array(node.attribute[0].t).tolist()


def _unsqueezed(case: ClassCase, dynamic: bool) -> dict[str, list[int]]:
    """Per input (and for the class position): the axes of the Unsqueeze that aligns it."""
    nodes = translate_function(lowered(case, dynamic=dynamic)).nodes
    producers = {n.output[0]: n for n in nodes}
    found = {}
    for node in nodes:
        if node.op_type != "Unsqueeze":
            continue
        source = node.input[0]
        while source in producers and producers[source].op_type == "Reshape":  # the size gate
            source = producers[source].input[0]
        producer = producers.get(source)
        key = "linalg.index" if producer is not None and producer.op_type == "Range" else source
        found[key] = _constant_of(nodes, node.input[1])
    return found


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_operands_off_the_trailing_axes_are_unsqueezed_and_no_others(dynamic: bool):
    two_d = make_class_case("NLLLoss2dBackward", (2, 4, 3, 3), np.float32, reduction="none",
                            weighted=True)  # fmt: skip
    assert _unsqueezed(two_d, dynamic) == {
        "grad_output": [1],  # [N, H, W] on (d0, d2, d3): [N, 1, H, W]
        "target": [1],
        "weight": [1, 2],  # [C] on d1: [C, 1, 1]
        "linalg.index": [1, 2],  # linalg.index 1: Range(C) as [C, 1, 1]
    }
    one_d = make_class_case("NLLLossBackward", (6, 5), np.float32, weighted=True)
    assert _unsqueezed(one_d, dynamic) == {"target": [1]}  # weight [C] on d1 is right-aligned


def test_the_class_position_is_a_range_over_the_loop():
    case = make_class_case("NLLLoss2dBackward", (2, 4, 3, 3), np.float32)
    nodes = translate_function(lowered(case, dynamic=True)).nodes
    (ranged,) = [n for n in nodes if n.op_type == "Range"]
    assert [n.op_type for n in nodes if ranged.output[0] in n.input] == ["Unsqueeze"]


CMPI = """
func.func @f(%a: tensor<?xi64>, %b: tensor<?xi64>) -> tensor<?xf32> {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xi64>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
      affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}}
      ins(%a, %b : tensor<?xi64>, tensor<?xi64>) outs(%e : tensor<?xf32>) {{
  ^bb0(%x: i64, %y: i64, %o: f32):
    %c = arith.cmpi {predicate}, %x, %y : i64
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %s = arith.select %c, %one, %zero : f32
    linalg.yield %s : f32
  }} -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}}"""

NUMPY_PREDICATES: dict[str, Any] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "slt": np.less,
    "sle": np.less_equal,
    "sgt": np.greater,
    "sge": np.greater_equal,
}


def cmpi_function(predicate: str) -> func.FuncOp:
    (function,) = parse_module(CMPI.format(predicate=predicate)).body.block.ops
    assert isinstance(function, func.FuncOp)
    return function


@pytest.mark.parametrize("predicate", sorted(NUMPY_PREDICATES))
def test_signed_integer_comparisons(predicate: str):
    a = np.array([-5, -1, 0, 0, 3, 2**62, -(2**62)], np.int64)
    b = np.array([-5, 0, 0, -1, 4, -(2**62), 2**62], np.int64)
    model = model_of(cmpi_function(predicate), ["a", "b"], ["r"])
    (got,) = run_session(make_session(model), {"a": a, "b": b})
    np.testing.assert_array_equal(got, NUMPY_PREDICATES[predicate](a, b).astype(np.float32))


@pytest.mark.parametrize("predicate", ["ult", "ule", "ugt", "uge"])
def test_unsigned_comparisons_are_refused(predicate: str):
    with pytest.raises(Level2ContractError, match=predicate):
        translate_function(cmpi_function(predicate), ["a", "b"], ["r"])


ROW_SUM = """
func.func @f(%a: tensor<3x4xf32>) -> tensor<3xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
      affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<3x4xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  func.return %r : tensor<3xf32>
}"""


def test_an_output_off_the_trailing_axes_is_refused_not_mistranslated():
    """A per-row sum writes [N] from (d0, d1) -> (d0): valid level 2 that no lowering emits
    yet, which the backend refuses rather than broadcasting it wrongly."""
    (function,) = parse_module(ROW_SUM).body.block.ops
    with pytest.raises(UnsupportedByBackendError, match="right-aligned"):
        translate_function(function, ["a"], ["r"])  # type: ignore[arg-type]


SKIPPING_MAPS = """
func.func @f(%a: tensor<?x1xf32>, %b: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %n0 = tensor.dim %b, %c0 : tensor<?x?x?xf32>
  %n1 = tensor.dim %b, %c1 : tensor<?x?x?xf32>
  %n2 = tensor.dim %b, %c2 : tensor<?x?x?xf32>
  %e = tensor.empty(%n0, %n1, %n2) : tensor<?x?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, 0)>,
      affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
      iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<?x1xf32>, tensor<?x?x?xf32>) outs(%e : tensor<?x?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.subf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<?x?x?xf32>
  func.return %r : tensor<?x?x?xf32>
}"""


def test_a_map_that_skips_loops_and_reads_a_constant_0_is_squeezed_then_unsqueezed():
    """a [N, 1] read as (d0, 0) in a 3-loop space: [N] on d0, so [N, 1, 1] after alignment
    (right-aligned broadcasting alone would put its 1 on d2 and its N on d1)."""
    (function,) = parse_module(SKIPPING_MAPS).body.block.ops
    assert isinstance(function, func.FuncOp)
    model = model_of(function, ["a", "b"], ["r"])
    assert [n.op_type for n in model.graph.node if n.op_type in ("Squeeze", "Unsqueeze")] == [
        "Squeeze",
        "Unsqueeze",
    ]
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 1)).astype(np.float32)
    b = rng.standard_normal((3, 3, 2)).astype(np.float32)
    (got,) = run_session(make_session(model), {"a": a, "b": b})
    np.testing.assert_array_equal(got, a[:, :, None] - b)
