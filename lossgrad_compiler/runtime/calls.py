"""One call of an operator for a runtime that compiles by signature (IREE, the AscendNPU IR
CPU runner): the inputs as contiguous arrays, checked by the operator contract before any
backend runs, so that a bad call fails with its aclnn code before anything is compiled."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lossgrad_compiler import spec


@dataclass(frozen=True)
class Call:
    op_type: str
    inputs: Mapping[str, Any]
    attrs: Mapping[str, Any] = field(default_factory=dict)


def checked_call(call: Call) -> tuple[spec.CheckedCall, dict[str, np.ndarray]]:
    """The validated call and the inputs given as C-contiguous arrays (0-d ones stay 0-d),
    in the operator's order (an absent optional input is not among them)."""
    arrays = {n: (None if v is None else np.asarray(v)) for n, v in call.inputs.items()}
    infos = {
        n: (None if a is None else spec.TensorInfo(a.dtype, tuple(a.shape)))
        for n, a in arrays.items()
    }
    result = spec.validate(call.op_type, infos, call.attrs)
    return result, {n: np.require(arrays[n], requirements="C") for n in result.present}
