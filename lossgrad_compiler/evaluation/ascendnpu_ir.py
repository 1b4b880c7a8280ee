"""Calls through the kernels AscendNPU IR schedules, on this CPU: `evaluate` with the call
shape of `reference.evaluate`, and `evaluate_calls` for many calls.

Every call is checked by the pipeline first (errors carry the aclnn codes); each signature's
level 2 becomes one runner library (backends/ascendnpu_ir/cpu_runner.py), which
runtime/ascendnpu_ir loads and calls as the host would on a device. A signature with value
checks (the classification operators' target check, docs/level2.md) has one library more
per check, its count's kernel; a count that is not 0 raises the check's error
(TARGET_RANGE, aclnn 161002) before the gradient is returned. A signature whose gradient
reads sums (CrossEntropyLossGrad's kept and class weights) has one library more per sum,
run first; the gradient's kernel takes the 0-d sums after the inputs (split.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lossgrad_compiler import messages, spec
from lossgrad_compiler.backends.ascendnpu_ir.cpu_runner import runner_library
from lossgrad_compiler.backends.ascendnpu_ir.hivm import AscendNpuIrSoc
from lossgrad_compiler.backends.ascendnpu_ir.split import check_function_name
from lossgrad_compiler.calls import Call
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.level2 import analyze_function, read_checks
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
    checks: dict[str, tuple[str, ...]] = {}  # the value checks of each signature
    sums: dict[str, list[tuple[str, np.dtype]]] = {}  # each signature's sums and their types
    results = []
    for call in prepared:
        checked = call.checked
        name = signature(checked).id
        arrays = list(call.arrays.values())
        if name not in libraries:
            level2 = calls_level2([checked])
            libraries[name] = RunnerLibrary(runner_library(level2, soc, schedule=schedule))
            checks[name] = read_checks(next(iter(level2.ops)))  # type: ignore[arg-type]
            for k, rule in enumerate(checks[name], start=1):
                if rule not in CHECK_ERRORS:
                    raise UnsupportedByBackendError(name, "check", f"no error for '{rule}'")
                path = runner_library(level2, soc, schedule=schedule, result=k)
                libraries[check_function_name(name, rule)] = RunnerLibrary(path)
            function = analyze_function(next(iter(level2.ops)))  # type: ignore[arg-type]
            sums[name] = []
            for k, reduction in enumerate(function.reductions, start=1 + len(checks[name])):
                kernel = check_function_name(name, reduction.name)
                path = runner_library(level2, soc, schedule=schedule, result=k)
                libraries[kernel] = RunnerLibrary(path)
                element = reduction.generic.output.element
                sums[name].append((kernel, np.dtype(element.numpy)))
        for rule in checks[name]:
            kernel = check_function_name(name, rule)
            count = int(libraries[kernel].run(kernel, arrays, np.zeros((), np.int64)))
            if count:
                raise CHECK_ERRORS[rule](checked, count)
        read = [libraries[k].run(k, arrays, np.zeros((), dtype)) for k, dtype in sums[name]]
        result = np.zeros(tuple(checked.result_shape), checked.result_type.dtype)  # type: ignore[arg-type]
        results.append(libraries[name].run(name, [*arrays, *read], result))
    return results


def _target_range(checked: spec.CheckedCall, count: int) -> Exception:
    shape = checked.shapes["self"] or ()
    return messages.TARGET_RANGE(
        checked.op.name,
        count=count,
        classes=shape[checked.class_dim],
        ignore_index=int(checked.attrs["ignore_index"]),
    )


CHECK_ERRORS = {messages.TARGET_RANGE.key: _target_range}
"""The error of each value check (a level-2 `lossgrad.checks` rule), from its count."""
