"""The level-2 layer for the classification operators (docs/level2.md, "Beyond
elementwise"): the verifier accepts what lower-lossgrad emits for them and rejects each
new rule's violation; the analysis reports the class-index operand and the target check."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith

from lossgrad_compiler import level2, spec
from lossgrad_compiler.context import make_context, parse_module
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.class_cases import CLASS_OP_TYPES, class_case_module, class_cases, every

NLL = """
func.func @f(%g: tensor<f32>, %x: tensor<?x?xf32>, %t: tensor<?xi32>, %tw: tensor<f32>,
             %w: tensor<?xf32>) -> tensor<?x?xf32> {
  %r = lossgrad.nll_loss_backward %g, %x, %t, %tw weight %w ignore_index = 1
       : tensor<f32>, tensor<?x?xf32>, tensor<?xi32>, tensor<f32>, tensor<?xf32> -> tensor<?x?xf32>
  func.return %r : tensor<?x?xf32>
}
"""


def lowered_text(source: str = NLL) -> str:
    module = parse_module(source)
    LowerLossgradPass().apply(make_context(), module)
    return str(module)


def rejected(text: str, match: str) -> None:
    module = parse_module(text, verify=False)
    with pytest.raises(level2.Level2ContractError, match=match):
        level2.verify_level2(module)


@pytest.mark.parametrize("runtime_parameters", [False, True], ids=["constants", "parameters"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_every_lowered_classification_signature_is_level2(
    op_type: str, dynamic: bool, runtime_parameters: bool
) -> None:
    for dtype in (np.float32, np.float16):
        for case in every(class_cases(op_type, dtype), 2):
            module = class_case_module(case, dynamic=dynamic)
            LowerLossgradPass(runtime_parameters=runtime_parameters).apply(make_context(), module)
            level2.verify_level2(module)
            function = level2.analyze_function(module.ops.first)  # type: ignore[arg-type]
            # total_weight is an input and D a reduction, not a parameter n; ignore_index may
            # take any value, and so may a label smoothing above 0
            expected = {"ignore_index"} if runtime_parameters else set()
            if runtime_parameters and case.attrs.get("label_smoothing"):
                expected.add("label_smoothing")
            assert set(function.parameters) == expected
            assert [c.rule for c in function.checks] == ["target_range"]
            mean = case.attrs["reduction"] == "mean" and op_type == "CrossEntropyLossGrad"
            smoothed = bool(case.attrs.get("label_smoothing")) and "weight" in case.inputs
            assert [r.name for r in function.reductions] == (
                ["kept_weight"] * mean + ["class_weight"] * smoothed
            )


def test_the_analysis_reports_the_class_index_and_the_check() -> None:
    module = parse_module(lowered_text())
    function = level2.analyze_function(module.ops.first)  # type: ignore[arg-type]
    target = function.operand("target")
    assert target is not None and target.is_class_index and target.storage is spec.INT32
    assert isinstance(target.widening, arith.ExtSIOp)  # i32 is read as i64
    assert target.generic.index_map == (0,)  # the row loop, not right-aligned
    weight = function.operand("weight")
    assert weight is not None and weight.generic.index_map == (1,)  # the class loop
    assert function.scale is None  # the body divides by the total_weight operand
    (check,) = function.checks
    assert (check.rule, check.result_index, check.inputs) == ("target_range", 1, ("target",))
    assert check.generic.accumulation is not None
    assert isinstance(check.generic.accumulation.add, arith.AddiOp)


def test_a_check_the_function_does_not_return_is_rejected() -> None:
    text = lowered_text()
    text = text.replace("func.return %r, %bad_targets : tensor<?x?xf32>, tensor<i64>",
                        "func.return %r : tensor<?x?xf32>")
    text = text.replace("-> (tensor<?x?xf32>, tensor<i64>)", "-> tensor<?x?xf32>")
    rejected(text, "returns exactly the gradient and 1 check count")


def test_a_check_is_an_i64_count() -> None:
    text = lowered_text().replace('lossgrad.checks = ["target_range"]', "lossgrad.checks = 3")
    rejected(text, "'lossgrad.checks' must be an array of strings")


def test_a_check_must_read_function_inputs() -> None:
    text = lowered_text()
    zero = "    %zero = arith.constant 0 : i64"
    text = text.replace("ins(%t : tensor<?xi32>) outs(", "ins(%e : tensor<?xi32>) outs(")
    text = text.replace(zero, zero + "\n    %e = tensor.empty(%dim) : tensor<?xi32>")
    rejected(text, "a check \\('target_range'\\) reads function inputs")


def test_an_integer_type_that_is_no_class_index_is_rejected() -> None:
    text = lowered_text().replace("i32", "i16")
    rejected(text, "operand type tensor<\\?xi16> is not a tensor of a level-2 float")


def test_a_summing_check_must_add_integers() -> None:
    text = lowered_text()
    lines = text.splitlines()
    k = next(i for i, line in enumerate(lines) if "arith.addi" in line)
    lines[k] = lines[k].replace("arith.addi", "arith.muli")
    rejected("\n".join(lines), "a summing body yields `arith.addi %acc, %v`")


def test_an_unsigned_comparison_of_targets_is_rejected() -> None:
    """A negative target is a bad one; an unsigned comparison would call it a large class."""
    text = lowered_text().replace("arith.cmpi slt", "arith.cmpi ult", 1)
    rejected(text, "predicate 'ult' is not level 2")


# --------------------------------------------------------------------------- reductions, gather

CE = """
func.func @f(%g: tensor<f32>, %x: tensor<4x5xf32>, %t: tensor<4xi64>, %w: tensor<5xf32>)
    -> tensor<4x5xf32> {
  %r = lossgrad.cross_entropy_loss_grad %g, %x, %t weight %w label_smoothing = 2.500000e-01
       : tensor<f32>, tensor<4x5xf32>, tensor<4xi64>, tensor<5xf32> -> tensor<4x5xf32>
  func.return %r : tensor<4x5xf32>
}
"""


def ce_text() -> str:
    return lowered_text(CE)


def test_the_analysis_reports_the_reductions() -> None:
    function = level2.analyze_function(parse_module(ce_text()).ops.first)  # type: ignore[arg-type]
    assert [(r.name, r.input, r.position) for r in function.reductions] == [
        ("kept_weight", "target", 4),
        ("class_weight", "weight", 5),
    ]
    for reduction in function.reductions:
        assert reduction.generic.accumulation is not None
        assert reduction.generic.accumulation.init == 0.0
    assert function.input_names == ("grad_output", "self", "target", "weight")
    assert len(function.main.inputs) == 6
    assert function.scale is None  # D is a reduction the formula divides by


def test_a_gather_at_the_raw_target_is_rejected() -> None:
    """index_cast(t) itself: a target outside [0, C) would read outside the weight."""
    text = ce_text()
    safe = "%8 = arith.select %7, %0, %3 : i64"
    assert safe in text, text
    rejected(text.replace(safe, "%8 = arith.select %7, %0, %0 : i64"), "a gather reads")


def test_a_gather_without_the_lower_bound_is_rejected() -> None:
    text = ce_text()
    lower = "%4 = arith.cmpi sge, %0, %3 : i64"
    assert lower in text, text
    rejected(text.replace(lower, "%4 = arith.cmpi sle, %0, %3 : i64"), "a gather reads")


def test_a_gather_bounded_above_the_weights_size_is_rejected() -> None:
    five = "%classes = arith.constant 5 : i64"
    rejected(ce_text().replace(five, "%classes = arith.constant 6 : i64"), "a gather reads")


def test_a_reduction_the_gradient_does_not_read_is_rejected() -> None:
    text = ce_text()
    reads = "%kept_weight, %class_weight :"
    assert reads in text, text
    rejected(text.replace(reads, "%class_weight, %kept_weight :"), "reads .* in order")


def test_a_reduction_not_filled_with_zero_is_rejected() -> None:
    text = ce_text()
    fill = "linalg.fill ins(%r : f32) outs(%no_kept_weight"
    assert fill in text, text
    empty = "%no_kept_weight = tensor.empty()"
    one = text.replace(fill, "linalg.fill ins(%one : f32) outs(%no_kept_weight")
    one = one.replace(empty, f"%one = arith.constant 1.0 : f32\n    {empty}")
    rejected(one, "sums one function input into a zero-filled 0-d float")


def test_an_unknown_reduction_name_is_rejected() -> None:
    text = ce_text().replace('"kept_weight", "class_weight"]', '"kept_weight", "row_sum"]')
    rejected(text, "lossgrad.reductions")


def test_a_gather_from_a_tensor_of_the_body_is_rejected() -> None:
    """The gathered tensor comes from above the body (the weight argument), not from inside
    it (checked with tensor.empty admitted as a body op, which level 2 has none of)."""
    from xdsl.dialects import tensor

    module = parse_module(ce_text())
    function = module.ops.first
    generic = next(o for o in function.walk() if o.name == "linalg.generic")
    extract = next(o for o in generic.walk() if isinstance(o, tensor.ExtractOp))
    body = generic.body.block
    inner = tensor.EmptyOp([], extract.tensor.type)
    body.insert_op_before(inner, extract)
    extract.operands = [inner.tensor, *extract.indices]
    with pytest.raises(level2.Level2ContractError, match="a gather reads"):
        level2.verify_level2(module, level2.BODY_OPS | {tensor.EmptyOp})
