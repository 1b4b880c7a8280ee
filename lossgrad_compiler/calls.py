"""One call of an operator from Python, and its one check: the inputs as arrays, validated by
the operator contract before any backend sees them, so that a bad call fails with its aclnn
code before anything is compiled. The pipeline checks every call it lowers with
`checked_call`; a session checks each node's call with the arrays it is fed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lossgrad_compiler import spec


@dataclass(frozen=True)
class Call:
    """An operator, its inputs by name (an absent optional input is missing or None) and
    its attributes: reference.evaluate's call shape."""

    op_type: str
    inputs: Mapping[str, Any]
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckedArrays:
    """A validated call and its present inputs as C-contiguous arrays (0-d ones stay 0-d),
    in the operator's order: what a backend runs, never validated again."""

    checked: spec.CheckedCall
    arrays: dict[str, np.ndarray]


def checked_call(
    op_type: str, inputs: Mapping[str, Any], attrs: Mapping[str, Any]
) -> CheckedArrays:
    """The call validated by spec.validate (aclnn's order of checks), with its arrays."""
    given = {n: (None if v is None else np.asarray(v)) for n, v in inputs.items()}
    infos = {
        n: (None if a is None else spec.TensorInfo(a.dtype, tuple(a.shape)))
        for n, a in given.items()
    }
    checked = spec.validate(op_type, infos, attrs)
    arrays = {n: np.require(given[n], requirements="C") for n in checked.present}
    return CheckedArrays(checked, arrays)
