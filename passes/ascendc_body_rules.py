"""The Ascend C rules of the level-2 scalar ops: one `linalg.generic` body becomes vector
instructions over a tile (used by `convert-linalg-to-ascendc`).

Each level-2 body op has one rule, whatever operator it came from. Values are tracked as

* `Scalar`: the same for every element (constants, the reduction scale, a one-element
  input read with GetValue): computed once in Init with scalar arithmetic;
* `Tile`: a UB tile times a pending scalar factor plus a pending scalar offset. Multiplying
  by a scalar or negating only updates the factor, so `-(g*s)*t` costs one Mul and one
  Muls, and a scale folds into a multiply that is needed anyway;
* `Mask`: a comparison, emitted as Compare/Compares only when a Select consumes it.

A cmpf predicate maps to the CMPMODE with the same result on NaN operands; a predicate that
has none is a valid body this backend cannot run. Compare/Compares and Select run over the
count rounded up to 256 bytes (the hardware rule, docs/ascend-c.md); tiles are sized to a
multiple of that by ascendc-plan-buffers. Narrow inputs are widened with Cast CAST_NONE and
the result is narrowed with CAST_RINT (round to nearest even).
"""

from __future__ import annotations

import math as pymath
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IndexType, f32, i1
from xdsl.ir import Attribute, Operation, SSAValue

from lossgrad_compiler import level2
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.errors import UnsupportedByBackendError

COMPARE_BYTES = 256  # Compare/Compares count·sizeof(T) must be a multiple of this
SCRATCH_ELEMENTS = COMPARE_BYTES // 4  # one repeat of f32: Init-time vector math on a scalar

_CMPMODE_OF_RELATION = {
    "eq": asc.CmpMode.EQ,
    "ne": asc.CmpMode.NE,
    "gt": asc.CmpMode.GT,
    "ge": asc.CmpMode.GE,
    "lt": asc.CmpMode.LT,
    "le": asc.CmpMode.LE,
}


def cmp_mode(predicate: level2.Predicate) -> asc.CmpMode | None:
    """The CMPMODE that computes `predicate`, NaN operands included, or None. Every mode
    but NE is false when an operand is NaN (an ordered predicate); NE is true (unordered)."""
    mode = _CMPMODE_OF_RELATION.get(predicate.relation or "")
    if mode is None or predicate.ordered == (mode is asc.CmpMode.NE):
        return None
    return mode


SUPPORTED_PREDICATES = tuple(p.name for p in level2.PREDICATES.values() if cmp_mode(p))
"""The predicates a Compare can compute, in MLIR's order."""


@dataclass(frozen=True)
class Scalar:
    value: SSAValue


@dataclass(frozen=True)
class Tile:
    """`local * factor + offset`; factor/offset None mean 1 and no offset."""

    local: SSAValue
    factor: SSAValue | None = None
    offset: SSAValue | None = None

    @property
    def plain(self) -> bool:
        return self.factor is None and self.offset is None

    @property
    def element_type(self) -> Attribute:
        assert isinstance(self.local.type, asc.LocalTensorType)
        return self.local.type.element_type


@dataclass(frozen=True)
class Mask:
    """`lhs predicate rhs`, emitted as a Compare(s) only when a Select consumes it (so that
    a select with the constant on the true side can use the negated predicate instead)."""

    predicate: level2.Predicate
    lhs: Tile
    rhs: Tile | Scalar

    @property
    def mode(self) -> asc.CmpMode:
        mode = cmp_mode(self.predicate)
        assert mode is not None, self.predicate
        return mode


Value = Scalar | Tile | Mask


class AscendcBodyRules(level2.ScalarOpDispatch[Value]):
    """Translate body ops into Init (before the tile loop) and the Compute stage."""

    BACKEND = "Ascend C"
    REQUIRED = level2.SCALAR_OPS

    def __init__(self, init: Builder, compute: Builder, count: SSAValue, where: str) -> None:
        self.init = init
        self.compute = compute
        self.count = count  # elements of this tile
        self.where = where  # the function being converted, for messages
        self._count256: dict[int, SSAValue] = {}
        self._splats: dict[SSAValue, SSAValue] = {}
        self._tile_length: SSAValue | None = None
        self._materialized: dict[Tile, Tile] = {}
        self._masks: dict[Mask, SSAValue] = {}

    # ------------------------------------------------------------------ building blocks

    def temp(self, element: Attribute) -> SSAValue:
        """A fresh compute-stage tile (placed later by ascendc-plan-buffers)."""
        return self.compute.insert(asc.TempOp(element)).result

    def count_for_compare(self, element: Attribute) -> SSAValue:
        """The tile count rounded up to 256 bytes of `element` (Compare and Select)."""
        multiple = COMPARE_BYTES * 8 // asc.element_bits(element)
        if multiple not in self._count256:
            op = asc.AlignUpOp(self.count, multiple)
            self._count256[multiple] = self.compute.insert(op).result
        return self._count256[multiple]

    def scalar_op(self, op: Operation) -> SSAValue:
        self.init.insert(op)
        return op.results[0]

    def constant(self, value: float, element: Attribute = f32) -> SSAValue:
        return self.scalar_op(arith.ConstantOp(FloatAttr(value, element)))

    def splat(self, scalar: SSAValue) -> SSAValue:
        """A loop-invariant tile holding `scalar` everywhere: Duplicate'd once in Init."""
        if scalar not in self._splats:
            local = self.init.insert(asc.TempOp(scalar.type)).result
            self.init.insert(asc.DuplicateOp(local, scalar, self.tile_length()))
            self._splats[scalar] = local
        return self._splats[scalar]

    def tile_length(self) -> SSAValue:
        """The planned tile length, as an Init-time index: the count of Init-time tiles."""
        if self._tile_length is None:
            self._tile_length = self.init.insert(asc.TileLengthOp()).result
        return self._tile_length

    # ------------------------------------------------------------------ value forms

    def materialize(self, value: Tile, into: SSAValue | None = None) -> Tile:
        """Apply the pending factor and offset with Muls/Adds (into `into` when given);
        a value used several times is materialized once."""
        if value.plain and into is None:
            return value
        if into is None and value in self._materialized:
            return self._materialized[value]
        current = value.local
        steps = [(asc.MulsOp, value.factor), (asc.AddsOp, value.offset)]
        pending = [(kind, s) for kind, s in steps if s is not None] or [
            (asc.MulsOp, self.constant(1.0, value.element_type))
        ]
        for i, (kind, scalar) in enumerate(pending):
            last = i == len(pending) - 1
            dst = into if (last and into is not None) else self.temp(value.element_type)
            self.compute.insert(kind(dst, current, scalar, self.count))
            current = dst
        if into is None:
            self._materialized[value] = Tile(current)
        return Tile(current)

    def mask_local(self, mask: Mask) -> SSAValue:
        """The bit mask of `mask`, compared once per tile."""
        if mask not in self._masks:
            local = self.temp(i1)
            n = self.count_for_compare(mask.lhs.element_type)
            if isinstance(mask.rhs, Scalar):
                op: Operation = asc.ComparesOp(local, mask.lhs.local, mask.rhs.value, mask.mode, n)
            else:
                op = asc.CompareOp(local, mask.lhs.local, mask.rhs.local, mask.mode, n)
            self.compute.insert(op)
            self._masks[mask] = local
        return self._masks[mask]

    def _tile(self, value: Value, op: Operation) -> Tile:
        if isinstance(value, Tile):
            return value
        raise level2.Level2ContractError(op, "a comparison cannot be used as a number here")

    def _scalar_clone(self, op: Operation, operands: Sequence[Value]) -> Scalar:
        """The op itself, on Init-time scalars."""
        values = [v.value for v in operands if isinstance(v, Scalar)]
        new = op.clone()
        for i, v in enumerate(values):
            new.operands[i] = v
        return Scalar(self.scalar_op(new))

    def _scalar_mul(self, a: SSAValue | None, b: SSAValue) -> SSAValue:
        return b if a is None else self.scalar_op(arith.MulfOp(a, b))

    def _binary(self, kind: type[asc.BinaryVectorOp], a: Tile, b: Tile) -> Tile:
        ta, tb = self.materialize(a), self.materialize(b)
        dst = self.temp(ta.element_type)
        self.compute.insert(kind(dst, ta.local, tb.local, self.count))
        return Tile(dst)

    def _negate(self, t: Tile) -> Tile:
        factor = (
            self.constant(-1.0, t.element_type)
            if t.factor is None
            else self.scalar_op(arith.NegfOp(t.factor))
        )
        offset = None if t.offset is None else self.scalar_op(arith.NegfOp(t.offset))
        return Tile(t.local, factor, offset)

    def _add_scalar(self, t: Tile, s: SSAValue) -> Tile:
        """t + s: a new pending offset (an existing offset is applied first: same roundings)."""
        if t.offset is not None:
            t = self.materialize(t)
        return Tile(t.local, t.factor, s)

    def _cast(self, op: Operation, x: Value, mode: asc.RoundMode) -> Tile:
        src = self.materialize(self._tile(x, op))
        dst = self.temp(op.results[0].type)
        self.compute.insert(asc.CastOp(dst, src.local, mode, self.count))
        return Tile(dst)

    def _unary(self, kind: type[asc.UnaryVectorOp], op: Operation, x: Value) -> Value:
        if isinstance(x, Scalar):  # once, in Init, on one repeat of scratch
            scratch = self.init.insert(asc.TempOp(x.value.type, SCRATCH_ELEMENTS)).result
            n = self.init.insert(arith.ConstantOp.from_int_and_width(SCRATCH_ELEMENTS, IndexType()))
            self.init.insert(asc.DuplicateOp(scratch, x.value, n.result))
            self.init.insert(kind(scratch, scratch, n.result))
            return Scalar(self.init.insert(asc.ReadLocalOp(scratch)).result)
        src = self.materialize(self._tile(x, op))
        dst = self.temp(src.element_type)
        self.compute.insert(kind(dst, src.local, self.count))
        return Tile(dst)

    # ------------------------------------------------------------------ the rules

    @level2.rule(arith.ConstantOp)
    def constant_rule(self, op: Operation, operands: Sequence[Value]) -> Value:
        return Scalar(self.scalar_op(op.clone()))

    @level2.rule(arith.ExtFOp)
    def extf(self, op: Operation, operands: Sequence[Value]) -> Value:
        (x,) = operands
        if isinstance(x, Scalar):
            return self._scalar_clone(op, operands)
        return self._cast(op, x, asc.RoundMode.CAST_NONE)

    @level2.rule(arith.TruncFOp)
    def truncf(self, op: Operation, operands: Sequence[Value]) -> Value:
        (x,) = operands
        if isinstance(x, Scalar):
            return self._scalar_clone(op, operands)
        return self._cast(op, x, asc.RoundMode.CAST_RINT)

    @level2.rule(arith.MulfOp)
    def mulf(self, op: Operation, operands: Sequence[Value]) -> Value:
        a, b = operands
        if _all_scalar(operands):
            return self._scalar_clone(op, operands)
        if isinstance(a, Scalar):
            a, b = b, a
        if isinstance(b, Scalar):  # tile * scalar: fold into the pending factor and offset
            t = self._tile(a, op)
            offset = None if t.offset is None else self.scalar_op(arith.MulfOp(t.offset, b.value))
            scaled = Tile(t.local, self._scalar_mul(t.factor, b.value), offset)
            # a product read more than once (ge of (ge*(t-x))*exp(t) + ge*exp(t)) is applied
            # once, here, rather than carried into every use and applied there again
            return self.materialize(scaled) if op.results[0].has_more_than_one_use() else scaled
        ta, tb = self._tile(a, op), self._tile(b, op)
        if ta.offset is not None:
            ta = self.materialize(ta)
        if tb.offset is not None:
            tb = self.materialize(tb)
        dst = self.temp(ta.element_type)
        self.compute.insert(asc.MulOp(dst, ta.local, tb.local, self.count))
        factor = tb.factor if ta.factor is None else self._scalar_mul(tb.factor, ta.factor)
        return Tile(dst, factor)

    @level2.rule(arith.NegfOp)
    def negf(self, op: Operation, operands: Sequence[Value]) -> Value:
        (x,) = operands
        if isinstance(x, Scalar):
            return self._scalar_clone(op, operands)
        return self._negate(self._tile(x, op))

    @level2.rule(arith.AddfOp)
    def addf(self, op: Operation, operands: Sequence[Value]) -> Value:
        a, b = operands
        if _all_scalar(operands):
            return self._scalar_clone(op, operands)
        if isinstance(a, Scalar):
            a, b = b, a
        if isinstance(b, Scalar):
            return self._add_scalar(self._tile(a, op), b.value)
        return self._binary(asc.AddOp, self._tile(a, op), self._tile(b, op))

    @level2.rule(arith.SubfOp)
    def subf(self, op: Operation, operands: Sequence[Value]) -> Value:
        a, b = operands
        if _all_scalar(operands):
            return self._scalar_clone(op, operands)
        if isinstance(b, Scalar):  # a - s == a + (-s) exactly
            return self._add_scalar(self._tile(a, op), self.scalar_op(arith.NegfOp(b.value)))
        if isinstance(a, Scalar):  # s - b == (-b) + s exactly
            return self._add_scalar(self._negate(self._tile(b, op)), a.value)
        return self._binary(asc.SubOp, self._tile(a, op), self._tile(b, op))

    @level2.rule(arith.DivfOp)
    def divf(self, op: Operation, operands: Sequence[Value]) -> Value:
        a, b = operands
        if _all_scalar(operands):
            return self._scalar_clone(op, operands)
        if isinstance(b, Scalar):
            t = self.materialize(self._tile(a, op))
            inverse = _power_of_two_inverse(b.value)
            if inverse == 1.0:  # x / 1 == x exactly
                return t
            if inverse is not None:
                return Tile(t.local, self.constant(inverse, t.element_type))
            return self._binary(asc.DivOp, t, Tile(self.splat(b.value)))
        if isinstance(a, Scalar):
            return self._binary(asc.DivOp, Tile(self.splat(a.value)), self._tile(b, op))
        return self._binary(asc.DivOp, self._tile(a, op), self._tile(b, op))

    @level2.rule(math.ExpOp)
    def exp(self, op: Operation, operands: Sequence[Value]) -> Value:
        return self._unary(asc.ExpOp, op, operands[0])

    @level2.rule(math.LogOp)
    def log(self, op: Operation, operands: Sequence[Value]) -> Value:
        return self._unary(asc.LnOp, op, operands[0])

    @level2.rule(arith.CmpfOp)
    def cmpf(self, op: Operation, operands: Sequence[Value]) -> Value:
        assert isinstance(op, arith.CmpfOp)
        if _all_scalar(operands):
            return self._scalar_clone(op, operands)
        predicate = level2.predicate_of(op)
        if cmp_mode(predicate) is None:
            raise UnsupportedByBackendError(
                self.where,
                op.name,
                f"predicate {predicate.name} has no CMPMODE with its NaN behaviour (supported: "
                f"{', '.join(SUPPORTED_PREDICATES)}); use the onnx or ort target",
            )
        a, b = operands
        if isinstance(a, Scalar):
            a, b, predicate = b, a, predicate.swapped
        lhs = self.materialize(self._tile(a, op))
        rhs = b if isinstance(b, Scalar) else self.materialize(self._tile(b, op))
        return Mask(predicate, lhs, rhs)

    @level2.rule(arith.SelectOp)
    def select(self, op: Operation, operands: Sequence[Value]) -> Value:
        cond, a, b = operands
        if _all_scalar(operands):
            return self._scalar_clone(op, operands)
        if not isinstance(cond, Mask | Scalar):
            raise level2.Level2ContractError(op, "the condition must come from arith.cmpf")
        if isinstance(a, Mask) or isinstance(b, Mask):
            raise level2.Level2ContractError(op, "selects between numbers, not comparisons")
        return self._select(cond, a, b)

    def _select(self, cond: Mask | Scalar, a: Scalar | Tile, b: Scalar | Tile) -> Value:
        if isinstance(cond, Scalar):  # a scalar condition: compare its 0/1 splat once per tile
            flag = self.scalar_op(
                arith.SelectOp(cond.value, self.constant(1.0), self.constant(0.0))
            )
            cond = Mask(
                level2.PREDICATES["une"], Tile(self.splat(flag)), Scalar(self.constant(0.0))
            )
        negated = cond.predicate.negated
        if isinstance(a, Scalar) and not isinstance(b, Scalar) and cmp_mode(negated):
            cond = Mask(negated, cond.lhs, cond.rhs)
            a, b = b, a
        mask = self.mask_local(cond)
        ta = Tile(self.splat(a.value)) if isinstance(a, Scalar) else self.materialize(a)
        element = ta.element_type
        n = self.count_for_compare(element)
        dst = self.temp(element)
        if isinstance(b, Scalar):
            self.compute.insert(asc.SelectsOp(dst, mask, ta.local, b.value, n))
        else:
            tb = self.materialize(b)
            self.compute.insert(asc.SelectOp(dst, mask, ta.local, tb.local, n))
        return Tile(dst)


def _all_scalar(operands: Sequence[Value]) -> bool:
    return all(isinstance(v, Scalar) for v in operands)


def _power_of_two_inverse(value: SSAValue) -> float | None:
    """1/c when `value` is a constant power of two (then x/c == x*(1/c) exactly)."""
    owner = value.owner
    if not isinstance(owner, arith.ConstantOp) or not isinstance(owner.value, FloatAttr):
        return None
    c = float(level2.constant_value(owner))
    if c == 0 or c != c or abs(c) == float("inf"):
        return None
    mantissa, _ = pymath.frexp(abs(c))
    return 1.0 / c if mantissa == 0.5 else None
