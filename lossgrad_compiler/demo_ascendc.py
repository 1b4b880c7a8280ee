"""lossgrad-demo's Ascend C backend: the project `lossgrad-compile --target ascendc` writes for
the example model, its kernels run node by node in the CPU emulator, and the tiling each
project's tiling function chose for the calls' shapes.

The project is written through the Target registry (`compile_model`); the same projects are
compiled against the emulation by `evaluation.ascendc.session`, and the demo checks that the
files it runs are the files it wrote."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from onnx import ModelProto

from lossgrad_compiler import spec
from lossgrad_compiler.demo_table import format_table, number

if TYPE_CHECKING:
    from lossgrad_compiler.runtime.ascendc import AscendcSession, NodeRun

SOC = "ascend910b"


@dataclass(frozen=True)
class TilingRow:
    """One call's launch, as the tiling table shows it."""

    node: str
    op_type: str
    iteration: tuple[int, ...]
    block_dim: int
    tiling: Mapping[str, int | float]


class AscendcDemo:
    """Writes the example's projects under `out`, then runs its nodes in the emulator; a
    runner for lossgrad-demo's table that remembers each call's tiling for `details()`."""

    def __init__(self, model: ModelProto, out: Path, soc: str = SOC) -> None:
        # defers xDSL, the compiler and the emulation's build until this backend runs
        from lossgrad_compiler.driver import compile_model
        from lossgrad_compiler.evaluation.ascendc import session

        self.model = model
        self.out = out
        self.soc = soc
        artifact = compile_model(model, target="ascendc", soc=soc).artifact
        artifact.write_directory(out)
        self.written = {path: data.decode("utf-8") for path, data in artifact.files.items()}
        self.session: AscendcSession = session(model, soc=soc)
        if self.session.files != self.written:
            raise RuntimeError(
                "the projects compiled against the emulation differ from the files written"
            )
        self.rows: list[TilingRow] = []
        self.node_projects: dict[str, str] = {}

    def __call__(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        runs = self.session.trace(feeds)
        outputs = {}
        shapes = {k: np.shape(v) for k, v in feeds.items()}
        for node, run in zip(self.model.graph.node, runs, strict=True):
            outputs[node.output[0]] = run.output
            shapes[node.output[0]] = run.output.shape
            self.node_projects[run.node] = run.project
            if spec.operator(node.op_type).has_classes:  # the formula runs over self's shape
                iteration = run.output.shape
            else:
                iteration = np.broadcast_shapes(*(shapes[v] for v in node.input if v))
            self.rows.extend(_rows(run, node.op_type, tuple(iteration)))
        return outputs

    def details(self) -> list[str]:
        """The project block and the tiling table."""
        return [*project_lines(self.out, self.written, self.node_projects), "",
                *tiling_lines(self.soc, self.rows)]  # fmt: skip


def _rows(run: NodeRun, op_type: str, iteration: tuple[int, ...]) -> list[TilingRow]:
    return [TilingRow(run.node, op_type, iteration, launch.block_dim, launch.tiling)
            for launch in run.launches]  # fmt: skip


# --------------------------------------------------------------------------- the project


def project_lines(
    out: Path, files: Mapping[str, str], node_projects: Mapping[str, str]
) -> list[str]:
    """Where the projects are and what each holds, the file names of one project with its
    OpType and kernel name written as <OpType> and <name>."""
    projects = sorted({path.split("/", 1)[0] for path in files})
    lines = [
        f"Ascend C: lossgrad-compile --target ascendc --soc {SOC} wrote {len(projects)} "
        f"projects ({len(files)} files) to {out}/",
    ]
    users: dict[str, list[str]] = {}
    for node, project in node_projects.items():
        users.setdefault(project, []).append(node)
    width = max(len(p) for p in projects) + 1
    for project in projects:
        nodes = ", ".join(users.get(project, [])) or "-"
        lines.append(f"  {(project + '/').ljust(width)}  node {nodes}")
    lines.append("  each project (<OpType> = operator + signature digest, <name> = its file name):")
    layout = generic_layout(files)
    width = max(len(folder) for folder in layout) + 2
    names_width = max(len(" ".join(names)) for names in layout.values()) + 2
    for folder, names in layout.items():
        text = f"    {(folder or '.') + '/':<{width}}{' '.join(names):<{names_width}}"
        lines.append((text + FOLDERS.get(folder, "")).rstrip())
    return lines


# What each folder of a project holds (docs/ascend-c.md, "Project layout"), in reading order.
FOLDERS = {
    "op_kernel": "the kernel and its tiling data",
    "op_host": "OpDef, shape and type inference, the tiling function",
    "op_api": "the aclnn two-phase API and its argument checks",
    "framework/onnx_plugin": "the ONNX node to OpType mapping for ATC",
    "": "msOpGen JSON and build files",
}


def generic_layout(files: Mapping[str, str]) -> dict[str, list[str]]:
    """The files of every project, by folder, with the project's own names generalised; the
    union over the projects (they hold the same files)."""
    layout: dict[str, set[str]] = {}
    for path in files:
        project, relative = path.split("/", 1)
        op_type = _op_type(files, project)
        name = _snake_name(files, project)
        generic = relative.replace(op_type, "<OpType>").replace(name, "<name>")
        folder, _, file = generic.rpartition("/")
        layout.setdefault(folder, set()).add(file)
    known = list(FOLDERS)
    order = sorted(layout, key=lambda f: (known.index(f) if f in known else len(known), f))
    return {folder: sorted(layout[folder], key=_file_order) for folder in order}


def _op_type(files: Mapping[str, str], project: str) -> str:
    """The OpType: the msOpGen JSON at the project's top is <OpType>.json."""
    (json_name,) = [p for p in files if p.startswith(f"{project}/") and p.count("/") == 1
                    and p.endswith(".json") and not p.endswith("CMakePresets.json")]  # fmt: skip
    return json_name.split("/", 1)[1].removesuffix(".json")


def _snake_name(files: Mapping[str, str], project: str) -> str:
    """The kernel name: op_kernel/<name>.cpp."""
    (kernel,) = [p for p in files if p.startswith(f"{project}/op_kernel/") and p.endswith(".cpp")]
    return kernel.rsplit("/", 1)[1].removesuffix(".cpp")


def _file_order(name: str) -> tuple[int, str]:
    return (name.startswith("CMake"), name)


# --------------------------------------------------------------------------- the tiling


def core_lengths(tiling: Mapping[str, int | float], block_dim: int) -> list[int]:
    """Each core's element count under the tiling data (docs/ascend-c.md, "The core
    split"): the first bigCoreNum cores take bigCoreDataNum, the others smallCoreDataNum,
    each clipped to the iteration space."""
    total, big = int(tiling["totalLength"]), int(tiling["bigCoreDataNum"])
    small, big_cores = int(tiling["smallCoreDataNum"]), int(tiling["bigCoreNum"])
    lengths = []
    for core in range(block_dim):
        start = core * big if core < big_cores else big_cores * big + (core - big_cores) * small
        length = big if core < big_cores else small
        lengths.append(max(0, min(length, total - start)))
    return lengths


def runs_text(values: Sequence[int]) -> str:
    """[8, 8, 8, 2] as "3x8 + 1x2"."""
    parts: list[list[int]] = []
    for v in values:
        if parts and parts[-1][1] == v:
            parts[-1][0] += 1
        else:
            parts.append([1, v])
    return " + ".join(f"{count}x{value}" for count, value in parts)


def tiling_lines(soc: str, rows: Sequence[TilingRow]) -> list[str]:
    # defers xDSL (the SoC table lives with the ascendc dialect) until this backend runs
    from lossgrad_compiler.dialects.ascendc.soc import soc as soc_named

    chip = soc_named(soc)
    header = (
        f"Ascend C tiling on {soc} ({chip.vector_cores} vector cores, UB "
        f"{chip.ub_bytes:,} bytes), as each project's tiling function (op_host) chose it "
        "for the calls above, read back from the emulator:"
    )
    table = []
    nodes = list(dict.fromkeys(row.node for row in rows))
    for row in sorted(rows, key=lambda r: nodes.index(r.node)):  # by node, then call order
        lengths = core_lengths(row.tiling, row.block_dim)
        tile = int(row.tiling["tileLength"])
        scalars = " ".join(
            f"{_scalar_name(row.op_type, k)}={number(float(v))}"
            for k, v in row.tiling.items()
            if k not in _COMMON
        )
        table.append([
            row.node,
            "[" + ",".join(map(str, row.iteration)) + "]",
            str(int(row.tiling["totalLength"])),
            str(row.block_dim),
            runs_text(lengths),
            str(tile),
            str(max((math.ceil(n / tile) for n in lengths), default=0)),
            scalars or "-",
        ])  # fmt: skip
    headers = ["node", "iteration", "elements", "block dim", "elements per core", "tile",
               "tiles per core", "host scalars"]  # fmt: skip
    return [header, format_table(headers, table)]


def _scalar_name(op_type: str, field: str) -> str:
    """A tiling field as the table names it: the reduction scale of an operator that divides
    by n at the end (spec.Scaling.DIVISOR) is n itself, shown as `n`, not as a factor."""
    if field == "scale" and spec.operator(op_type).scaling is spec.Scaling.DIVISOR:
        return "n"
    return field


_COMMON = ("totalLength", "bigCoreDataNum", "smallCoreDataNum", "bigCoreNum", "tileLength")
