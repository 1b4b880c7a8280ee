"""The value checks of the ai.lossgrad nodes of a whole model (checks.py for one function).

In a whole-model module a node's check counts are no results of an exported function: the
splice makes each count, and each slot of the check's message that is a run-time dimension,
an extra 0-d i64 result of the model's main function after its ONNX outputs. The model's
interface lists them (`ModelCheck`), and `runtime.iree.session` raises the rule's error
when a count is not 0 and hands back only the ONNX outputs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lossgrad_compiler.backends.iree.checks import RULES


@dataclass(frozen=True)
class ModelCheck:
    """One check of one node: its operator and rule, which extra result is its count, and
    each slot's value (`{"value": v}`) or extra result (`{"output": k}`)."""

    op: str
    rule: str
    count: int
    slots: dict[str, dict[str, int]]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "rule": self.rule, "count": self.count, "slots": self.slots}

    @staticmethod
    def from_json(data: dict[str, Any]) -> ModelCheck:
        return ModelCheck(data["op"], data["rule"], data["count"], data["slots"])


def raise_failed(checks: Sequence[ModelCheck], extras: Sequence[Any]) -> None:
    """The rule's error of the first check whose count (an extra result) is not 0."""
    for check in checks:
        count = int(np.asarray(extras[check.count]))
        if count == 0:
            continue
        values = {"count": count}
        for slot, source in check.slots.items():
            values[slot] = (
                source["value"] if "value" in source else int(np.asarray(extras[source["output"]]))
            )
        raise RULES[check.rule](check.op, **values)
