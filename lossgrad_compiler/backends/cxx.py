"""C++ that both C++ backends (the ORT kernels and Ascend C) print from level 2: the scalar
float arithmetic and the cmpf comparisons, as expressions over already-named values."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.ir import Operation

from lossgrad_compiler import level2


class CxxFloatArithmetic(level2.ScalarOpDispatch[str]):
    """Level-2 float arithmetic as C++ expressions over the operands' C++ names (each operand
    is a name or a primary expression, so no parentheses are needed). Subclasses add the ops
    whose C++ depends on where the value lives (constants, conversions, calls)."""

    BACKEND = "C++ scalar"

    @level2.rule(arith.AddfOp)
    def addf(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} + {a[1]}"

    @level2.rule(arith.SubfOp)
    def subf(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} - {a[1]}"

    @level2.rule(arith.MulfOp)
    def mulf(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} * {a[1]}"

    @level2.rule(arith.DivfOp)
    def divf(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} / {a[1]}"

    @level2.rule(arith.NegfOp)
    def negf(self, op: Operation, a: Sequence[str]) -> str:
        return f"-{a[0]}"


_CXX_RELATION = {"eq": "==", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def cxx_comparison(predicate: level2.Predicate, a: str, b: str) -> str:
    """`a predicate b` in C++, NaN included. C++'s <, >, <=, >=, == are the ordered
    predicates (false on NaN); `one` is `<` or `>`; an unordered predicate is the negation
    of its ordered complement."""
    if predicate.relation is None:
        raise level2.Level2ContractError(
            "arith.cmpf", f"predicate '{predicate.name}' is not level 2"
        )
    if predicate.ordered:
        return _ordered(predicate, a, b, alone=True)
    return f"!({_ordered(predicate.negated, a, b, alone=False)})"


def _ordered(predicate: level2.Predicate, a: str, b: str, alone: bool) -> str:
    if predicate.relation == "ne":
        text = f"{a} < {b} || {a} > {b}"
        return f"({text})" if alone else text
    return f"{a} {_CXX_RELATION[str(predicate.relation)]} {b}"
