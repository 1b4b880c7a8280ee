"""C++ that both C++ backends (the ORT kernels and Ascend C) print: the sanitisers every
printed name or string goes through (generated source never contains raw text from outside
the compiler), and the level-2 scalar float arithmetic and the cmpf and cmpi comparisons, as
expressions over already-named values."""

from __future__ import annotations

import re
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


def cxx_comparison(predicate: level2.Predicate, a: str, b: str, *, lanes: bool = False) -> str:
    """`a predicate b` in C++, NaN included. C++'s <, >, <=, >=, == are the ordered
    predicates (false on NaN); `one` is `<` or `>`; an unordered predicate is the negation
    of its ordered complement. With `lanes`, the same over GNU vector masks (the ORT lane
    form, cxx/lanes.h): `|` and `~` instead of `||` and `!`."""
    if predicate.relation is None:
        raise level2.Level2ContractError(
            "arith.cmpf", f"predicate '{predicate.name}' is not level 2"
        )
    either, negation = ("|", "~") if lanes else ("||", "!")
    if predicate.ordered:
        return _ordered(predicate, a, b, either, alone=True)
    return f"{negation}({_ordered(predicate.negated, a, b, either, alone=False)})"


_CXX_INTEGER_RELATION = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}


def cxx_integer_comparison(op: arith.CmpiOp, a: str, b: str) -> str:
    """`a predicate b` in C++ for a level-2 `arith.cmpi` of signed (int64_t) operands; the
    unsigned predicates are not level 2 (level2.CONTRACT_INTEGER_PREDICATES)."""
    name = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    if name not in level2.CONTRACT_INTEGER_PREDICATES:
        raise level2.Level2ContractError(op, f"predicate '{name}' is not level 2")
    return f"{a} {_CXX_INTEGER_RELATION[name]} {b}"


def _ordered(predicate: level2.Predicate, a: str, b: str, either: str, alone: bool) -> str:
    if predicate.relation == "ne":
        text = f"({a} < {b}) {either} ({a} > {b})"
        return f"({text})" if alone else text
    return f"{a} {_CXX_RELATION[str(predicate.relation)]} {b}"


_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


def cxx_identifier(text: str) -> str:
    """`text` reduced to a C++ identifier: anything but [A-Za-z0-9_] becomes `_`, a leading
    digit gets a prefix, and reserved double underscores are broken up."""
    name = _IDENTIFIER.sub("_", text) or "_"
    if name[0].isdigit():
        name = "n_" + name
    while "__" in name:
        name = name.replace("__", "_u")
    return name


def cxx_string_literal(text: str) -> str:
    """A C++ narrow string literal whose bytes are the UTF-8 of `text`: only alphanumerics,
    spaces and a few punctuation characters appear as themselves, every other byte is an
    octal escape (so no quote, backslash, newline, trigraph or `*/` survives)."""
    safe = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,:;=()[]<>+-'")
    out = []
    for byte in text.encode("utf-8"):
        out.append(chr(byte) if byte in safe else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'
