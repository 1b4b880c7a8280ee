"""The level-2 body in the HFusion form: one rule per scalar op (a ScalarOpDispatch).

A body value becomes a `Scalar` (an f32/f16 value on the scalar unit: constants, the scale,
a one-element input, anything computed only from those) or a `Tensor` of the iteration
shape. An op on tensors becomes one named op, `linalg.elemwise_binary`/`elemwise_unary` or
`hfusion.cast`, with scalars as scalar operands; an op on scalars only stays a scalar
`arith`/`math` op. A comparison is emitted by the select that reads it, which knows whether
it needs a tensor of i1.

What AscendNPU IR 1.2.0's HFusion pipeline takes decides three details (found by running
`bishengir-opt --lower-hfusion-pipeline` on each form):

* `hfusion.compare` computes oeq, une, ole, olt, oge and ogt on floats; the other level-2
  predicates (ule, ult, uge, ugt, ueq) are the negations of ordered ones, taken as the
  ordered compare with the select's operands swapped;
* a compare takes its scalar operand on the right (the predicate is swapped otherwise), and
  a compare of two scalars that selects between tensors compares a filled tensor;
* exp and log are vector instructions only: on a scalar they take a filled tensor
  ("outline single kernel failed" or "could not find next producer to fuse" otherwise);
* a select needs one tensor branch: a select between two scalars (under a tensor condition)
  fills its false branch ("could not find next producer to fuse into container" otherwise).

Every fill materializes a scalar at the iteration shape; none changes a value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import i1
from xdsl.ir import Attribute, Operation, SSAValue

from lossgrad_compiler import level2
from lossgrad_compiler.dialects.hfusion import (
    COMPARE_FUNCTIONS,
    BinaryFn,
    CastOp,
    CompareOp,
    ElemwiseBinaryOp,
    ElemwiseUnaryOp,
    SelectOp,
    UnaryFn,
)
from lossgrad_compiler.errors import UnsupportedByBackendError


@dataclass(frozen=True)
class Scalar:
    value: SSAValue


@dataclass(frozen=True)
class Tensor:
    value: SSAValue


@dataclass(frozen=True)
class Comparison:
    """An arith.cmpf not emitted yet: the select that reads it emits it."""

    op: arith.CmpfOp
    lhs: Scalar | Tensor
    rhs: Scalar | Tensor


Value = Scalar | Tensor | Comparison


class Emitter:
    """Where the rules put ops, and the iteration-shaped tensors they write into."""

    def __init__(
        self,
        insert: Callable[[Operation], Operation],
        empty: Callable[[Attribute], SSAValue],
        fill: Callable[[SSAValue, Attribute], SSAValue],
    ) -> None:
        self.insert = insert
        self.empty = empty  # tensor.empty of the iteration shape and this element type
        self.fill = fill  # a scalar broadcast to the iteration shape (linalg.fill)


_BINARY: dict[type[Operation], BinaryFn] = {
    arith.AddfOp: BinaryFn.ADD,
    arith.SubfOp: BinaryFn.SUB,
    arith.MulfOp: BinaryFn.MUL,
    arith.DivfOp: BinaryFn.DIV,
}
VECTOR_ONLY_OPS = (math.ExpOp, math.LogOp)
"""Ops that exist only as vector instructions: on a scalar they take a filled tensor."""

_UNARY: dict[type[Operation], UnaryFn] = {
    arith.NegfOp: UnaryFn.NEGF,
    math.ExpOp: UnaryFn.EXP,
    math.LogOp: UnaryFn.LOG,
}


class HfusionBodyRules(level2.ScalarOpDispatch[Value]):
    BACKEND = "HFusion form"
    REQUIRED = level2.SCALAR_OPS

    def __init__(self, emitter: Emitter, where: str) -> None:
        self.emit = emitter
        self.where = where

    # ------------------------------------------------------------------ helpers

    def _numbers(self, op: Operation, operands: Sequence[Value]) -> list[Scalar | Tensor]:
        for v in operands:
            if isinstance(v, Comparison):
                raise level2.Level2ContractError(op, "an arith.cmpf is read only by arith.select")
        return list(operands)  # type: ignore[arg-type]

    def _scalar(self, op: Operation) -> Scalar:
        return Scalar(self.emit.insert(op).results[0])

    def _tensor(self, value: Scalar | Tensor, element: Attribute) -> Tensor:
        return value if isinstance(value, Tensor) else Tensor(self.emit.fill(value.value, element))

    # ------------------------------------------------------------------ rules

    @level2.rule(arith.ConstantOp)
    def constant(self, op: arith.ConstantOp, operands: Sequence[Value]) -> Value:
        return self._scalar(arith.ConstantOp(op.value, op.result.type))

    @level2.rule(arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp)
    def binary(self, op: Operation, operands: Sequence[Value]) -> Value:
        lhs, rhs = self._numbers(op, operands)
        if isinstance(lhs, Scalar) and isinstance(rhs, Scalar):
            return self._scalar(type(op)(lhs.value, rhs.value))  # type: ignore[call-arg]
        out = self.emit.empty(op.results[0].type)
        return Tensor(
            self.emit.insert(
                ElemwiseBinaryOp(lhs.value, rhs.value, out, _BINARY[type(op)])
            ).results[0]
        )

    @level2.rule(arith.NegfOp, math.ExpOp, math.LogOp)
    def unary(self, op: Operation, operands: Sequence[Value]) -> Value:
        return self.elementwise_unary(op, operands, _UNARY[type(op)])

    def elementwise_unary(self, op: Operation, operands: Sequence[Value], fn: UnaryFn) -> Value:
        """`linalg.elemwise_unary {fun = fn}` on a tensor; on a scalar, the scalar op itself
        where the scalar unit has it."""
        (value,) = self._numbers(op, operands)
        if isinstance(value, Scalar) and not isinstance(op, VECTOR_ONLY_OPS):
            return self._scalar(type(op)(value.value))  # type: ignore[call-arg]
        value = self._tensor(value, op.results[0].type)
        out = self.emit.empty(op.results[0].type)
        return Tensor(self.emit.insert(ElemwiseUnaryOp(value.value, out, fn)).results[0])

    @level2.rule(arith.ExtFOp, arith.TruncFOp)
    def cast(self, op: Operation, operands: Sequence[Value]) -> Value:
        (value,) = self._numbers(op, operands)
        target = op.results[0].type
        if isinstance(value, Scalar):
            return self._scalar(type(op)(value.value, target))  # type: ignore[call-arg]
        return Tensor(self.emit.insert(CastOp(value.value, self.emit.empty(target))).results[0])

    @level2.rule(arith.CmpfOp)
    def compare(self, op: arith.CmpfOp, operands: Sequence[Value]) -> Value:
        lhs, rhs = self._numbers(op, operands)
        return Comparison(op, lhs, rhs)

    @level2.rule(arith.SelectOp)
    def select(self, op: arith.SelectOp, operands: Sequence[Value]) -> Value:
        cond, when_true, when_false = operands
        if not isinstance(cond, Comparison):
            raise level2.Level2ContractError(op, "an arith.select chooses by an arith.cmpf")
        when_true, when_false = self._numbers(op, [when_true, when_false])
        element = op.result.type
        if all(isinstance(v, Scalar) for v in (cond.lhs, cond.rhs, when_true, when_false)):
            name = level2.predicate_of(cond.op).name
            flag = self._scalar(arith.CmpfOp(cond.lhs.value, cond.rhs.value, name))
            return self._scalar(arith.SelectOp(flag.value, when_true.value, when_false.value))
        predicate = level2.predicate_of(cond.op)
        if predicate.name not in COMPARE_FUNCTIONS:
            predicate = predicate.negated
            when_true, when_false = when_false, when_true
        if predicate.name not in COMPARE_FUNCTIONS:
            raise UnsupportedByBackendError(
                self.where,
                "arith.cmpf",
                f"predicate '{level2.predicate_of(cond.op).name}' has no hfusion.compare form",
            )
        lhs, rhs = cond.lhs, cond.rhs
        if isinstance(lhs, Scalar) and isinstance(rhs, Tensor):
            lhs, rhs, predicate = rhs, lhs, predicate.swapped
        lhs = self._tensor(lhs, lhs.value.type)  # two scalars compared to select between tensors
        flags = self.emit.insert(
            CompareOp(lhs.value, rhs.value, self.emit.empty(i1), COMPARE_FUNCTIONS[predicate.name])
        ).results[0]
        if isinstance(when_true, Scalar) and isinstance(when_false, Scalar):
            when_false = self._tensor(when_false, element)
        out = self.emit.empty(element)
        return Tensor(
            self.emit.insert(SelectOp(flags, when_true.value, when_false.value, out)).results[0]
        )
