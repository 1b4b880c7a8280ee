"""The Ascend C emulation from Python: `emulate()`, one call (or a batch) through the
emitted Ascend C project on the CPU, with reference.evaluate's call shape; `session(model)`,
a model's nodes through the projects that `lossgrad-compile --target ascendc` writes for it.

Every call is checked by the pipeline and mapped to its signature; the signature's level 2
(the pipeline's per-signature cache) is emitted as a project by the Ascend C backend and
compiled against the emulation (cached, backends/ascendc/emulation.py); runtime/ascendc.py
runs the compiled runner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from lossgrad_compiler.backends.ascendc.project import Project, lower_to_ascendc, print_projects
from lossgrad_compiler.calls import Call as OperatorCall
from lossgrad_compiler.dialects.ascendc.soc import DEFAULT_SOC
from lossgrad_compiler.dialects.ascendc.soc import soc as soc_named
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.pipeline import ModelSource, calls_level2, checked_calls, lowered_model
from lossgrad_compiler.pipeline import signature as signature_of
from lossgrad_compiler.runtime.ascendc import AscendcSession

_PROJECTS: dict[tuple[str, str], Project] = {}


def signature_project(checked: spec.CheckedCall, soc: str = DEFAULT_SOC) -> Project:
    """The printed project of a checked call's signature (once per process)."""
    refuse_float64(checked)
    key = (signature_of(checked).id, soc)
    if key not in _PROJECTS:
        _PROJECTS[key] = project_of(calls_level2([checked]), soc)
    return _PROJECTS[key]


def compile_signatures(
    checked: Sequence[spec.CheckedCall], soc: str = DEFAULT_SOC
) -> list[CompiledSignature]:
    """One runner for the signatures of all the calls (one entry per call, in order)."""
    return compile_projects([signature_project(c, soc) for c in checked], soc)


def compile_signature(checked: spec.CheckedCall, soc: str = DEFAULT_SOC) -> CompiledSignature:
    return compile_signatures([checked], soc)[0]


@dataclass(frozen=True)
class Call(OperatorCall):
    """One call for `emulate_calls`, and the vector cores it may use (None: all of them)."""

    block_dim: int | None = None


def emulate_calls(calls: Sequence[Call], soc: str = DEFAULT_SOC) -> list[np.ndarray]:
    """Run many calls (any operators and signatures): one build, one runner process.
    Every call is checked (spec, SoC, block_dim) before anything is compiled."""
    prepared = checked_calls(calls)
    chip = soc_named(soc)
    block_dims = [checked_block_dim(c.op_type, c.block_dim, chip) for c in calls]
    if not calls:
        return []
    compiled = compile_signatures([p.checked for p in prepared], soc)
    cases = [
        raw_case(p.checked, p.arrays, co, b)
        for p, co, b in zip(prepared, compiled, block_dims, strict=True)
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


def session(
    model: ModelSource, soc: str = DEFAULT_SOC, block_dim: int | None = None
) -> AscendcSession:
    """An AscendcSession of `model`: the projects `compile_model(model, target="ascendc",
    soc=soc)` writes, compiled against the emulation (cached) into one runner. The main
    graph must consist of ai.lossgrad nodes (the emulation has no standard ONNX operators)."""
    imported, level2 = lowered_model(model)
    chip = soc_named(soc)
    cores = checked_block_dim("ascendc", block_dim, chip)
    for node in imported.model.graph.node:
        if node.domain != spec.DOMAIN:
            raise UnsupportedByBackendError(
                "ascendc", "model",
                f"the Ascend C emulation runs ai.lossgrad nodes only; node "
                f"'{node.name}' is {node.domain or 'ai.onnx'} {node.op_type}",
            )  # fmt: skip
    by_id = {p.info.function: p for p in print_projects(lower_to_ascendc(level2, soc), soc)}
    node_projects = [
        by_id[site.signature.id]
        for site in imported.sites
        if site.container is imported.model.graph
    ]
    compiled = compile_projects(list(by_id.values()), soc)
    return AscendcSession(imported.model, node_projects, compiled, chip, cores)
