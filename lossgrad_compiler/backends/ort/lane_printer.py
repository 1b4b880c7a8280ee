"""A loop nest's innermost loop on lanes::kLanes elements at a time (cxx/lanes.h: 16 with
AVX-512, 8 with AVX2), the row's last partial step masked, where every value the loop
computes has a lane form; the scalar loop of nest_printer.py remains for other builds (and for
$LOSSGRAD_ORT_NEST_LANES=0).
Each lane op is the scalar op on each lane (lanes.h), so the bits are those of the scalar
loop: only the speed changes.

g++ vectorises the scalar loop by itself, but it calls exp's and log's vector variants once
per step through the vector ABI and spills around each call, it compares the 64-bit loop
position with a target in 64-bit lanes that it splits into scalar compares, and a row
shorter than a vector runs scalar. In lanes CrossEntropyLossGrad at 4096 x 32000 went from
72 to 42 ms in float32, and at 256 x 10 from 0.033 to 0.013 ms in bfloat16 (one thread;
docs/benchmarks.md, "The classification operators").

The lane form of a value is one of: the row's value (computed above the loop, splatted where
a lane op reads it), kLanes floats, kLanes storage words of a half type, a mask of kLanes
flags, or the loop position (never a vector: lanes.h compares it with a row value in 32-bit
lanes). A loop whose ops, loads or store have no lane form (a double, an integer lane, a
gather by the position, an accumulation, a non-contiguous operand) stays scalar: `lane_loop`
returns None."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float32Type, IndexType, IntegerType
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Attribute, Operation, SSAValue

from lossgrad_compiler import level2
from lossgrad_compiler.backends.cxx import cxx_comparison
from lossgrad_compiler.backends.ort.cxx_text import cxx_type

HALF_TYPES = ("float16", "bfloat16")
_RELATIONS = {"eq": "kEq", "ne": "kNe", "lt": "kLt", "le": "kLe", "gt": "kGt", "ge": "kGe"}
_SIGNED = {"eq": "eq", "ne": "ne", "slt": "lt", "sle": "le", "sgt": "gt", "sge": "ge"}
_SWAP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
_FLOAT_OPERATORS: dict[type[Operation], str] = {
    arith.AddfOp: "+",
    arith.SubfOp: "-",
    arith.MulfOp: "*",
    arith.DivfOp: "/",
}
_FLAG_OPERATORS: dict[type[Operation], str] = {
    arith.AndIOp: "&",
    arith.OrIOp: "|",
    arith.XOrIOp: "^",
}


class Form(Enum):
    ROW = "row"  # a scalar computed above the loop
    FLOATS = "floats"
    HALVES = "halves"
    MASK = "mask"
    POSITION = "position"  # the loop position, an int64 expression of lane 0's


@dataclass(frozen=True)
class Lane:
    form: Form
    text: str
    element: str = ""  # the half type of HALVES


class _NoLanes(Exception):
    """This loop has no lane form; it runs scalar."""


@dataclass(frozen=True)
class LaneLoad:
    """An operand the innermost loop reads, contiguous along it: `pointer[offset]`."""

    value: SSAValue  # its block argument
    pointer: str
    element: str
    offset: str


@dataclass(frozen=True)
class LaneStore:
    pointer: str
    element: str
    offset: str
    value: SSAValue


def lane_loop(
    loop: int,
    ops: Sequence[Operation],
    loads: Sequence[LaneLoad],
    store: LaneStore,
    row: Callable[[SSAValue], str | None],
) -> list[str] | None:
    """The lines of the lane loop over loop `loop` (`i<loop>` advancing by kLanes while a
    whole step fits, then one masked step; the stream flag `stream` chooses the whole
    steps' stores), or None. `ops` are the
    body ops computed at this loop's depth, in order; `row(v)` is a value's C++ name where
    the row holds it fixed (None where it varies along the loop)."""
    try:
        return _LanePrinter(loop, row).print(ops, loads, store)
    except _NoLanes:
        return None


class _LanePrinter:
    def __init__(self, loop: int, row: Callable[[SSAValue], str | None]) -> None:
        self.loop = loop
        self.row = row
        self.values: dict[SSAValue, Lane] = {}
        self.lines: list[str] = []

    def print(
        self, ops: Sequence[Operation], loads: Sequence[LaneLoad], store: LaneStore
    ) -> list[str]:
        for load in loads:
            self._load(load)
        for op in ops:
            self.values[op.results[0]] = self._op(op)
        stored = self._stored(store)
        i, n = f"i{self.loop}", f"n{self.loop}"
        body = [f"    {line}" for line in self.lines]
        full = "std::false_type{}, 0"
        return [
            "if (lanes::enabled()) {",
            "  const auto step = [&](auto streamed, auto masked, [[maybe_unused]] lanes::Tail m) {",
            "    constexpr bool kMasked = decltype(masked)::value;",
            *body,
            f"    lanes::store<decltype(streamed)::value, kMasked>({stored}, m);",
            "  };",
            "  if (stream)",
            f"    for (; {i} + lanes::kLanes <= {n}; {i} += lanes::kLanes) "
            f"step(std::true_type{{}}, {full});",
            "  else",
            f"    for (; {i} + lanes::kLanes <= {n}; {i} += lanes::kLanes) "
            f"step(std::false_type{{}}, {full});",
            f"  if ({i} < {n}) {{",
            f"    step(std::false_type{{}}, std::true_type{{}}, lanes::first({n} - {i}));",
            f"    {i} = {n};",
            "  }",
            "}",
        ]

    # ------------------------------------------------------------------ operands

    def _load(self, load: LaneLoad) -> None:
        if load.element == "float":
            form = Form.FLOATS
        elif load.element in HALF_TYPES:
            form = Form.HALVES
        else:
            raise _NoLanes
        name = f"l{len(self.lines)}"
        self.lines.append(
            f"[[maybe_unused]] const auto {name} = "
            f"lanes::load<kMasked>({load.pointer} + ({load.offset}), m);"
        )
        self.values[load.value] = Lane(form, name, load.element)

    def _get(self, value: SSAValue) -> Lane:
        found = self.values.get(value)
        if found is not None:
            return found
        text = self.row(value)
        if text is None:
            raise _NoLanes
        return Lane(Form.ROW, text)

    def _floats(self, value: SSAValue) -> str:
        """A float operand as 16 floats (a row float splatted)."""
        lane = self._get(value)
        if lane.form is Form.FLOATS:
            return lane.text
        if lane.form is Form.ROW and value.type == Float32Type():
            return f"lanes::splat({lane.text})"
        raise _NoLanes

    def _mask(self, value: SSAValue) -> str:
        lane = self._get(value)
        if lane.form is Form.MASK:
            return lane.text
        if lane.form is Form.ROW and _is_flag(value.type):
            return f"lanes::splat({lane.text})"
        raise _NoLanes

    def _stored(self, store: LaneStore) -> str:
        pointer = f"{store.pointer} + ({store.offset})"
        if store.element == "float":
            return f"{pointer}, {self._floats(store.value)}"
        lane = self._get(store.value)
        if lane.form is Form.HALVES and lane.element == store.element:
            return f"{pointer}, {lane.text}"
        raise _NoLanes

    # ------------------------------------------------------------------ ops

    def _op(self, op: Operation) -> Lane:
        result = op.results[0]
        if isinstance(op, IndexOp):
            if op.dim.value.data != self.loop:
                raise _NoLanes
            return Lane(Form.POSITION, f"static_cast<int64_t>(i{self.loop})")
        if isinstance(op, arith.IndexCastOp):
            source = self._get(op.input)
            if source.form is not Form.POSITION or not _is_wide_integer(result.type):
                raise _NoLanes
            return source  # a position below 2^63 keeps its value
        if isinstance(op, arith.CmpiOp):
            return self._compare_position(op)
        if isinstance(op, arith.CmpfOp):
            return self._define(Form.MASK, _lane_comparison(op, *map(self._floats, op.operands)))
        if isinstance(op, arith.SelectOp):
            return self._select(op)
        if type(op) in _FLAG_OPERATORS and _is_flag(result.type):
            a, b = (self._mask(v) for v in op.operands)
            return self._define(Form.MASK, f"{a} {_FLAG_OPERATORS[type(op)]} {b}")
        if result.type != Float32Type() and not isinstance(op, arith.TruncFOp):
            raise _NoLanes
        if type(op) in _FLOAT_OPERATORS:
            a, b = (self._floats(v) for v in op.operands)
            return self._define(Form.FLOATS, f"{a} {_FLOAT_OPERATORS[type(op)]} {b}")
        if isinstance(op, arith.NegfOp):
            return self._define(Form.FLOATS, f"-{self._floats(op.operand)}")
        if isinstance(op, math.ExpOp | math.LogOp):
            name = "exp" if isinstance(op, math.ExpOp) else "log"
            return self._define(Form.FLOATS, f"lossgrad::{name}({self._floats(op.operand)})")
        if isinstance(op, arith.ExtFOp):
            source = self._get(op.input)
            if source.form is not Form.HALVES:
                raise _NoLanes
            return self._define(Form.FLOATS, f"lanes::widen({source.text})")
        if isinstance(op, arith.TruncFOp):
            element = cxx_type(result.type)
            if element not in HALF_TYPES:
                raise _NoLanes
            text = f"lanes::narrow<{element}>({self._floats(op.input)})"
            return self._define(Form.HALVES, text, element)
        raise _NoLanes

    def _define(self, form: Form, expression: str, element: str = "") -> Lane:
        name = f"l{len(self.lines)}"
        self.lines.append(f"const auto {name} = {expression};")
        return Lane(form, name, element)

    def _compare_position(self, op: arith.CmpiOp) -> Lane:
        """The position against a row value, in lanes.h's clamped 32-bit form."""
        name = _SIGNED.get(arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data])
        a, b = self._get(op.lhs), self._get(op.rhs)
        if name is None:
            raise _NoLanes
        if a.form is Form.ROW and b.form is Form.POSITION:
            a, b, name = b, a, _SWAP[name]
        if a.form is not Form.POSITION or b.form is not Form.ROW:
            raise _NoLanes
        relation = _RELATIONS[name]
        text = f"lanes::position_compare<lanes::Relation::{relation}>({a.text}, {b.text})"
        return self._define(Form.MASK, text)

    def _select(self, op: arith.SelectOp) -> Lane:
        condition = self._get(op.cond)
        if op.result.type == Float32Type():
            operands = (self._floats(op.lhs), self._floats(op.rhs))
            form = Form.FLOATS
        elif _is_flag(op.result.type):
            operands = (self._mask(op.lhs), self._mask(op.rhs))
            form = Form.MASK
        else:
            raise _NoLanes
        if condition.form is Form.ROW:
            test = condition.text  # one choice for the whole row
        elif condition.form is Form.MASK:
            test = condition.text
        else:
            raise _NoLanes
        return self._define(form, f"{test} ? {operands[0]} : {operands[1]}")


def _lane_comparison(op: arith.CmpfOp, a: str, b: str) -> str:
    """cmpf on lanes: a mask, NaN as the scalar comparison treats it."""
    predicate = level2.predicate_of(op)
    if predicate.relation is None:
        raise _NoLanes
    return cxx_comparison(predicate, a, b, lanes=True)


def _is_flag(t: Attribute) -> bool:
    return isinstance(t, IntegerType) and t.width.data == 1


def _is_wide_integer(t: Attribute) -> bool:
    return isinstance(t, IndexType) or (isinstance(t, IntegerType) and t.width.data == 64)
