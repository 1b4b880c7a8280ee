"""The level-2 layer (lossgrad_compiler/level2): the verifier accepts what lower-lossgrad
emits and rejects each rule's violation with Level2ContractError; the analysis reports what
spec says about each signature; the predicate table agrees with xDSL's interpreter; the
runtime-parameter form computes what the reference computes, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects import arith, func
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import ModuleOp, StringAttr, f32, i1
from xdsl.interpreter import Interpreter
from xdsl.interpreters.arith import ArithFunctions
from xdsl.ir import Block, Operation, Region

from lossgrad_compiler import level2, reference, spec
from lossgrad_compiler.context import make_context, parse_module
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID
from lossgrad_compiler.interpreter import run_function
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.cases import OP_TYPES, Case, mixed_dtype_combinations, standard_cases
from tests.helpers.divisors import reduction_divisor
from tests.helpers.modules import case_function

# --------------------------------------------------------------------------- helpers


def lowered(case: Case, *, dynamic: bool, runtime_parameters: bool = False) -> ModuleOp:
    module = ModuleOp([case_function(case, dynamic=dynamic)])
    LowerLossgradPass(runtime_parameters=runtime_parameters).apply(make_context(), module)
    return module


def matrix() -> list[Case]:
    cases = []
    for op_type in OP_TYPES:
        cases += standard_cases(op_type, np.float32)
        cases += standard_cases(op_type, np.float16)[::3]
        cases += [standard_cases(op_type, d)[k] for k, d in enumerate(mixed_dtype_combinations())]
    return cases


MATRIX = matrix()


# --------------------------------------------------------------------------- verification


@pytest.mark.parametrize("runtime_parameters", [False, True], ids=["constants", "parameters"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_every_lowered_signature_is_level2(dynamic: bool, runtime_parameters: bool) -> None:
    for case in MATRIX:
        module = lowered(case, dynamic=dynamic, runtime_parameters=runtime_parameters)
        level2.verify_level2(module)


def test_level2_stays_level2_after_canonicalize_and_cse() -> None:
    from xdsl.transforms.canonicalize import CanonicalizePass
    from xdsl.transforms.common_subexpression_elimination import (
        CommonSubexpressionElimination,
    )

    for case in MATRIX[::7]:
        module = lowered(case, dynamic=True)
        CanonicalizePass().apply(make_context(), module)
        CommonSubexpressionElimination().apply(make_context(), module)
        level2.verify_level2(module)
        level2.analyze_function(next(iter(module.ops)))  # type: ignore[arg-type]


def test_analysis_reports_what_spec_says() -> None:
    for case in MATRIX:
        for runtime_parameters in (False, True):
            module = lowered(case, dynamic=True, runtime_parameters=runtime_parameters)
            (f,) = level2.signature_functions(module)
            checked = case.checked
            assert f.op is checked.op
            assert f.attributes == checked.attrs
            assert f.compute == checked.compute and f.result == checked.result_type
            assert [o.storage for o in f.operands] == [checked.types[n] for n in checked.present]
            for o in f.operands:
                assert (o.widening is not None) == (o.reads and o.storage.bits < f.compute.bits)
            assert not f.operands[1].reads or f.op is not spec.KL_DIV_BACKWARD
            rule = spec.divisor_rule(checked.reduction, len(checked.shapes["self"] or ()))
            assert (f.scale.divisor if f.scale else None) == rule
            b = np.broadcast_shapes(case.inputs["self"].shape, case.inputs["target"].shape)
            result_shape = case.inputs[f.op.differentiates].shape if f.op.differentiates else b
            assert f.reduces == (f.op.differentiates != "" and result_shape != b)
            names = list(f.parameters)
            if runtime_parameters:
                assert (level2.PARAMETER_N in names) == (rule is not None)
                assert f.scale is None or f.scale.parameter is f.parameters.get("n")
            else:
                assert names == []


def test_the_runtime_parameter_form_computes_the_reference_bit_for_bit() -> None:
    """n and beta as arguments (what kernels shared across shapes and betas use) give the
    same bits as the constant form and the reference."""
    for case in MATRIX[::2]:
        module = lowered(case, dynamic=True, runtime_parameters=True)
        (f,) = level2.signature_functions(module)
        arguments: list[object] = [case.inputs[n] for n in case.checked.present]
        for name in f.parameters:
            if name == level2.PARAMETER_N:
                b = np.broadcast_shapes(case.inputs["self"].shape, case.inputs["target"].shape)
                arguments.append(
                    reduction_divisor(case.attrs["reduction"], case.inputs["self"].shape, b)
                )
            else:
                arguments.append(float(f.attributes[name]))
        (got,) = run_function(module, "f", *arguments)
        want = reference.evaluate(case.op_type, case.inputs, case.attrs)
        assert got.dtype == want.dtype and got.shape == want.shape, case.label
        np.testing.assert_array_equal(
            got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8), err_msg=case.label
        )


def test_one_runtime_parameter_body_serves_every_beta() -> None:
    """Lowered once with beta = 1, called with the case's beta: the reference's bits."""
    cases = [c for c in MATRIX if c.op_type == "SmoothL1LossBackward" and c.attrs["beta"] > 0]
    assert len(cases) > 20
    for case in cases:
        representative = Case(case.op_type, case.inputs, {**case.attrs, "beta": 1.0}, case.label)
        module = lowered(representative, dynamic=True, runtime_parameters=True)
        (f,) = level2.signature_functions(module)
        b = np.broadcast_shapes(case.inputs["self"].shape, case.inputs["target"].shape)
        n = reduction_divisor(case.attrs["reduction"], case.inputs["self"].shape, b)
        parameters = {"n": n, "beta": case.attrs["beta"]}
        arguments = [case.inputs[name] for name in case.checked.present]
        (got,) = run_function(module, "f", *arguments, *(parameters[p] for p in f.parameters))
        want = reference.evaluate(case.op_type, case.inputs, case.attrs)
        np.testing.assert_array_equal(
            got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8), err_msg=case.label
        )


def test_runtime_parameters_need_signature_functions() -> None:
    from xdsl.utils.exceptions import PassFailedException

    case = standard_cases("SmoothL1LossBackward")[0]
    two = ModuleOp([case_function(case, dynamic=True), func.FuncOp("empty", ([], []))])
    with pytest.raises(PassFailedException, match="@empty must hold exactly one lossgrad op"):
        LowerLossgradPass(runtime_parameters=True).apply(make_context(), two)


# --------------------------------------------------------------------------- errors

SL1 = """
func.func @f(%go: tensor<f32>, %x: tensor<?xf32>, %t: tensor<?xf32>) -> tensor<?xf32> {
  %r = lossgrad.smooth_l1_loss_backward %go, %x, %t reduction = sum beta = 5.000000e-01
       : tensor<f32>, tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}
"""


def lowered_text(source: str = SL1) -> str:
    module = parse_module(source)
    LowerLossgradPass().apply(make_context(), module)
    return str(module)


def rejected(text: str, match: str) -> level2.Level2ContractError:
    module = parse_module(text, verify=False)
    with pytest.raises(level2.Level2ContractError, match=match) as info:
        level2.verify_level2(module)
    err = info.value
    assert err.code == ACLNN_ERR_PARAM_INVALID
    assert str(err).startswith("level 2 @f: ") and "\n" not in str(err)
    return err


def test_an_op_outside_the_list_is_rejected() -> None:
    text = lowered_text().replace("arith.negf", "math.absf")
    rejected(text, "'math.absf': is not a level-2 body op")


def test_an_op_outside_the_list_outside_a_body_is_rejected() -> None:
    text = lowered_text().replace(
        "func.return",
        "%c = arith.constant 1.0 : f32\n    %z = arith.maximumf %c, %c : f32\n    func.return",
    )
    rejected(text, "'arith.maximumf': is not in the level-2 op list")


def test_a_predicate_outside_the_contract_is_rejected() -> None:
    text = lowered_text().replace("cmpf oge", "cmpf ord")
    err = rejected(text, "predicate 'ord' is not level 2")
    assert err.argument == "'arith.cmpf'"


def test_an_indexing_map_that_reorders_the_loops_is_rejected() -> None:
    source = SL1.replace("tensor<?xf32>", "tensor<?x?xf32>")
    text = lowered_text(source)
    text = text.replace(
        "affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map",
        "affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map",
        1,
    )
    rejected(text, r"indexing map .* result 1 must be a loop after the ones before it")


def test_an_elementwise_map_that_is_not_right_aligned_is_rejected() -> None:
    """Order-preserving maps that skip loops belong to the classification operators; an
    elementwise operator's backends read every map right-aligned."""
    source = """
func.func @f(%go: tensor<f32>, %x: tensor<?x?xf32>, %t: tensor<?xf32>) -> tensor<?x?xf32> {
  %r = lossgrad.mse_loss_backward %go, %x, %t reduction = sum
       : tensor<f32>, tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>
  func.return %r : tensor<?x?xf32>
}
"""
    text = lowered_text(source)
    assert "affine_map<(d0, d1) -> (d1)>" in text
    text = text.replace("affine_map<(d0, d1) -> (d1)>", "affine_map<(d0, d1) -> (d0)>", 1)
    rejected(text, r"'target': an elementwise operator's maps are right-aligned")


def test_a_summing_body_must_yield_the_accumulation() -> None:
    source = """
func.func @f(%go: tensor<f32>, %x: tensor<?x4xf32>, %t: tensor<4xf32>) -> tensor<4xf32> {
  %r = lossgrad.kl_div_target_backward %go, %x, %t reduction = sum
       : tensor<f32>, tensor<?x4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
"""
    text = lowered_text(source)
    lines = text.splitlines()
    k = next(i for i, line in enumerate(lines) if "linalg.yield" in line)
    value = lines[k - 1].split("=")[0].strip()  # the accumulating addf
    operand = lines[k - 1].split(",")[-1].split(":")[0].strip()
    lines[k] = lines[k].replace(value, operand)
    rejected("\n".join(lines), "a summing body yields `arith.addf %acc, %v`")


def test_identity_attributes_are_checked() -> None:
    text = lowered_text().replace('reduction = "sum"', 'reduction = "average"')
    rejected(text, "lossgrad.attributes.*must be one of 'none', 'mean', 'sum'")


def test_analysis_needs_identity_attributes() -> None:
    module = parse_module(lowered_text())
    function = next(iter(module.ops))
    assert isinstance(function, func.FuncOp)
    del function.attributes[level2.OP_TYPE_ATTR]
    level2.verify_level2(module)  # plain level 2 is fine without them
    with pytest.raises(level2.Level2ContractError, match=r"carries 'lossgrad\.op_type'"):
        level2.analyze_function(function)


def test_the_scale_must_be_applied_to_grad_output() -> None:
    """A function that says it scales (lossgrad.divisor) must multiply grad_output."""
    numel = f'lossgrad.divisor = "{spec.Divisor.NUMEL.value}", lossgrad.op_type ='
    text = lowered_text().replace("lossgrad.op_type =", numel)
    rejected(text, r"'lossgrad.divisor' says grad_output is scaled by 1/\(numel")


def test_the_divisor_is_read_from_level_2_not_from_the_reduction() -> None:
    """The analysis takes the divisor lower-lossgrad wrote, whatever the reduction says: a
    batchmean function of a 0-d self (which scales nothing) is analysed unscaled, and a
    divisor that is not one of spec.Divisor's is refused."""
    kl_0d = """
    func.func @f(%go: tensor<f32>, %x: tensor<f32>, %t: tensor<f32>) -> tensor<f32> {
      %r = lossgrad.kl_div_backward %go, %x, %t reduction = batchmean
           : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
      func.return %r : tensor<f32>
    }
    """
    (f,) = level2.signature_functions(parse_module(lowered_text(kl_0d)))
    assert f.scale is None and level2.DIVISOR_ATTR not in f.function.attributes
    bad = lowered_text().replace(
        "lossgrad.op_type =", 'lossgrad.divisor = "numel(self)", lossgrad.op_type ='
    )
    rejected(bad, "'lossgrad.divisor' must be one of")


def test_a_renamed_function_keeps_its_identity() -> None:
    """No fact comes from the symbol name: any name analyses the same."""
    module = parse_module(lowered_text())
    function = next(iter(module.ops))
    assert isinstance(function, func.FuncOp)
    function.sym_name = StringAttr("anything_at_all")
    f = level2.analyze_function(function)
    assert f.op is spec.SMOOTH_L1_LOSS_BACKWARD and f.attributes["beta"] == 0.5


# --------------------------------------------------------------------------- predicates


def test_predicate_table_is_xdsls() -> None:
    assert list(level2.PREDICATES) == list(arith.CMPF_COMPARISON_OPERATIONS)
    assert all(p.code == k for k, p in enumerate(level2.PREDICATES.values()))


def _xdsl_cmpf(name: str, a: float, b: float) -> bool:
    """xDSL's own interpreter evaluates the predicate: an independent oracle."""
    block = Block(arg_types=[f32, f32])
    op = arith.CmpfOp(block.args[0], block.args[1], name)
    function = func.FuncOp("c", ([f32, f32], [i1]), Region(block))
    block.add_ops([op, func.ReturnOp(op.result)])
    interpreter = Interpreter(ModuleOp([function]))
    interpreter.register_implementations(ArithFunctions())
    from xdsl.interpreters.func import FuncFunctions

    interpreter.register_implementations(FuncFunctions())
    (result,) = interpreter.call_op("c", (a, b))
    return bool(result)


floats = st.one_of(st.floats(allow_nan=True, width=32), st.sampled_from([0.0, -0.0, math.nan]))


@given(a=floats, b=floats)
def test_negated_and_swapped_predicates_agree_with_xdsl(a: float, b: float) -> None:
    for name in ("oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "une", "uno", "ult"):
        p = level2.PREDICATES[name]
        holds = _xdsl_cmpf(name, a, b)
        assert _xdsl_cmpf(p.negated.name, a, b) == (not holds), name
        assert _xdsl_cmpf(p.swapped.name, b, a) == holds, name
        assert p.negated.negated == p


def test_contract_predicates_are_closed_under_negation() -> None:
    for name in level2.CONTRACT_PREDICATES:
        assert level2.PREDICATES[name].negated.name in level2.CONTRACT_PREDICATES


# --------------------------------------------------------------------------- dispatch


def test_a_backend_that_misses_a_required_op_fails_when_defined() -> None:
    with pytest.raises(TypeError, match=r"Incomplete \(test\) has no rule for arith.addf"):

        class Incomplete(level2.ScalarOpDispatch[str]):
            BACKEND = "test"
            REQUIRED = frozenset({arith.AddfOp, arith.SubfOp})

            @level2.rule(arith.SubfOp)
            def subf(self, op: Operation, operands: list[str]) -> str:
                return f"{operands[0]} - {operands[1]}"


def test_dispatch_translates_by_op_class_and_refuses_others() -> None:
    class Text(level2.ScalarOpDispatch[str]):
        BACKEND = "text"
        REQUIRED = frozenset({arith.AddfOp})

        @level2.rule(arith.AddfOp, arith.SubfOp)
        def binary(self, op: Operation, operands: list[str]) -> str:
            sign = "+" if isinstance(op, arith.AddfOp) else "-"
            return f"({operands[0]} {sign} {operands[1]})"

    block = Block(arg_types=[f32, f32])
    add = arith.AddfOp(block.args[0], block.args[1])
    sub = arith.SubfOp(add.result, block.args[1])
    exp = mathd.ExpOp(sub.result)
    env = {block.args[0]: "a", block.args[1]: "b"}
    Text().translate_all([add, sub], env)
    assert env[sub.result] == "((a + b) - b)"
    with pytest.raises(level2.Level2ContractError, match=r"'math\.exp': has no text translation"):
        Text().translate(exp, ["x"])
