"""Running a model's ai.lossgrad nodes through the Ascend C emulation: `AscendcSession`
holds the runner compiled from the projects `lossgrad-compile --target ascendc` writes
(evaluation/ascendc.py's `session` builds it) and runs the nodes in graph order, one aclnn
call each, every call checked with the arrays it is fed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import ModelProto

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendc.emulation import (
    AclnnError,
    CompiledSignature,
    decode_tiling,
    raw_case,
    run_raw,
)
from lossgrad_compiler.backends.ascendc.project import Project
from lossgrad_compiler.calls import checked_call
from lossgrad_compiler.dialects.ascendc.soc import Soc
from lossgrad_compiler.errors import InvalidArgumentError
from lossgrad_compiler.onnx.attributes import attributes_from_node


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
    project: the imported model, the project of each main-graph node, the projects compiled
    into one runner, the SoC and the block dim (None: all its vector cores)."""

    def __init__(
        self,
        model: ModelProto,
        node_projects: Sequence[Project],
        compiled: Sequence[CompiledSignature],
        soc: Soc,
        block_dim: int | None,
    ) -> None:
        self.model = model
        self.soc = soc
        self.block_dim = block_dim
        self.projects: list[Project] = [c.project for c in compiled]
        self._node_projects = list(node_projects)
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
            call = checked_call(node.op_type, arrays, attributes_from_node(node))
            compiled = self._compiled[project.info.function]
            case = raw_case(call.checked, call.arrays, compiled, self.block_dim)
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

