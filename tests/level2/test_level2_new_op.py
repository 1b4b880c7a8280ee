"""docs/level2.md, "Adding a level-2 op": a throwaway op (`math.absf`) added to test-local
subclasses of each backend's scalar-op dispatch is all a backend needs, and a subclass that
requires the op without a rule for it fails when it is defined."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from onnx import TensorProto, helper
from xdsl.builder import Builder
from xdsl.dialects import arith, func, math, tensor
from xdsl.dialects.builtin import IndexType, ModuleOp, TensorType, f32
from xdsl.ir import Block, Operation
from xdsl.rewriter import InsertPoint

from lossgrad_compiler import level2
from lossgrad_compiler.backends.onnx.rules import OnnxScalarOps
from lossgrad_compiler.backends.onnx.translator import translate_function
from lossgrad_compiler.backends.ort.scalar_ops import CxxScalarOps, ScalarPrinter
from lossgrad_compiler.context import parse_module
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.dialects import hfusion as hf
from lossgrad_compiler.passes.ascendc_body_rules import AscendcBodyRules, Tile, Value
from lossgrad_compiler.passes.hfusion_body_rules import Emitter, HfusionBodyRules, Tensor
from lossgrad_compiler.runtime.ort_io import make_session, run_session

NEW_OP = math.AbsFOp

ABS_FUNCTION = """
func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
       ins(%a : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.absf %x : f32
    linalg.yield %y : f32
  } -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}
"""


def abs_module() -> ModuleOp:
    return parse_module(ABS_FUNCTION)


class OnnxWithAbs(OnnxScalarOps):
    REQUIRED = OnnxScalarOps.REQUIRED | {NEW_OP}

    @level2.rule(NEW_OP)
    def absf(self, op: Operation, operands: Sequence[object]) -> object:
        return self.emit(op, "Abs", operands)  # type: ignore[arg-type]


class CxxWithAbs(CxxScalarOps):
    REQUIRED = CxxScalarOps.REQUIRED | {NEW_OP}

    @level2.rule(NEW_OP)
    def absf(self, op: Operation, a: Sequence[str]) -> str:
        return f"std::fabs({a[0]})"


class AscendcWithAbs(AscendcBodyRules):
    REQUIRED = AscendcBodyRules.REQUIRED | {NEW_OP}

    @level2.rule(NEW_OP)
    def absf(self, op: Operation, operands: Sequence[Value]) -> Value:
        return self._unary(asc.AbsOp, op, operands[0])


class HfusionWithAbs(HfusionBodyRules):
    REQUIRED = HfusionBodyRules.REQUIRED | {NEW_OP}

    @level2.rule(NEW_OP)
    def absf(self, op: Operation, operands: Sequence[object]) -> object:
        return self.elementwise_unary(op, operands, hf.UnaryFn.ABS)  # type: ignore[arg-type]


def test_the_contract_rejects_the_op_until_it_is_listed() -> None:
    with pytest.raises(level2.Level2ContractError, match=r"'math\.absf'"):
        level2.verify_level2(abs_module())
    level2.verify_level2(abs_module(), body_ops=level2.BODY_OPS | {NEW_OP})


@pytest.mark.parametrize(
    "dispatch", [OnnxScalarOps, CxxScalarOps, AscendcBodyRules, HfusionBodyRules]
)
def test_a_backend_without_the_rule_fails_when_it_is_defined(dispatch: type) -> None:
    with pytest.raises(TypeError, match=r"has no rule for math\.absf"):
        type("Incomplete", (dispatch,), {"REQUIRED": dispatch.REQUIRED | {NEW_OP}})


def test_onnx_runs_the_new_op() -> None:
    (function,) = abs_module().ops
    assert isinstance(function, func.FuncOp)
    translated = translate_function(function, ["a"], ["r"], scalar_ops=OnnxWithAbs)
    assert "Abs" in [n.op_type for n in translated.nodes]
    graph = helper.make_graph(
        list(translated.nodes),
        "abs",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N"])],
    )
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 21)])
    a = np.array([-2.5, -0.0, 3.0, np.inf], np.float32)
    (got,) = run_session(make_session(model), {"a": a})
    np.testing.assert_array_equal(got, np.abs(a))


def test_the_ort_printer_prints_the_new_op() -> None:
    block = Block(arg_types=[f32])
    op = NEW_OP(block.args[0])
    block.add_op(op)
    printer = ScalarPrinter(CxxWithAbs())
    printer.bind(block.args[0], "a0")
    printer.print_op(op)
    assert printer.lines == ["const float v0 = std::fabs(a0);"]


def test_the_ascendc_rules_build_the_vector_op() -> None:
    init, compute = Block(), Block()
    count = arith.ConstantOp.from_int_and_width(64, IndexType())
    init.add_op(count)
    rules = AscendcWithAbs(
        Builder(InsertPoint.at_end(init)), Builder(InsertPoint.at_end(compute)), count.result, "f"
    )
    tile = Tile(rules.temp(f32))
    result = rules.translate(NEW_OP(Block(arg_types=[f32]).args[0]), [tile])
    assert isinstance(result, Tile)
    (abs_op,) = [o for o in compute.ops if isinstance(o, asc.AbsOp)]
    assert abs_op.operands[0] == result.local


def test_the_hfusion_rules_build_the_named_op() -> None:
    block = Block(arg_types=[TensorType(f32, [4])])
    built: list[Operation] = []

    def insert(op: Operation) -> Operation:
        built.append(op)
        return op

    def empty(element: object) -> object:
        return insert(tensor.EmptyOp([], TensorType(element, [4]))).results[0]  # type: ignore[arg-type]

    rules = HfusionWithAbs(Emitter(insert, empty, lambda v, e: v), "f")  # type: ignore[arg-type]
    result = rules.translate(NEW_OP(Block(arg_types=[f32]).args[0]), [Tensor(block.args[0])])
    assert isinstance(result, Tensor)
    (named,) = [o for o in built if isinstance(o, hf.ElemwiseUnaryOp)]
    assert named.fun.data is hf.UnaryFn.ABS and named.inputs[0] == block.args[0]
    named.verify()
