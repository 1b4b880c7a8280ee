"""`emulate()`: one call (or a batch) through the emitted Ascend C project, on the CPU, with
reference.evaluate's call shape; `session(model)`: a model's nodes through the projects that
`lossgrad-compile --target ascendc` writes for it.

A call is validated by spec.validate and mapped to its signature; the signature's level 2
(the pipeline's per-signature cache) is emitted as a project by the Ascend C backend,
compiled against the emulation (cached) and run (backends/ascendc/emulation.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from onnx import ModelProto

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendc.emulation import (
    AclnnError,
    CompiledSignature,
    checked_block_dim,
    compile_projects,
    decode_tiling,
    raw_case,
    refuse_float64,
    run_raw,
)
from lossgrad_compiler.backends.ascendc.emulation import (
    signature_project as project_of,
)
from lossgrad_compiler.backends.ascendc.project import Project, lower_to_ascendc, print_projects
from lossgrad_compiler.dialects.ascendc.soc import DEFAULT_SOC
from lossgrad_compiler.dialects.ascendc.soc import soc as soc_named
from lossgrad_compiler.driver import lower_model
from lossgrad_compiler.errors import InvalidArgumentError, UnsupportedByBackendError
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import signature_of
from lossgrad_compiler.onnx.attributes import attributes_from_node

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


# --------------------------------------------------------------------------- models


@dataclass(frozen=True)
class Launch:
    """One AI-core launch of a call: the kernel's OpType, the block dim and the tiling data
    that the project's tiling function (op_host) chose for the call's shapes, by the field
    names of op_kernel/<name>_tiling.h (totalLength, bigCoreDataNum, smallCoreDataNum,
    bigCoreNum, tileLength, then the host-computed scalars)."""

    op_type: str
    block_dim: int
    tiling: dict[str, int | float]


@dataclass(frozen=True)
class NodeRun:
    """One node of a session's run: its output and the launches of its aclnn call."""

    node: str
    op_type: str
    project: str  # the project's directory under the output of --target ascendc
    output: np.ndarray
    launches: tuple[Launch, ...]


class AscendcSession:
    """A model's ai.lossgrad nodes, each run through the CPU emulation of its signature's
    project: the projects `compile_model(model, target="ascendc", soc=soc)` writes, compiled
    into one runner. The main graph must consist of ai.lossgrad nodes (the emulation has no
    standard ONNX operators); they run in graph order, one aclnn call each."""

    def __init__(
        self, model: ModelProto | bytes | str | Path, soc: str = DEFAULT_SOC,
        block_dim: int | None = None,
    ) -> None:  # fmt: skip
        imported, level2 = lower_model(model)
        self.model = imported.model
        self.soc = soc_named(soc)
        self.block_dim = checked_block_dim("ascendc", block_dim, self.soc)
        for node in self.model.graph.node:
            if node.domain != spec.DOMAIN:
                raise UnsupportedByBackendError(
                    "ascendc", "model",
                    f"the Ascend C emulation runs ai.lossgrad nodes only; node "
                    f"'{node.name}' is {node.domain or 'ai.onnx'} {node.op_type}",
                )  # fmt: skip
        by_id = {p.info.function: p for p in print_projects(lower_to_ascendc(level2, soc), soc)}
        self.projects: list[Project] = list(by_id.values())
        self._node_projects = [
            by_id[site.signature.id]
            for site in imported.sites
            if site.container is self.model.graph
        ]
        compiled = compile_projects(self.projects, soc)
        self._compiled = {c.project.info.function: c for c in compiled}
        self.output_names = [o.name for o in self.model.graph.output]

    @property
    def files(self) -> dict[str, str]:
        """Every project file, by its path under the output directory (as written by
        `lossgrad-compile --target ascendc`)."""
        return {
            f"{p.info.project}/{relative}": text
            for p in self.projects
            for relative, text in p.files.items()
        }

    def trace(self, feeds: Mapping[str, Any]) -> list[NodeRun]:
        """Run every node; each one's output and the launches of its call, in graph order."""
        values: dict[str, np.ndarray | None] = {}
        for info in self.model.graph.input:
            if info.name not in feeds:
                raise InvalidArgumentError("ascendc", "feeds", f"no value for input '{info.name}'")
            values[info.name] = np.asarray(feeds[info.name])
        runs = []
        for node, project in zip(self.model.graph.node, self._node_projects, strict=True):
            names = spec.operator(node.op_type).input_names  # "" is an absent optional input
            arrays = {n: values.get(v) if v else None
                      for n, v in zip(names, node.input, strict=False)}  # fmt: skip
            checked = checked_call(node.op_type, arrays, attributes_from_node(node))
            compiled = self._compiled[project.info.function]
            case = raw_case(checked, arrays, compiled, self.block_dim)
            (result,) = run_raw(compiled.runner, [case])
            if result.status != 0:
                raise AclnnError(result.status, f"node '{node.name}': {result.message}")
            launches = tuple(
                Launch(raw.op_type, raw.block_dim, decode_tiling(project, raw.tiling))
                for raw in result.launches
            )
            values[node.output[0]] = result.output
            runs.append(
                NodeRun(node.name, node.op_type, project.info.project, result.output, launches)
            )
        return runs

    def run(
        self, output_names: Sequence[str] | None, feeds: Mapping[str, Any]
    ) -> list[np.ndarray]:
        """The outputs named (all graph outputs for None), onnxruntime's call shape."""
        outputs = {r.node: r for r in self.trace(feeds)}
        by_value = {n.output[0]: outputs[n.name].output for n in self.model.graph.node}
        names = self.output_names if output_names is None else list(output_names)
        return [by_value[name] for name in names]


def session(
    model: ModelProto | bytes | str | Path, soc: str = DEFAULT_SOC, block_dim: int | None = None
) -> AscendcSession:
    """An AscendcSession of `model` (its projects compiled against the emulation, cached)."""
    return AscendcSession(model, soc, block_dim)
