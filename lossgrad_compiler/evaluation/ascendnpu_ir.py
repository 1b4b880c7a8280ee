"""Calls through the kernels AscendNPU IR schedules, on this CPU: `evaluate` with the call
shape of `reference.evaluate`, and `evaluate_calls` for many calls.

Every call is checked by the pipeline first (errors carry the aclnn codes); each signature's
level 2 becomes one runner library (backends/ascendnpu_ir/cpu_runner.py), which
runtime/ascendnpu_ir loads and calls as the host would on a device."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lossgrad_compiler.backends.ascendnpu_ir.cpu_runner import runner_library
from lossgrad_compiler.backends.ascendnpu_ir.hivm import AscendNpuIrSoc
from lossgrad_compiler.calls import Call
from lossgrad_compiler.pipeline import calls_level2, checked_calls, signature
from lossgrad_compiler.runtime.ascendnpu_ir import RunnerLibrary


def evaluate(
    op_type: str,
    inputs: Mapping[str, Any],
    attrs: Mapping[str, Any] | None = None,
    soc: AscendNpuIrSoc | None = None,
    *,
    schedule: bool = True,
) -> np.ndarray:
    """The result of one call computed by AscendNPU IR's scheduled kernel on this CPU
    (`schedule=False`: the HFusion form without HFusion's fusion and auto-schedule)."""
    return evaluate_calls([Call(op_type, inputs, dict(attrs or {}))], soc, schedule=schedule)[0]


def evaluate_calls(
    calls: Sequence[Call], soc: AscendNpuIrSoc | None = None, *, schedule: bool = True
) -> list[np.ndarray]:
    """Many calls: every call checked first, then one library per signature."""
    soc = soc or AscendNpuIrSoc()
    prepared = checked_calls(calls)
    if not prepared:
        return []
    libraries: dict[str, RunnerLibrary] = {}
    results = []
    for call in prepared:
        checked = call.checked
        name = signature(checked).id
        if name not in libraries:
            path = runner_library(calls_level2([checked]), soc, schedule=schedule)
            libraries[name] = RunnerLibrary(path)
        result = np.zeros(tuple(checked.result_shape), checked.result_type.dtype)  # type: ignore[arg-type]
        results.append(libraries[name].run(name, list(call.arrays.values()), result))
    return results
