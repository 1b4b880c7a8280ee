"""`--target ascendnpu-ir`: per signature, what AscendNPU IR makes of the project's level 2.

DIR/<signature id>/kernel.hfusion.mlir   the HFusion form (convert-linalg-to-hfusion)
DIR/<signature id>/compile.sh            the bishengir-compile command (needs CANN's hivmc)
DIR/<signature id>/kernel.hivm.mlir      the HIVM IR bishengir-opt makes here
DIR/<signature id>/summary.json          kernels, fusion kind, block dim, UB buffers,
                                         HIVM vector ops by kind
DIR/<signature id>/check_<rule>.hfusion.mlir, check_<rule>.hivm.mlir
                                         a value check's count (the classification
                                         operators' target_range), its own kernel
                                         (split.py); summary.json's "checks" has its summary
DIR/<signature id>/reduction_<name>.hfusion.mlir, reduction_<name>.hivm.mlir
                                         a sum the gradient reads (CrossEntropyLossGrad's
                                         kept_weight, class_weight), its own kernel, whose
                                         result the gradient's kernel takes as an argument;
                                         summary.json's "reductions" has its summary
DIR/summary.json                         every signature's summary
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler import level2
from lossgrad_compiler.backends.ascendnpu_ir.hfusion import hfusion_module
from lossgrad_compiler.backends.ascendnpu_ir.hivm import AscendNpuIrSoc, hivm_text
from lossgrad_compiler.backends.ascendnpu_ir.split import split_results
from lossgrad_compiler.backends.ascendnpu_ir.summary import summarize
from lossgrad_compiler.backends.ascendnpu_ir.toolchain import version
from lossgrad_compiler.backends.build_cache import write_atomically

HFUSION_FILE = "kernel.hfusion.mlir"
HIVM_FILE = "kernel.hivm.mlir"
COMPILE_SCRIPT = "compile.sh"
SUMMARY_FILE = "summary.json"


def signature_summary(
    function: level2.Level2Function, hfusion: func.FuncOp, hivm: str, soc: AscendNpuIrSoc
) -> dict[str, Any]:
    """The JSON summary of one signature: its level-2 function, its HFusion form and the
    HIVM IR."""
    summary = summarize(hivm)
    return {
        "signature": function.name,
        "operator": function.op.name,
        "attributes": function.attributes,
        "element_types": [o.storage.name for o in function.operands],
        "soc": soc.soc_name,
        "device": soc.device,
        "block_dim": soc.block_dim,
        "compiler": version(),
        "pipeline": ["bishengir-opt", *soc.opt_options],
        "compile_command": soc.compile_command(HFUSION_FILE, "kernel.o"),
        "hfusion_ops": sum(op.name.startswith(("linalg.", "hfusion.")) for op in hfusion.body.ops),
        **summary.as_json(),
    }


@dataclass(frozen=True)
class Outputs:
    """Every signature's files (paths relative to the output directory) and summaries."""

    files: dict[str, bytes]
    executables: frozenset[str]
    summaries: list[dict[str, Any]]


def signature_outputs(module: ModuleOp, soc: AscendNpuIrSoc) -> Outputs:
    """The files of every function of a level-2 module, made in memory."""
    functions = list(level2.signature_functions(module))
    hfusion = hfusion_module(module)
    files: dict[str, bytes] = {}
    summaries = []
    for function, converted in zip(functions, hfusion.ops, strict=True):
        assert isinstance(converted, func.FuncOp) and converted.sym_name.data == function.name
        gradient, *rest = split_results(ModuleOp([converted.clone()])).ops
        counts, sums = rest[: len(function.checks)], rest[len(function.checks) :]
        assert isinstance(gradient, func.FuncOp)
        text = str(ModuleOp([gradient.clone()]))
        hivm = hivm_text(text, soc)
        summary = signature_summary(function, gradient, hivm, soc)
        checks: dict[str, Any] = {}
        for check, count in zip(function.checks, counts, strict=True):
            count_text = str(ModuleOp([count.clone()]))
            count_hivm = hivm_text(count_text, soc)
            files[f"{function.name}/check_{check.rule}.hfusion.mlir"] = count_text.encode()
            files[f"{function.name}/check_{check.rule}.hivm.mlir"] = count_hivm.encode()
            checks[check.rule] = summarize(count_hivm).as_json()
        if checks:
            summary["checks"] = checks
        reductions: dict[str, Any] = {}
        for reduction, sum_function in zip(function.reductions, sums, strict=True):
            sum_text = str(ModuleOp([sum_function.clone()]))
            sum_hivm = hivm_text(sum_text, soc)
            files[f"{function.name}/reduction_{reduction.name}.hfusion.mlir"] = sum_text.encode()
            files[f"{function.name}/reduction_{reduction.name}.hivm.mlir"] = sum_hivm.encode()
            reductions[reduction.name] = summarize(sum_hivm).as_json()
        if reductions:
            summary["reductions"] = reductions
        script = (
            "#!/bin/sh\n# Turns the HFusion form into an Ascend kernel binary. bishengir-compile\n"
            "# runs CANN's hivmc last: it needs the CANN toolkit on PATH.\nset -e\n"
            f'cd "$(dirname "$0")"\n{summary["compile_command"]}\n'
        )
        for name, content in (
            (HFUSION_FILE, text),
            (HIVM_FILE, hivm),
            (COMPILE_SCRIPT, script),
            (SUMMARY_FILE, json.dumps(summary, indent=2) + "\n"),
        ):
            files[f"{function.name}/{name}"] = content.encode("utf-8")
        summaries.append(summary)
    files[SUMMARY_FILE] = (json.dumps(summaries, indent=2) + "\n").encode()
    executables = frozenset(f"{f.name}/{COMPILE_SCRIPT}" for f in functions)
    return Outputs(files, executables, summaries)


def write_outputs(module: ModuleOp, out_dir: Path, soc: AscendNpuIrSoc) -> list[dict[str, Any]]:
    """Write every signature's files under `out_dir`; their summaries."""
    outputs = signature_outputs(module, soc)
    for relative, data in outputs.files.items():
        path = out_dir / relative
        write_atomically(path, data)
        if relative in outputs.executables:
            path.chmod(0o755)
    return outputs.summaries
