"""The value checks of level 2 (docs/level2.md, "Beyond elementwise") on the IREE path.

A function with `lossgrad.checks` returns, after the gradient, one 0-d i64 count of failing
elements per check. IREE cannot raise an error whose text holds a run-time value, so the
count comes back to the host: every exported function that has checks carries them in its
`iree.reflection` (`CHECKS_KEY`, JSON: the operator, and per check its rule, its result and
where each slot of the rule's message comes from: a constant, or an input's dimension), and
`runtime.iree` raises the rule's error (messages, e.g. TARGET_RANGE, aclnn 161002) when a
count is not 0 and hands back the gradient alone.

Slots are filled per rule (`SLOT_SOURCES`), never per operator."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import DictionaryAttr, StringAttr
from xdsl.dialects.func import FuncOp

from lossgrad_compiler import messages
from lossgrad_compiler.level2 import Level2Function

CHECKS_KEY = "lossgrad.checks"
"""The `iree.reflection` entry of an exported function whose results hold check counts."""
REFLECTION_ATTR = "iree.reflection"

Source = dict[str, int]
"""Where a slot's value comes from: {"value": v}, or {"input": position, "axis": k}."""


def _dimension(function: Level2Function, name: str, axis: int) -> Source:
    operand = function.operand(name)
    assert operand is not None, f"{function.name} has no {name}"
    static = operand.generic.shape[axis]
    return {"value": static} if static is not None else {"input": operand.position, "axis": axis}


def _target_range(function: Level2Function) -> dict[str, Source]:
    """classes: self's size on the class dimension; ignore_index: the attribute."""
    self_ = function.operand("self")
    assert self_ is not None
    axis = function.op.class_dim(self_.generic.rank)
    return {
        "classes": _dimension(function, "self", axis),
        "ignore_index": {"value": int(function.attributes["ignore_index"])},
    }


SLOT_SOURCES: dict[str, Callable[[Level2Function], dict[str, Source]]] = {
    "target_range": _target_range,
}
"""Per check rule (a messages rule key): the sources of its message's slots but `count`."""

RULES: dict[str, messages.Rule] = {r.key: r for r in messages.RULES}


@dataclass(frozen=True)
class CheckEntry:
    """One check of an exported function: its rule, its result and its slots' sources."""

    rule: str
    result: int
    slots: dict[str, Source]


@dataclass(frozen=True)
class FunctionChecks:
    """The checks of one exported function (`op`: the operator its messages name)."""

    op: str
    checks: tuple[CheckEntry, ...]

    def to_json(self) -> str:
        return json.dumps({"op": self.op, "checks": [vars(c) for c in self.checks]}, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> FunctionChecks:
        data = json.loads(text)
        return FunctionChecks(data["op"], tuple(CheckEntry(**c) for c in data["checks"]))

    @property
    def results(self) -> int:
        """How many results the function returns: the gradient and one count per check."""
        return 1 + len(self.checks)

    def raise_failed(self, arrays: Sequence[np.ndarray], counts: Sequence[Any]) -> None:
        """The rule's error for the first check whose count (results 1, 2, ...) is not 0."""
        for check in self.checks:
            count = int(np.asarray(counts[check.result - 1]))
            if count == 0:
                continue
            values: dict[str, int] = {"count": count}
            for slot, source in check.slots.items():
                if "value" in source:
                    values[slot] = source["value"]
                else:
                    values[slot] = int(np.shape(arrays[source["input"]])[source["axis"]])
            raise RULES[check.rule](self.op, **values)


def function_checks(function: Level2Function) -> FunctionChecks | None:
    """The checks of a level-2 function (None when it has none)."""
    if not function.checks:
        return None
    entries = []
    for check in function.checks:
        if check.rule not in SLOT_SOURCES or check.rule not in RULES:
            raise ValueError(f"{function.name}: no IREE rule for the check '{check.rule}'")
        slots = SLOT_SOURCES[check.rule](function)
        entries.append(CheckEntry(check.rule, check.result_index, slots))
    return FunctionChecks(function.op.name, tuple(entries))


def reflect(function: FuncOp, checks: FunctionChecks | None) -> None:
    """Record the checks in an exported function's `iree.reflection`."""
    if checks is None:
        return
    entries: dict[str, Any] = {}
    old = function.attributes.get(REFLECTION_ATTR)
    if isinstance(old, DictionaryAttr):
        entries.update(old.data)
    entries[CHECKS_KEY] = StringAttr(checks.to_json())
    function.attributes[REFLECTION_ATTR] = DictionaryAttr(entries)
