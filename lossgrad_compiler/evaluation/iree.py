"""Calls compiled by IREE and run on this CPU: `evaluate` with the call shape of
`reference.evaluate`, `evaluate_calls` for many calls in one compiled module.

Every call is checked by the pipeline before anything is compiled (errors carry the aclnn
codes); the module of their signatures is built by backends/iree (cached) and run by
runtime/iree. A classification call whose target holds a value outside [0, C) that is not
ignore_index raises TARGET_RANGE (161002) from the module's count of bad targets, as
reference.evaluate does. IREE's CPU runtime flushes subnormal inputs and results to zero
(its worker threads set FTZ/DAZ), its llvm-cpu code fuses a product into the sum it feeds
(FMA) and expands exp into its own polynomial: float32 and float64 results of such bodies
(CrossEntropyLossGrad's) may be a few ulps from reference.evaluate's; everything else
follows docs/operators.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lossgrad_compiler.backends.iree import IreeOptions, compile_module
from lossgrad_compiler.calls import Call
from lossgrad_compiler.pipeline import calls_level2, checked_calls, signature
from lossgrad_compiler.runtime.iree import load


def evaluate(
    op_type: str,
    inputs: Mapping[str, Any],
    attrs: Mapping[str, Any] | None = None,
    device: str = "local-task",
    options: IreeOptions | None = None,
) -> np.ndarray:
    """The result of one call computed by IREE, as a numpy array of the result type."""
    return evaluate_calls([Call(op_type, inputs, dict(attrs or {}))], device, options)[0]


def evaluate_calls(
    calls: Sequence[Call], device: str = "local-task", options: IreeOptions | None = None
) -> list[np.ndarray]:
    """Many calls: every call checked first, then one module for all their signatures."""
    options = options or IreeOptions()
    if options.backend != "llvm-cpu":
        raise ValueError(f"only llvm-cpu modules run on this machine, not {options.backend}")
    prepared = checked_calls(calls)
    if not prepared:
        return []
    path = compile_module(calls_level2(c.checked for c in prepared), options)
    module = load(path, device)
    results = []
    for call in prepared:
        out = module(signature(call.checked).id, *call.arrays.values())
        results.append(out.astype(call.checked.result_type.dtype, copy=False))
    return results
