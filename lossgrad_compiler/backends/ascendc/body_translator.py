"""Translate one level-2 `linalg.generic` body into Ascend C vector instructions over a tile.

The translation is generic over the body ops of docs/level2.md: each arith/math op has one
rule, whatever operator it came from. Values are tracked as

* `Scalar`: the same for every element (constants, the reduction scale, a one-element
  input read with GetValue): computed once in Init with scalar arithmetic;
* `Tile`: a UB tile times a pending scalar factor plus a pending scalar offset. Multiplying
  by a scalar or negating only updates the factor, so `-(g*s)*t` costs one Mul and one
  Muls, and a scale folds into a multiply that is needed anyway;
* `Mask`: the bit mask of a Compare/Compares, with the predicate that made it.

Compare/Compares and Select run over the count rounded up to 256 bytes (the hardware rule);
tiles are sized to a multiple of that by ascendc-plan-buffers. Narrow inputs are widened
with Cast CAST_NONE and the result is narrowed with CAST_RINT (round to nearest even).
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IndexType, f32, i1
from xdsl.ir import Attribute, Operation, SSAValue

from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.errors import UnsupportedByBackendError

COMPARE_BYTES = 256  # Compare/Compares count·sizeof(T) must be a multiple of this
SCRATCH_ELEMENTS = COMPARE_BYTES // 4  # one repeat of f32: Init-time vector math on a scalar

PREDICATES: dict[str, asc.CmpMode] = {
    "oeq": asc.CmpMode.EQ,
    "ogt": asc.CmpMode.GT,
    "oge": asc.CmpMode.GE,
    "olt": asc.CmpMode.LT,
    "ole": asc.CmpMode.LE,
    "une": asc.CmpMode.NE,
}
"""arith.cmpf predicates with a CMPMODE of the same NaN behaviour (NE is the unordered one)."""

SWAPPED = {
    asc.CmpMode.LT: asc.CmpMode.GT,
    asc.CmpMode.GT: asc.CmpMode.LT,
    asc.CmpMode.LE: asc.CmpMode.GE,
    asc.CmpMode.GE: asc.CmpMode.LE,
    asc.CmpMode.EQ: asc.CmpMode.EQ,
    asc.CmpMode.NE: asc.CmpMode.NE,
}
"""The mode for `b op a` given the mode of `a op b`."""

NEGATED = {asc.CmpMode.EQ: asc.CmpMode.NE, asc.CmpMode.NE: asc.CmpMode.EQ}
"""Exact logical negations among the modes, NaN included (not(LT) is not GE with NaN)."""


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
    """`lhs mode rhs`, emitted as a Compare(s) only when a Select consumes it (so that a
    select with the constant on the true side can use the negated mode instead)."""

    mode: asc.CmpMode
    lhs: Tile
    rhs: Tile | Scalar


Value = Scalar | Tile | Mask


class TranslationError(UnsupportedByBackendError):
    """A level-2 body the Ascend C backend cannot translate."""


@dataclass
class TileContext:
    """Where the translation writes: Init (before the tile loop) and the Compute stage."""

    init: Builder
    compute: Builder
    count: SSAValue  # elements of this tile
    where: str  # for messages: the function being converted

    def __post_init__(self) -> None:
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

    def as_tile(self, value: Value) -> Tile:
        """A plain tile: materialized, or a scalar duplicated over this tile."""
        if isinstance(value, Tile):
            return self.materialize(value)
        if isinstance(value, Scalar):
            local = self.temp(value.value.type)
            self.compute.insert(asc.DuplicateOp(local, value.value, self.count))
            return Tile(local)
        return self.as_tile(
            self.select_values(value, Scalar(self.constant(1.0)), Scalar(self.constant(0.0)))
        )

    def select_values(self, cond: Value, a: Value, b: Value) -> Value:
        return _select(self, cond, a, b)


# --------------------------------------------------------------------------- op rules

Rule = Callable[[TileContext, Operation, list[Value]], Value]
RULES: dict[type[Operation], Rule] = {}


def rule(*kinds: type[Operation]) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for kind in kinds:
            RULES[kind] = fn
        return fn

    return register


def _scalar_clone(ctx: TileContext, op: Operation, operands: list[Value]) -> Scalar:
    """The op itself, on Init-time scalars."""
    values = [v.value for v in operands if isinstance(v, Scalar)]
    new = op.clone()
    for i, v in enumerate(values):
        new.operands[i] = v
    return Scalar(ctx.scalar_op(new))


def _all_scalar(operands: list[Value]) -> bool:
    return all(isinstance(v, Scalar) for v in operands)


@rule(arith.ConstantOp)
def _constant(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    return Scalar(ctx.scalar_op(op.clone()))


@rule(arith.ExtFOp)
def _extf(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    (x,) = operands
    if isinstance(x, Scalar):
        return _scalar_clone(ctx, op, operands)
    src = ctx.materialize(_tile(x, op, ctx))
    dst = ctx.temp(op.results[0].type)
    ctx.compute.insert(asc.CastOp(dst, src.local, asc.RoundMode.CAST_NONE, ctx.count))
    return Tile(dst)


@rule(arith.TruncFOp)
def _truncf(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    (x,) = operands
    if isinstance(x, Scalar):
        return _scalar_clone(ctx, op, operands)
    src = ctx.materialize(_tile(x, op, ctx))
    dst = ctx.temp(op.results[0].type)
    ctx.compute.insert(asc.CastOp(dst, src.local, asc.RoundMode.CAST_RINT, ctx.count))
    return Tile(dst)


def _scalar_mul(ctx: TileContext, a: SSAValue | None, b: SSAValue) -> SSAValue:
    return b if a is None else ctx.scalar_op(arith.MulfOp(a, b))


@rule(arith.MulfOp)
def _mulf(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    a, b = operands
    if _all_scalar(operands):
        return _scalar_clone(ctx, op, operands)
    if isinstance(a, Scalar):
        a, b = b, a
    if isinstance(b, Scalar):  # tile * scalar: fold into the pending factor and offset
        t = _tile(a, op, ctx)
        offset = None if t.offset is None else ctx.scalar_op(arith.MulfOp(t.offset, b.value))
        return Tile(t.local, _scalar_mul(ctx, t.factor, b.value), offset)
    ta, tb = _tile(a, op, ctx), _tile(b, op, ctx)
    if ta.offset is not None:
        ta = ctx.materialize(ta)
    if tb.offset is not None:
        tb = ctx.materialize(tb)
    dst = ctx.temp(ta.element_type)
    ctx.compute.insert(asc.MulOp(dst, ta.local, tb.local, ctx.count))
    factor = tb.factor if ta.factor is None else _scalar_mul(ctx, tb.factor, ta.factor)
    return Tile(dst, factor)


@rule(arith.NegfOp)
def _negf(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    (x,) = operands
    if isinstance(x, Scalar):
        return _scalar_clone(ctx, op, operands)
    t = _tile(x, op, ctx)
    factor = (
        ctx.constant(-1.0, t.element_type)
        if t.factor is None
        else ctx.scalar_op(arith.NegfOp(t.factor))
    )
    offset = None if t.offset is None else ctx.scalar_op(arith.NegfOp(t.offset))
    return Tile(t.local, factor, offset)


def _add_scalar(ctx: TileContext, t: Tile, s: SSAValue) -> Tile:
    """t + s: a new pending offset (an existing offset is applied first: same roundings)."""
    if t.offset is not None:
        t = ctx.materialize(t)
    return Tile(t.local, t.factor, s)


@rule(arith.AddfOp)
def _addf(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    a, b = operands
    if _all_scalar(operands):
        return _scalar_clone(ctx, op, operands)
    if isinstance(a, Scalar):
        a, b = b, a
    if isinstance(b, Scalar):
        return _add_scalar(ctx, _tile(a, op, ctx), b.value)
    return _binary(ctx, asc.AddOp, _tile(a, op, ctx), _tile(b, op, ctx))


@rule(arith.SubfOp)
def _subf(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    a, b = operands
    if _all_scalar(operands):
        return _scalar_clone(ctx, op, operands)
    if isinstance(b, Scalar):  # a - s == a + (-s) exactly
        return _add_scalar(ctx, _tile(a, op, ctx), ctx.scalar_op(arith.NegfOp(b.value)))
    if isinstance(a, Scalar):  # s - b == (-b) + s exactly
        negated = _negf(ctx, arith.NegfOp(op.operands[1]), [b])
        assert isinstance(negated, Tile)
        return _add_scalar(ctx, negated, a.value)
    return _binary(ctx, asc.SubOp, _tile(a, op, ctx), _tile(b, op, ctx))


def _is_power_of_two(value: SSAValue) -> float | None:
    """1/c when `value` is a constant power of two (then x/c == x*(1/c) exactly)."""
    owner = value.owner
    if not isinstance(owner, arith.ConstantOp) or not isinstance(owner.value, FloatAttr):
        return None
    c = float(owner.value.value.data)
    if c == 0 or c != c or abs(c) == float("inf"):
        return None
    mantissa, _ = pymath.frexp(abs(c))
    return 1.0 / c if mantissa == 0.5 else None


@rule(arith.DivfOp)
def _divf(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    a, b = operands
    if _all_scalar(operands):
        return _scalar_clone(ctx, op, operands)
    if isinstance(b, Scalar):
        t = ctx.materialize(_tile(a, op, ctx))
        inverse = _is_power_of_two(b.value)
        if inverse == 1.0:  # x / 1 == x exactly
            return t
        if inverse is not None:
            return Tile(t.local, ctx.constant(inverse, t.element_type))
        return _binary(ctx, asc.DivOp, t, Tile(ctx.splat(b.value)))
    if isinstance(a, Scalar):
        return _binary(ctx, asc.DivOp, Tile(ctx.splat(a.value)), _tile(b, op, ctx))
    return _binary(ctx, asc.DivOp, _tile(a, op, ctx), _tile(b, op, ctx))


def _unary(kind: type[asc.UnaryVectorOp]) -> Rule:
    def translate(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
        (x,) = operands
        if isinstance(x, Scalar):  # once, in Init, on one repeat of scratch
            scratch = ctx.init.insert(asc.TempOp(x.value.type, SCRATCH_ELEMENTS)).result
            n = ctx.init.insert(arith.ConstantOp.from_int_and_width(SCRATCH_ELEMENTS, IndexType()))
            ctx.init.insert(asc.DuplicateOp(scratch, x.value, n.result))
            ctx.init.insert(kind(scratch, scratch, n.result))
            return Scalar(ctx.init.insert(asc.ReadLocalOp(scratch)).result)
        src = ctx.materialize(_tile(x, op, ctx))
        dst = ctx.temp(src.element_type)
        ctx.compute.insert(kind(dst, src.local, ctx.count))
        return Tile(dst)

    return translate


RULES[math.ExpOp] = _unary(asc.ExpOp)
RULES[math.LogOp] = _unary(asc.LnOp)


@rule(arith.CmpfOp)
def _cmpf(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    assert isinstance(op, arith.CmpfOp)
    predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
    if _all_scalar(operands):
        return _scalar_clone(ctx, op, operands)
    mode = PREDICATES.get(predicate)
    if mode is None:
        raise TranslationError(
            ctx.where,
            "arith.cmpf",
            f"predicate {predicate} has no CMPMODE (supported: " + ", ".join(PREDICATES) + ")",
        )
    a, b = operands
    if isinstance(a, Scalar):
        a, b, mode = b, a, SWAPPED[mode]
    lhs = ctx.materialize(_tile(a, op, ctx))
    rhs = b if isinstance(b, Scalar) else ctx.materialize(_tile(b, op, ctx))
    return Mask(mode, lhs, rhs)


@rule(arith.SelectOp)
def _select_rule(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    cond, a, b = operands
    if _all_scalar(operands):
        return _scalar_clone(ctx, op, operands)
    return _select(ctx, cond, a, b)


def _select(ctx: TileContext, cond: Value, a: Value, b: Value) -> Value:
    if isinstance(cond, Scalar):  # a scalar condition: compare its 0/1 splat once per tile
        flag = ctx.scalar_op(arith.SelectOp(cond.value, ctx.constant(1.0), ctx.constant(0.0)))
        cond = Mask(asc.CmpMode.NE, Tile(ctx.splat(flag)), Scalar(ctx.constant(0.0)))
    if not isinstance(cond, Mask):
        raise TranslationError(ctx.where, "arith.select", "condition must come from arith.cmpf")
    if isinstance(a, Scalar) and not isinstance(b, Scalar) and cond.mode in NEGATED:
        cond = Mask(NEGATED[cond.mode], cond.lhs, cond.rhs)
        a, b = b, a
    mask = ctx.mask_local(cond)
    ta = Tile(ctx.splat(a.value)) if isinstance(a, Scalar) else ctx.materialize(_as_tile(a))
    element = ta.element_type
    n = ctx.count_for_compare(element)
    dst = ctx.temp(element)
    if isinstance(b, Scalar):
        ctx.compute.insert(asc.SelectsOp(dst, mask, ta.local, b.value, n))
    else:
        tb = ctx.materialize(_as_tile(b))
        ctx.compute.insert(asc.SelectOp(dst, mask, ta.local, tb.local, n))
    return Tile(dst)


def _as_tile(value: Value) -> Tile:
    if not isinstance(value, Tile):
        raise TranslationError("level-2 body", "arith.select", "operands must be values")
    return value


def _binary(ctx: TileContext, kind: type[asc.BinaryVectorOp], a: Tile, b: Tile) -> Tile:
    ta, tb = ctx.materialize(a), ctx.materialize(b)
    dst = ctx.temp(ta.element_type)
    ctx.compute.insert(kind(dst, ta.local, tb.local, ctx.count))
    return Tile(dst)


def _tile(value: Value, op: Operation, ctx: TileContext) -> Tile:
    if isinstance(value, Tile):
        return value
    raise TranslationError(ctx.where, op.name, "a mask cannot be used as a number here")


def translate_op(ctx: TileContext, op: Operation, operands: list[Value]) -> Value:
    """Apply the rule of `op` (TranslationError for an op outside docs/level2.md)."""
    translate = RULES.get(type(op))
    if translate is None:
        raise TranslationError(
            ctx.where, op.name, "is not a level-2 body op the Ascend C backend translates"
        )
    return translate(ctx, op, operands)
