"""The ONNX rules of the level-2 scalar ops, as the backend's `level2.ScalarOpDispatch`.

Scalar ops become ONNX elementwise ops: inside a linalg.generic body their operands are
tensors aligned to the iteration space, so ONNX broadcasting does what the indexing maps say;
outside a body they are rank-0 tensors. `arith.constant` stays symbolic (values.py) until a
node needs it, so a constant that only initialises an accumulator costs no node.

The integer ops of the classification operators (level2.CLASS_OPS: comparisons of class
indices, i1 logic, widenings, the check's count) are ONNX's integer and bool ops; `index`
values are int64 in ONNX, so `i64` and `index` need no Cast between them.

The gather (level2.GATHER_OPS: `tensor.extract %w[%k]` of a rank-1 tensor from above the
body) is an ONNX `Gather` by the index tensor the body computed elementwise. The verifier
proves each index a valid class or the 0 of a row that does not count. With no classes at
all (C = 0: spec's min_classes, which the other paths refuse with aclnn 161002 before they
read, but a graph cannot refuse at run time) that 0 is outside %w, so the Gather reads %w
with one zero appended: every index is then in range, and the result, which has no
elements, is empty instead of an error of ONNX Runtime's Gather."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import helper
from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.dialects.linalg.ops import IndexOp
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


_INTEGER_COMPARISON: dict[str, tuple[str, bool]] = {
    "eq": ("Equal", False),
    "ne": ("Equal", True),
    "slt": ("Less", False),
    "sle": ("LessOrEqual", False),
    "sgt": ("Greater", False),
    "sge": ("GreaterOrEqual", False),
}
"""(ONNX comparison, negate) of each signed `arith.cmpi` predicate; ONNX compares integers
as signed, so the unsigned predicates have no counterpart."""

_BOOLEAN: dict[type[Operation], str] = {arith.AndIOp: "And", arith.XOrIOp: "Xor"}


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
    REQUIRED = (
        level2.SCALAR_OPS
        | {arith.UIToFPOp}
        | (level2.CLASS_OPS - {IndexOp, arith.IndexCastOp})
        | level2.GATHER_OPS
    )
    """Every body op but `linalg.index` (it needs the loop sizes: generic.py) and
    `index_cast` (index arithmetic too: bookkeeping.py)."""

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

    @level2.rule(arith.CmpiOp)
    def compare_integers(self, op: arith.CmpiOp, operands: Sequence[Value]) -> Value:
        predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        found = _INTEGER_COMPARISON.get(predicate)
        if found is None:
            raise level2.Level2ContractError(op, f"predicate '{predicate}' has no ONNX comparison")
        onnx_op, negate = found
        result = self.emit(op, onnx_op, operands)
        if negate:
            result = Tensor(self.t.sink.add("Not", [result.name], "not"), result.rank, result.axes)
        return result

    @level2.rule(*_BOOLEAN)
    def logic(self, op: Operation, operands: Sequence[Value]) -> Value:
        """`andi`/`xori` on i1: ONNX And/Xor (bool). Wider integers are not level 2 here."""
        result_type = op.results[0].type
        if not (isinstance(result_type, IntegerType) and result_type.width.data == 1):
            raise level2.Level2ContractError(op, "integer logic is level 2 on i1 only")
        return self.emit(op, _BOOLEAN[type(op)], operands)

    @level2.rule(arith.AddiOp)
    def add_integers(self, op: arith.AddiOp, operands: Sequence[Value]) -> Value:
        return self.emit(op, "Add", operands)

    @level2.rule(arith.ExtSIOp, arith.ExtUIOp)
    def widen_integer(self, op: Operation, operands: Sequence[Value]) -> Value:
        """`extsi` (an i32 class index to i64) and `extui` of an i1 (true is 1): a Cast, which
        sign-extends ONNX's (signed) integers and maps bool to 0/1. ONNX has no unsigned
        view of a signed integer, so `extui` of a wider integer has no Cast."""
        source = op.operands[0].type
        if isinstance(op, arith.ExtUIOp) and not (
            isinstance(source, IntegerType) and source.width.data == 1
        ):
            raise level2.Level2ContractError(op, "extui is level 2 from i1 only")
        return self.emit(op, "Cast", operands, to=element_type_of(op.results[0].type, op))

    @level2.rule(arith.ExtFOp, arith.TruncFOp, arith.UIToFPOp)
    def convert(self, op: Operation, operands: Sequence[Value]) -> Value:
        """Float widening/narrowing and count→float: a Cast (ONNX rounds to nearest even, as
        MLIR does)."""
        return self.emit(op, "Cast", operands, to=element_type_of(op.results[0].type, op))

    @level2.rule(tensor.ExtractOp)
    def gather(self, op: tensor.ExtractOp, operands: Sequence[Value]) -> Value:
        """`tensor.extract %w[%k]`: Gather(Concat(%w, [0]), %k) along axis 0 (the zero for
        C = 0, above). The result has the index's shape, so it lies on the index's iteration
        axes (the source, from above the body, is on none)."""
        if len(operands) != 2:
            raise level2.Level2ContractError(op, "a gather reads a rank-1 tensor at one index")
        source, index = (self.t.materialize(v, op) for v in operands)
        if source.axes or source.rank != 1:
            raise level2.Level2ContractError(op, "a gather reads a rank-1 tensor from above")
        hint = op.result.name_hint or "gathered"
        dtype = helper.tensor_dtype_to_np_dtype(element_type_of(op.result.type, op))
        zero = self.t.sink.constant(np.zeros(1, dtype), "zero")
        padded = self.t.sink.add_shared("Concat", [source.name, zero], "padded", axis=0)
        name = self.t.sink.add("Gather", [padded, index.name], hint, axis=0)
        return Tensor(name, index.rank, index.axes)

    @level2.rule(arith.ConstantOp)
    def constant(self, op: arith.ConstantOp, operands: Sequence[Value]) -> Value:
        value = op.value
        if isinstance(value, IntegerAttr) and isinstance(op.result.type, IndexType):
            return IndexProduct(value.value.data)
        if isinstance(value, IntegerAttr | FloatAttr):
            return ScalarConstant(value.value.data, element_type_of(op.result.type, op))
        raise level2.Level2ContractError(op, f"only scalar constants are level 2, got {value}")
