"""The level-2 body in the HFusion form: one rule per scalar op (a ScalarOpDispatch).

A body value becomes a `Scalar` (an f32/f16 value on the scalar unit: constants, the scale,
a one-element input, anything computed only from those) or a `Tensor` of the iteration
shape. An op on tensors becomes one named op, `linalg.elemwise_binary`/`elemwise_unary` or
`hfusion.cast`, with scalars as scalar operands; an op on scalars only stays a scalar
`arith`/`math` op. A comparison is emitted by the select that reads it, which knows whether
it needs a tensor of i1.

What AscendNPU IR 1.2.0's HFusion pipeline takes decides these details (found by running
`bishengir-opt --lower-hfusion-pipeline` on each form):

* `hfusion.compare` computes oeq, une, ole, olt, oge and ogt on floats; the other level-2
  predicates (ule, ult, uge, ugt, ueq) are the negations of ordered ones, taken as the
  ordered compare with the select's operands swapped;
* a compare takes its scalar operand on the right (the predicate is swapped otherwise), and
  a compare of two scalars that selects between tensors compares a filled tensor;
* exp and log are vector instructions only: on a scalar they take a filled tensor
  ("outline single kernel failed" or "could not find next producer to fuse" otherwise);
* a select needs one tensor branch: a select between two scalars (under a tensor condition)
  fills its false branch ("could not find next producer to fuse into container" otherwise);
* a `truncf` in a body (a half-type intermediate rounded, as in NLLLoss's quotient) is an
  `hfusion.cast` whose bits pass through `hfusion.bitcast` to an integer and back (of a
  scalar: at 0-d, then broadcast): bishengir folds a narrowing cast and the widening after
  it into nothing, on scalars and tensors, and the rounding is lost (a bfloat16
  NLLLossBackward mean case came out one ulp off).

Every fill materializes a scalar at the iteration shape; none changes a value.

The classification bodies' integer ops (level2.CLASS_OPS) follow the same pattern: the class
position `linalg.index k` becomes `hfusion.arange` (stride 1 on loop k, 0 elsewhere) at the
`arith.index_cast` that reads it, `cmpi` an `hfusion.compare` on integers (into i1), `andi`
an `hfusion.elemwise_binary <vand>`, `extsi`/`extui` an `hfusion.cast`, `addi` a
`linalg.elemwise_binary <add>`. One more detail of AscendNPU IR 1.2.0 decides the form of a
negation: it rewrites `vne`, a `vxor` with true and a select of false/true on i1 into
`hfusion.elemwise_unary <vnot>`, whose CPU-runner lowering yields its input unchanged on i1
(tests/hfusion/test_hfusion_classes_bishengir.py pins it). So `cmpi ne` is `veq` negated, and
a negation (`xori %x, true`) is `veq(cast_i64(x), 0)`, which it keeps as compares.

CrossEntropyLossGrad's gather `tensor.extract %w[index_cast(%k)]` (level2.GATHER_OPS)
becomes no address computation at all: the converter's `gather` selects `w_j` where the
class position j equals k and -0.0 elsewhere, and sums over the classes (see
`Shapes.gather`). Only one term is not -0.0 and -0.0 is the exact additive identity, so the
sum is w[k] bit for bit. AscendNPU IR 1.2.0 has `hfusion.gather`, but fails to outline a
kernel holding it beside anything but a multiply ("outline single kernel failed", on a
gather followed by a cast; tests/hfusion/test_hfusion_ce_bishengir.py pins it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, i1, i64
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Attribute, Operation, SSAValue

from lossgrad_compiler import level2
from lossgrad_compiler.dialects.hfusion import (
    COMPARE_FUNCTIONS,
    BinaryFn,
    BitcastOp,
    CastOp,
    CompareFn,
    CompareOp,
    ElemwiseBinaryOp,
    ElemwiseUnaryOp,
    HfusionBinaryFn,
    HfusionElemwiseBinaryOp,
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


@dataclass(frozen=True)
class Position:
    """A `linalg.index` not emitted yet: the `arith.index_cast` that reads it emits the
    `hfusion.arange` in the integer type it casts to."""

    loop: int


@dataclass(frozen=True)
class Gathered:
    """A rank-1 tensor captured from above a body (the weight), read only by a gather."""

    source: SSAValue


@dataclass(frozen=True)
class Address:
    """An `arith.index_cast` of an integer tensor to index, read only by a gather."""

    index: Tensor


Value = Scalar | Tensor | Comparison | Position | Gathered | Address

_CMPI_NAMES = arith.CMPI_COMPARISON_OPERATIONS
_INTEGER_COMPARE: dict[str, CompareFn] = {
    "eq": CompareFn.VEQ,
    "slt": CompareFn.VLT,
    "sle": CompareFn.VLE,
    "sgt": CompareFn.VGT,
    "sge": CompareFn.VGE,
    "ult": CompareFn.VULT,
    "ule": CompareFn.VULE,
    "ugt": CompareFn.VUGT,
    "uge": CompareFn.VUGE,
}
"""hfusion.compare's function for each arith.cmpi predicate but `ne` (a negated `eq`)."""
_CMPI_SWAPPED = {
    "eq": "eq", "ne": "ne", "slt": "sgt", "sgt": "slt", "sle": "sge", "sge": "sle",
    "ult": "ugt", "ugt": "ult", "ule": "uge", "uge": "ule",
}  # fmt: skip
"""The predicate with its operands swapped (a compare takes its scalar on the right)."""


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
        self.rounded: Callable[[SSAValue, Attribute], SSAValue] | None = None
        """A scalar rounded to a narrower float by a 0-d `hfusion.cast`, broadcast to the
        iteration shape; set by the converter."""
        self.arange: Callable[[int, Attribute], SSAValue] | None = None
        """The position on a loop as an integer tensor of the iteration shape
        (hfusion.arange); set by the converter."""
        self.gather: Callable[[tensor.ExtractOp, SSAValue, SSAValue], SSAValue] | None = None
        """`source[index]` at every element, with no address computed (a select by the
        class position and a sum); set by the converter."""


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
    REQUIRED = level2.SCALAR_OPS | level2.CLASS_OPS | level2.GATHER_OPS

    def __init__(self, emitter: Emitter, where: str) -> None:
        self.emit = emitter
        self.where = where

    # ------------------------------------------------------------------ helpers

    def _numbers(self, op: Operation, operands: Sequence[Value]) -> list[Scalar | Tensor]:
        for v in operands:
            if isinstance(v, Comparison):
                raise level2.Level2ContractError(op, "an arith.cmpf is read only by arith.select")
            if isinstance(v, Position):
                raise level2.Level2ContractError(
                    op, "a linalg.index is read only by arith.index_cast"
                )
            if isinstance(v, Gathered | Address):
                raise level2.Level2ContractError(
                    op, "a tensor from above and an index are read only by tensor.extract"
                )
        return list(operands)  # type: ignore[arg-type]

    def _constant(self, value: int, element: Attribute) -> SSAValue:
        return self.emit.insert(arith.ConstantOp(IntegerAttr(value, element))).results[0]

    def _negated(self, mask: Tensor) -> Tensor:
        """`not mask` as `cast_i64(mask) == 0` (see the module doc: AscendNPU IR 1.2.0's
        CPU runner computes its own i1 negation as the identity)."""
        wide = self.emit.insert(CastOp(mask.value, self.emit.empty(i64))).results[0]
        zero = self._constant(0, i64)
        return Tensor(
            self.emit.insert(CompareOp(wide, zero, self.emit.empty(i1), CompareFn.VEQ)).results[0]
        )

    @staticmethod
    def _is_true(value: Scalar | Tensor) -> bool:
        owner = value.value.owner
        return (
            isinstance(value, Scalar)
            and isinstance(owner, arith.ConstantOp)
            and owner.result.type == i1
            and isinstance(owner.value, IntegerAttr)
            and owner.value.value.data != 0
        )

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
        if isinstance(value, Scalar) and isinstance(op, arith.ExtFOp):
            return self._scalar(arith.ExtFOp(value.value, target))
        if isinstance(value, Scalar) and self.emit.rounded is not None:
            # a rounding of a scalar: a 0-d cast, broadcast (see the module doc)
            return Tensor(self.emit.rounded(value.value, target))
        value = self._tensor(value, value.value.type)
        cast = self.emit.insert(CastOp(value.value, self.emit.empty(target))).results[0]
        if isinstance(op, arith.ExtFOp):
            return Tensor(cast)
        # a rounding that a widening may read back: kept through a bitcast pair
        bits = self.emit.insert(BitcastOp(cast, self.emit.empty(IntegerType(target.bitwidth))))  # type: ignore[attr-defined]
        return Tensor(
            self.emit.insert(BitcastOp(bits.results[0], self.emit.empty(target))).results[0]
        )

    @level2.rule(IndexOp)
    def position(self, op: IndexOp, operands: Sequence[Value]) -> Value:
        return Position(op.dim.value.data)

    @level2.rule(arith.IndexCastOp)
    def index_cast(self, op: arith.IndexCastOp, operands: Sequence[Value]) -> Value:
        (value,) = operands
        target = op.result.type
        if isinstance(value, Position):
            if self.emit.arange is None or not isinstance(target, IntegerType):
                raise level2.Level2ContractError(op, "casts the class position to an integer")
            return Tensor(self.emit.arange(value.loop, target))
        (number,) = self._numbers(op, [value])
        if isinstance(number, Tensor):
            if not isinstance(target, IndexType):
                raise level2.Level2ContractError(op, "an arith.index_cast in a body casts an index")
            return Address(number)  # the gather that reads it takes the integer tensor
        return self._scalar(arith.IndexCastOp(number.value, target))

    @level2.rule(tensor.ExtractOp)
    def gather(self, op: tensor.ExtractOp, operands: Sequence[Value]) -> Value:
        """`tensor.extract %w[%k]`: w[k] at every element, by the converter's gather."""
        if len(operands) != 2 or not isinstance(operands[0], Gathered):
            raise level2.Level2ContractError(op, "gathers from a rank-1 tensor from above")
        index = operands[1]
        if not isinstance(index, Address) or self.emit.gather is None:
            # a scalar index (one row) does not occur: a target is never one element here
            raise level2.Level2ContractError(op, "gathers at an index_cast of a class index")
        return Tensor(self.emit.gather(op, operands[0].source, index.index.value))

    @level2.rule(arith.CmpiOp)
    def compare_integers(self, op: arith.CmpiOp, operands: Sequence[Value]) -> Value:
        lhs, rhs = self._numbers(op, operands)
        name = _CMPI_NAMES[op.predicate.value.data]
        if isinstance(lhs, Scalar) and isinstance(rhs, Scalar):
            return self._scalar(arith.CmpiOp(lhs.value, rhs.value, name))
        if isinstance(lhs, Scalar):
            lhs, rhs, name = rhs, lhs, _CMPI_SWAPPED[name]
        fn = _INTEGER_COMPARE["eq" if name == "ne" else name]
        flags = Tensor(
            self.emit.insert(CompareOp(lhs.value, rhs.value, self.emit.empty(i1), fn)).results[0]
        )
        return self._negated(flags) if name == "ne" else flags

    @level2.rule(arith.AndIOp, arith.XOrIOp)
    def logic(self, op: Operation, operands: Sequence[Value]) -> Value:
        lhs, rhs = self._numbers(op, operands)
        if isinstance(op, arith.XOrIOp) and (self._is_true(lhs) or self._is_true(rhs)):
            other = rhs if self._is_true(lhs) else lhs
            if isinstance(other, Tensor):
                return self._negated(other)  # xori %x, true: a negation
        if isinstance(lhs, Scalar) and isinstance(rhs, Scalar):
            return self._scalar(type(op)(lhs.value, rhs.value))  # type: ignore[call-arg]
        element = op.results[0].type
        lhs, rhs = self._tensor(lhs, element), self._tensor(rhs, element)
        fn = HfusionBinaryFn.VAND if isinstance(op, arith.AndIOp) else HfusionBinaryFn.VXOR
        out = self.emit.empty(element)
        return Tensor(
            self.emit.insert(HfusionElemwiseBinaryOp(lhs.value, rhs.value, out, fn)).results[0]
        )

    @level2.rule(arith.ExtSIOp, arith.ExtUIOp)
    def extend(self, op: Operation, operands: Sequence[Value]) -> Value:
        (value,) = self._numbers(op, operands)
        target = op.results[0].type
        if isinstance(value, Scalar):
            return self._scalar(type(op)(value.value, target))  # type: ignore[call-arg]
        return Tensor(self.emit.insert(CastOp(value.value, self.emit.empty(target))).results[0])

    @level2.rule(arith.AddiOp)
    def add_integers(self, op: arith.AddiOp, operands: Sequence[Value]) -> Value:
        lhs, rhs = self._numbers(op, operands)
        if isinstance(lhs, Scalar) and isinstance(rhs, Scalar):
            return self._scalar(arith.AddiOp(lhs.value, rhs.value))
        out = self.emit.empty(op.result.type)
        return Tensor(
            self.emit.insert(ElemwiseBinaryOp(lhs.value, rhs.value, out, BinaryFn.ADD)).results[0]
        )

    @level2.rule(arith.CmpfOp)
    def compare(self, op: arith.CmpfOp, operands: Sequence[Value]) -> Value:
        lhs, rhs = self._numbers(op, operands)
        return Comparison(op, lhs, rhs)

    @level2.rule(arith.SelectOp)
    def select(self, op: arith.SelectOp, operands: Sequence[Value]) -> Value:
        cond, when_true, when_false = operands
        if not isinstance(cond, Comparison):
            return self._select_by_mask(op, operands)
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

    def _select_by_mask(self, op: arith.SelectOp, operands: Sequence[Value]) -> Value:
        """A select under an i1 value (cmpi, andi, ...): a scalar one where everything is
        scalar, else hfusion.select on a mask tensor with one tensor branch."""
        cond, when_true, when_false = self._numbers(op, operands)
        element = op.result.type
        if all(isinstance(v, Scalar) for v in (cond, when_true, when_false)):
            return self._scalar(arith.SelectOp(cond.value, when_true.value, when_false.value))
        cond = self._tensor(cond, i1)
        if isinstance(when_true, Scalar) and isinstance(when_false, Scalar):
            when_false = self._tensor(when_false, element)
        select = SelectOp(cond.value, when_true.value, when_false.value, self.emit.empty(element))
        return Tensor(self.emit.insert(select).results[0])
