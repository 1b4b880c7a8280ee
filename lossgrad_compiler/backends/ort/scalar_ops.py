"""Translation of level-2 scalar ops (arith, math) into C++ statements.

One `ScalarPrinter` turns a straight-line sequence of ops into `const T vN = expr;` lines.
Values defined elsewhere (block arguments, kernel parameters, captured prologue values) are
bound to C++ expressions before printing. Only the ops of docs/level2.md are translated; any
other op is an OrtBackendError, never a silent skip."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Operation, SSAValue

from lossgrad_compiler.backends.ort.cxx_text import cxx_float_literal, cxx_type
from lossgrad_compiler.backends.ort.errors import OrtBackendError

# arith.cmpf predicates (MLIR's CmpFPredicate order) as C++: ordered ones are plain
# comparisons (false on NaN); unordered ones are the negated opposite ordered comparison.
_CMPF: dict[str, str] = {
    "false": "false",
    "oeq": "({a} == {b})",
    "ogt": "({a} > {b})",
    "oge": "({a} >= {b})",
    "olt": "({a} < {b})",
    "ole": "({a} <= {b})",
    "one": "({a} < {b} || {a} > {b})",
    "ord": "({a} == {a} && {b} == {b})",
    "ueq": "!({a} < {b} || {a} > {b})",
    "ugt": "!({a} <= {b})",
    "uge": "!({a} < {b})",
    "ult": "!({a} >= {b})",
    "ule": "!({a} > {b})",
    "une": "({a} != {b})",
    "uno": "({a} != {a} || {b} != {b})",
    "true": "true",
}
_CMPF_ORDER = tuple(_CMPF)

_BINARY: dict[type[Operation], str] = {
    arith.AddfOp: "+",
    arith.SubfOp: "-",
    arith.MulfOp: "*",
    arith.DivfOp: "/",
}

# lossgrad::exp/log (cxx/vmath.h) vectorise; std::exp/log are scalar libm calls.
_UNARY_CALL: dict[type[Operation], str] = {math.ExpOp: "lossgrad::exp", math.LogOp: "lossgrad::log"}

ConstantHook = Callable[[arith.ConstantOp], str | None]
"""Given a float constant, the C++ expression to use instead of its value (a kernel
parameter), or None to print the value."""


class ScalarPrinter:
    """Prints scalar ops as C++ statements, naming each result `v<N>`."""

    def __init__(self, constant_hook: ConstantHook | None = None) -> None:
        self.names: dict[SSAValue, str] = {}
        self.lines: list[str] = []
        self._constant_hook = constant_hook
        self._counter = 0

    def bind(self, value: SSAValue, expression: str) -> None:
        self.names[value] = expression

    def name(self, value: SSAValue) -> str:
        try:
            return self.names[value]
        except KeyError:
            raise OrtBackendError(f"value {value} is used but not defined") from None

    def print_ops(self, ops: Iterable[Operation]) -> None:
        for op in ops:
            self.print_op(op)

    def print_op(self, op: Operation) -> None:
        result = op.results[0]
        expression = self._expression(op)
        name = f"v{self._counter}"
        self._counter += 1
        self.lines.append(f"const {cxx_type(result.type)} {name} = {expression};")
        self.names[result] = name

    def _expression(self, op: Operation) -> str:
        if len(op.results) != 1:
            raise OrtBackendError(f"'{op.name}' is not a scalar op of level-2 IR")
        out_type = cxx_type(op.results[0].type)
        if isinstance(op, arith.ConstantOp):
            return self._constant(op, out_type)
        args = [self.name(v) for v in op.operands]
        if type(op) in _BINARY:
            return f"({args[0]} {_BINARY[type(op)]} {args[1]})"
        if isinstance(op, arith.NegfOp):
            return f"(-{args[0]})"
        if type(op) in _UNARY_CALL:
            return f"{_UNARY_CALL[type(op)]}({args[0]})"
        if isinstance(op, arith.CmpfOp):
            predicate = _CMPF_ORDER[op.predicate.value.data]
            return _CMPF[predicate].format(a=args[0], b=args[1])
        if isinstance(op, arith.SelectOp):
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if isinstance(op, (arith.ExtFOp, arith.TruncFOp)):
            return f"convert<{out_type}>({args[0]})"
        if isinstance(op, arith.MuliOp):
            return f"({args[0]} * {args[1]})"
        if isinstance(op, arith.IndexCastOp):
            return f"static_cast<{out_type}>({args[0]})"
        if isinstance(op, arith.UIToFPOp):
            return f"static_cast<{out_type}>(static_cast<uint64_t>({args[0]}))"
        raise OrtBackendError(f"'{op.name}' is not in the level-2 op list (docs/level2.md)")

    def _constant(self, op: arith.ConstantOp, out_type: str) -> str:
        value = op.value
        if isinstance(value, FloatAttr):
            if self._constant_hook is not None:
                replaced = self._constant_hook(op)
                if replaced is not None:
                    return replaced
            return cxx_float_literal(float(value.value.data), out_type)
        if isinstance(value, IntegerAttr):
            return f"static_cast<{out_type}>({int(value.value.data)})"
        raise OrtBackendError(f"unsupported constant {value}")


def constant_value_in(value: float, numpy_type: type) -> float:
    """`value` rounded to a float type, as MLIR rounds a FloatAttr to its type."""
    with np.errstate(all="ignore"):
        return float(np.asarray(value, np.float64).astype(numpy_type))
