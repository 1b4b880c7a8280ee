"""Translation of level-2 scalar ops (arith, math) into C++ statements for the ORT kernels.

`CxxScalarOps` is the backend's `level2.ScalarOpDispatch`: one rule per op, each giving a C++
expression over the operands' names. One `ScalarPrinter` turns a straight-line sequence of
ops into `const T vN = expr;` lines. Values defined elsewhere (block arguments, kernel
parameters, captured prologue values) are bound to C++ expressions before printing. Only the
ops of docs/level2.md are translated; any other op is a Level2ContractError, never a silent
skip."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Operation, SSAValue

from lossgrad_compiler import level2
from lossgrad_compiler.backends.cxx import (
    CxxFloatArithmetic,
    cxx_comparison,
    cxx_integer_comparison,
)
from lossgrad_compiler.backends.ort.cxx_text import cxx_float_literal, cxx_type


class CxxScalarOps(CxxFloatArithmetic):
    """The level-2 scalar and count ops as C++ expressions of the kernel library."""

    BACKEND = "ORT C++"
    REQUIRED = level2.SCALAR_OPS | level2.COUNT_OPS | level2.CLASS_OPS | level2.GATHER_OPS

    @level2.rule(math.ExpOp)
    def exp(self, op: Operation, a: Sequence[str]) -> str:
        return f"lossgrad::exp({a[0]})"  # cxx/vmath.h: vectorisable, unlike std::exp

    @level2.rule(math.LogOp)
    def log(self, op: Operation, a: Sequence[str]) -> str:
        return f"lossgrad::log({a[0]})"

    @level2.rule(arith.CmpfOp)
    def cmpf(self, op: arith.CmpfOp, a: Sequence[str]) -> str:
        return cxx_comparison(level2.predicate_of(op), a[0], a[1])

    @level2.rule(arith.SelectOp)
    def select(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} ? {a[1]} : {a[2]}"

    @level2.rule(arith.ExtFOp, arith.TruncFOp)
    def convert(self, op: Operation, a: Sequence[str]) -> str:
        return f"convert<{cxx_type(op.results[0].type)}>({a[0]})"

    @level2.rule(arith.MuliOp)
    def muli(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} * {a[1]}"

    @level2.rule(arith.IndexCastOp)
    def index_cast(self, op: Operation, a: Sequence[str]) -> str:
        return f"static_cast<{cxx_type(op.results[0].type)}>({a[0]})"

    @level2.rule(IndexOp)
    def index(self, op: IndexOp, a: Sequence[str]) -> str:
        # nest_printer.py names loop k's position i<k> (an int64_t, never negative)
        return f"static_cast<uint64_t>(i{op.dim.value.data})"

    @level2.rule(arith.CmpiOp)
    def cmpi(self, op: arith.CmpiOp, a: Sequence[str]) -> str:
        return cxx_integer_comparison(op, a[0], a[1])

    @level2.rule(arith.AndIOp)
    def andi(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} && {a[1]}" if _is_flag(op) else f"{a[0]} & {a[1]}"

    @level2.rule(arith.XOrIOp)
    def xori(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} != {a[1]}" if _is_flag(op) else f"{a[0]} ^ {a[1]}"

    @level2.rule(arith.ExtSIOp, arith.ExtUIOp)
    def extend(self, op: Operation, a: Sequence[str]) -> str:
        # a bool converts to 0 or 1 (extui); a signed index keeps its value (extsi)
        return f"static_cast<{cxx_type(op.results[0].type)}>({a[0]})"

    @level2.rule(arith.AddiOp)
    def addi(self, op: Operation, a: Sequence[str]) -> str:
        # a count, far from overflow (at most the elements of one tensor)
        return f"{a[0]} + {a[1]}"

    @level2.rule(arith.UIToFPOp)
    def uitofp(self, op: Operation, a: Sequence[str]) -> str:
        return f"static_cast<{cxx_type(op.results[0].type)}>(static_cast<uint64_t>({a[0]}))"

    @level2.rule(tensor.ExtractOp)
    def extract(self, op: Operation, a: Sequence[str]) -> str:
        # a gather: the tensor is bound to a pointer (nest_printer.py), the index is safe
        return f"{a[0]}[{a[1]}]"

    @level2.rule(arith.ConstantOp)
    def constant(self, op: arith.ConstantOp, a: Sequence[str]) -> str:
        out_type = cxx_type(op.result.type)
        value = op.value
        if isinstance(value, FloatAttr):
            return cxx_float_literal(float(value.value.data), out_type)
        if isinstance(value, IntegerAttr):
            return f"static_cast<{out_type}>({int(value.value.data)})"
        raise level2.Level2ContractError(op, f"only scalar constants are level 2, got {value}")


def _is_flag(op: Operation) -> bool:
    return cxx_type(op.results[0].type) == "bool"


class KernelScalarOps(CxxScalarOps):
    """The ops of a kernel body, where some divisors are run-time parameters with an exact
    reciprocal beside them (`reciprocals`: divisor expression -> reciprocal expression, the
    reciprocal 0 where it is not exact). The body is a template on kExact, true only where
    every reciprocal of the call is exact (Params::exact()): the loops choose once per call,
    so no element computes both the product and the quotient."""

    def __init__(self, reciprocals: dict[str, str]) -> None:
        super().__init__()
        self.reciprocals = reciprocals

    @level2.rule(arith.DivfOp)
    def divf(self, op: Operation, a: Sequence[str]) -> str:
        reciprocal = self.reciprocals.get(a[1])
        if reciprocal is None:
            return super().divf(op, a)
        return f"kExact ? {a[0]} * {reciprocal} : {a[0]} / {a[1]}"


class ScalarPrinter:
    """Prints scalar ops as C++ statements, naming each result `v<N>`: typed, or `auto` where
    the statements must compile for a float and for 16 lanes of floats alike (`any_lanes`)."""

    def __init__(self, ops: CxxScalarOps | None = None, any_lanes: bool = False) -> None:
        self.names: dict[SSAValue, str] = {}
        self.lines: list[str] = []
        self._ops = ops or CxxScalarOps()
        self._counter = 0
        self._any_lanes = any_lanes

    def bind(self, value: SSAValue, expression: str) -> None:
        self.names[value] = expression

    def name(self, value: SSAValue, user: Operation | None = None) -> str:
        try:
            return self.names[value]
        except KeyError:
            raise level2.Level2ContractError(
                user, "uses a value that is not available here"
            ) from None

    def print_ops(self, ops: Iterable[Operation]) -> None:
        for op in ops:
            self.print_op(op)

    def print_op(self, op: Operation) -> None:
        if len(op.results) != 1:
            raise level2.Level2ContractError(op, "is not a scalar op of level 2")
        result = op.results[0]
        expression = self._ops.translate(op, [self.name(v, op) for v in op.operands])
        name = f"v{self._counter}"
        self._counter += 1
        declared = "auto" if self._any_lanes else cxx_type(result.type)
        self.lines.append(f"const {declared} {name} = {expression};")
        self.names[result] = name
