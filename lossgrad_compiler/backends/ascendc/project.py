"""`emit_project`: level-2 IR → one CANN custom-operator project per signature.

Runs `convert-linalg-to-ascendc` and `ascendc-plan-buffers` on a copy of the module, then
prints, for every function, the msOpGen project: op_kernel (kernel + tiling header),
op_host (OpDef, infer functions, tiling), op_api (aclnn two-phase wrapper and the spec
checks), framework/onnx_plugin, the msOpGen JSON and the build files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler.backends.ascendc import EXECUTABLE_FILES, aclnn_printer, project_files
from lossgrad_compiler.backends.ascendc.checks_printer import print_checks_header
from lossgrad_compiler.backends.ascendc.host_graph import HostGraph, host_graph
from lossgrad_compiler.backends.ascendc.host_printer import print_op_host
from lossgrad_compiler.backends.ascendc.kernel_printer import (
    KernelNames,
    print_kernel,
    print_tiling_header,
)
from lossgrad_compiler.backends.ascendc.signature_info import SignatureInfo, signature_info
from lossgrad_compiler.backends.build_cache import write_atomically
from lossgrad_compiler.backends.cxx_shapes import lossgrad_shapes_header
from lossgrad_compiler.context import make_context
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.dialects.ascendc.soc import DEFAULT_SOC
from lossgrad_compiler.dialects.ascendc.soc import soc as soc_named
from lossgrad_compiler.passes.ascendc_plan_buffers import AscendcPlanBuffersPass
from lossgrad_compiler.passes.convert_linalg_to_ascendc import ConvertLinalgToAscendcPass


@dataclass(frozen=True)
class Project:
    """The printed files of one signature, relative to its project directory."""

    info: SignatureInfo
    graph: HostGraph
    files: dict[str, str]


def lower_to_ascendc(
    module: ModuleOp, soc: str = DEFAULT_SOC, batch_sums: str = "per_core"
) -> ModuleOp:
    """A converted and planned copy of a level-2 module (`batch_sums`: how a reduction over
    the batch meets the cores, convert-linalg-to-ascendc's option)."""
    soc_named(soc)
    lowered = module.clone()
    ctx = make_context()
    ctx.load_dialect(asc.Ascendc)
    ConvertLinalgToAscendcPass(batch_sums=batch_sums).apply(ctx, lowered)
    AscendcPlanBuffersPass(soc=soc).apply(ctx, lowered)
    lowered.verify()
    return lowered


def kernel_names(info: SignatureInfo) -> KernelNames:
    return KernelNames(
        entry=info.kernel_name,
        class_name=f"Kernel{info.op_type}",
        tiling_struct=info.tiling_struct,
        tiling_header=f"{info.kernel_name}_tiling.h",
        params=(*info.inputs, info.op.output),
    )


def print_projects(lowered: ModuleOp, soc: str = DEFAULT_SOC) -> list[Project]:
    """Every signature's project text, from a module `lower_to_ascendc` produced."""
    kernels = {k.sym_name.data: k for k in lowered.ops if isinstance(k, asc.KernelOp)}
    projects = []
    for function in [f for f in lowered.ops if isinstance(f, func.FuncOp)]:
        info = signature_info(function)
        graph = host_graph(function, kernels)
        name = info.kernel_name
        files = {
            f"{info.op_type}.json": project_files.msopgen_json(graph, info),
            "CMakePresets.json": project_files.cmake_presets(soc),
            "build.sh": project_files.BUILD_SH,
            f"op_kernel/{name}.cpp": print_kernel(graph.kernel, kernel_names(info)),
            f"op_kernel/{name}_tiling.h": print_tiling_header(graph.kernel, kernel_names(info)),
            f"op_host/{name}.cpp": print_op_host(graph, info, soc),
            f"op_api/aclnn_{name}.h": aclnn_printer.print_aclnn_header(info),
            f"op_api/aclnn_{name}.cpp": aclnn_printer.print_aclnn_source(graph, info),
            "op_api/lossgrad_checks.h": print_checks_header(info.op),
            "op_api/lossgrad_shapes.h": lossgrad_shapes_header(),
            f"framework/onnx_plugin/{name}_onnx_plugin.cc": project_files.onnx_plugin(info),
            **project_files.cmake_lists(info, soc),
        }
        projects.append(Project(info, graph, files))
    return projects


def emitted_files(module: ModuleOp, soc: str = DEFAULT_SOC) -> dict[str, str]:
    """Every file of one project per level-2 function of `module`, by its path relative to
    the output directory (`<signature id>/...`)."""
    return {
        f"{project.info.project}/{relative}": text
        for project in print_projects(lower_to_ascendc(module, soc), soc)
        for relative, text in project.files.items()
    }


def emit_project(module: ModuleOp, out_dir: Path | str, soc: str = DEFAULT_SOC) -> list[Path]:
    """Write one project per level-2 function of `module` under `out_dir/<signature id>/`;
    returns the files written."""
    out = Path(out_dir)
    written = []
    for relative, text in emitted_files(module, soc).items():
        path = out / relative
        write_atomically(path, text.encode("utf-8"))
        if path.name in EXECUTABLE_FILES:
            path.chmod(0o755)
        written.append(path)
    return written
