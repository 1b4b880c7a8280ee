"""The ONNX rules of the level-2 scalar ops, as the backend's `level2.ScalarOpDispatch`.

Scalar ops become ONNX elementwise ops: inside a linalg.generic body their operands are
tensors aligned to the iteration space, so ONNX broadcasting does what the indexing maps say;
outside a body they are rank-0 tensors. `arith.constant` stays symbolic (values.py) until a
node needs it, so a constant that only initialises an accumulator costs no node."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr
from xdsl.ir import Operation

from lossgrad_compiler import level2
from lossgrad_compiler.backends.onnx.state import Translation
from lossgrad_compiler.backends.onnx.types import element_type_of
from lossgrad_compiler.backends.onnx.values import IndexProduct, ScalarConstant, Tensor, Value

_ELEMENTWISE: dict[type[Operation], str] = {
    arith.AddfOp: "Add",
    arith.SubfOp: "Sub",
    arith.MulfOp: "Mul",
    arith.DivfOp: "Div",
    arith.NegfOp: "Neg",
    arith.SelectOp: "Where",  # operands (condition, true value, false value), as in ONNX
    math.ExpOp: "Exp",
    math.LogOp: "Log",
}

_COMPARISON_OF_RELATION = {
    "eq": "Equal",
    "gt": "Greater",
    "ge": "GreaterOrEqual",
    "lt": "Less",
    "le": "LessOrEqual",
}


def onnx_comparison(predicate: level2.Predicate) -> tuple[str, bool] | None:
    """(ONNX comparison, negate) computing `predicate`, NaN operands included, or None. Every
    ONNX comparison is false on NaN, which is an ordered predicate's answer; an unordered
    predicate is the negation of an ordered one."""
    ordered = predicate if predicate.ordered else predicate.negated
    onnx_op = _COMPARISON_OF_RELATION.get(ordered.relation or "")
    if onnx_op is None or not ordered.ordered:
        return None
    return onnx_op, ordered is not predicate


class OnnxScalarOps(level2.ScalarOpDispatch[Value]):
    """Each level-2 scalar op as ONNX nodes of the function being translated."""

    BACKEND = "ONNX"
    REQUIRED = level2.SCALAR_OPS | {arith.UIToFPOp}

    def __init__(self, translation: Translation) -> None:
        self.t = translation

    def emit(
        self, op: Operation, onnx_op: str, operands: Sequence[Value], **attrs: object
    ) -> Tensor:
        """One ONNX node over the operands; the result varies along the union of their axes."""
        args = [self.t.materialize(v, op) for v in operands]
        hint = op.results[0].name_hint or onnx_op.lower()
        name = self.t.sink.add(onnx_op, [a.name for a in args], hint, **attrs)
        return Tensor(
            name, max((a.rank for a in args), default=0), frozenset().union(*(a.axes for a in args))
        )

    @level2.rule(*_ELEMENTWISE)
    def elementwise(self, op: Operation, operands: Sequence[Value]) -> Value:
        return self.emit(op, _ELEMENTWISE[type(op)], operands)

    @level2.rule(arith.CmpfOp)
    def compare(self, op: arith.CmpfOp, operands: Sequence[Value]) -> Value:
        predicate = level2.predicate_of(op)
        found = onnx_comparison(predicate)
        if found is None:
            raise level2.Level2ContractError(op, f"predicate '{predicate.name}' is not level 2")
        onnx_op, negate = found
        result = self.emit(op, onnx_op, operands)
        if negate:
            name = self.t.sink.add("Not", [result.name], "not")
            result = Tensor(name, result.rank, result.axes)
        return result

    @level2.rule(arith.ExtFOp, arith.TruncFOp, arith.UIToFPOp)
    def convert(self, op: Operation, operands: Sequence[Value]) -> Value:
        """Float widening/narrowing and count→float: a Cast (ONNX rounds to nearest even, as
        MLIR does)."""
        return self.emit(op, "Cast", operands, to=element_type_of(op.results[0].type, op))

    @level2.rule(arith.ConstantOp)
    def constant(self, op: arith.ConstantOp, operands: Sequence[Value]) -> Value:
        value = op.value
        if isinstance(value, IntegerAttr) and isinstance(op.result.type, IndexType):
            return IndexProduct(value.value.data)
        if isinstance(value, IntegerAttr | FloatAttr):
            return ScalarConstant(value.value.data, element_type_of(op.result.type, op))
        raise level2.Level2ContractError(op, f"only scalar constants are level 2, got {value}")
