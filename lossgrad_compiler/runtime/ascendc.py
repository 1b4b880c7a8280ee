"""`emulate()`: one call (or a batch) through the emitted Ascend C project, on the CPU, with
reference.evaluate's call shape.

A call is validated by spec.validate and mapped to its signature; the signature's level 2
(the pipeline's per-signature cache) is emitted as a project by the Ascend C backend,
compiled against the emulation (cached) and run (backends/ascendc/emulation.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendc.emulation import (
    AclnnError,
    CompiledSignature,
    checked_block_dim,
    compile_projects,
    raw_case,
    refuse_float64,
    run_raw,
)
from lossgrad_compiler.backends.ascendc.emulation import (
    signature_project as project_of,
)
from lossgrad_compiler.backends.ascendc.project import Project
from lossgrad_compiler.dialects.ascendc.soc import DEFAULT_SOC
from lossgrad_compiler.dialects.ascendc.soc import soc as soc_named
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import signature_of

_PROJECTS: dict[tuple[str, str], Project] = {}


def signature_project(checked: spec.CheckedCall, soc: str = DEFAULT_SOC) -> Project:
    """The printed project of a validated call's signature (once per process)."""
    refuse_float64(checked)
    signature = signature_of(checked)
    key = (signature.id, soc)
    if key not in _PROJECTS:
        _PROJECTS[key] = project_of(lower_signatures([signature]), soc)
    return _PROJECTS[key]


def compile_signatures(
    checked: Sequence[spec.CheckedCall], soc: str = DEFAULT_SOC
) -> list[CompiledSignature]:
    """One runner for the signatures of all the calls (one entry per call, in order)."""
    return compile_projects([signature_project(c, soc) for c in checked], soc)


def compile_signature(checked: spec.CheckedCall, soc: str = DEFAULT_SOC) -> CompiledSignature:
    return compile_signatures([checked], soc)[0]


def _arrays(inputs: Mapping[str, Any]) -> dict[str, np.ndarray | None]:
    return {k: (None if v is None else np.asarray(v)) for k, v in inputs.items()}


def checked_call(
    op_type: str, arrays: Mapping[str, np.ndarray | None], attrs: Mapping[str, Any]
) -> spec.CheckedCall:
    infos = {
        n: (None if a is None else spec.TensorInfo(a.dtype, tuple(a.shape)))
        for n, a in arrays.items()
    }
    return spec.validate(op_type, infos, attrs)


@dataclass(frozen=True)
class Call:
    """One call for `emulate_calls`: op, inputs, attributes, and the cores to run on."""

    op_type: str
    inputs: Mapping[str, Any]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    block_dim: int | None = None


def emulate_calls(calls: Sequence[Call], soc: str = DEFAULT_SOC) -> list[np.ndarray]:
    """Run many calls (any operators and signatures): one build, one runner process.
    Every call is validated (spec, SoC, block_dim) before anything is compiled."""
    arrays = [_arrays(c.inputs) for c in calls]
    checked = [checked_call(c.op_type, a, c.attrs) for c, a in zip(calls, arrays, strict=True)]
    target = soc_named(soc)
    block_dims = [checked_block_dim(c.op_type, c.block_dim, target) for c in calls]
    if not calls:
        return []
    compiled = compile_signatures(checked, soc)
    cases = [
        raw_case(ch, a, co, b)
        for ch, a, co, b in zip(checked, arrays, compiled, block_dims, strict=True)
    ]
    results = run_raw(compiled[0].runner, cases)
    for result in results:
        if result.status != 0:
            raise AclnnError(result.status, result.message)
    return [r.output for r in results]


def emulate(
    op_type: str,
    inputs: Mapping[str, Any],
    attrs: Mapping[str, Any] | None = None,
    soc: str = DEFAULT_SOC,
    block_dim: int | None = None,
) -> np.ndarray:
    """The result of one call computed by the emulated Ascend C kernel (reference.evaluate's
    call shape) on `block_dim` vector cores (default: all of the SoC's). float64 raises
    UnsupportedByBackendError; an invalid call, SoC or block_dim raises a LossGradError
    (aclnn 161002 for the latter two) before anything is compiled."""
    return emulate_calls([Call(op_type, inputs, dict(attrs or {}), block_dim)], soc)[0]
