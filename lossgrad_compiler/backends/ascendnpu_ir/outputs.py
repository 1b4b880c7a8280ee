"""`--target ascendnpu-ir`: per signature, what AscendNPU IR makes of the project's level 2.

DIR/<signature id>/kernel.hfusion.mlir   the HFusion form (convert-linalg-to-hfusion)
DIR/<signature id>/compile.sh            the bishengir-compile command (needs CANN's hivmc)
DIR/<signature id>/kernel.hivm.mlir      the HIVM IR bishengir-opt makes here
DIR/<signature id>/summary.json          kernels, fusion kind, block dim, UB buffers,
                                         HIVM vector ops by kind
DIR/summary.json                         every signature's summary
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler.backends.ascendnpu_ir.hfusion import hfusion_module
from lossgrad_compiler.backends.ascendnpu_ir.pipeline import AscendNpuIrTarget, hivm_text
from lossgrad_compiler.backends.ascendnpu_ir.summary import summarize
from lossgrad_compiler.backends.ascendnpu_ir.toolchain import version
from lossgrad_compiler.backends.build_cache import write_atomically
from lossgrad_compiler.frontend.signature import Signature

HFUSION_FILE = "kernel.hfusion.mlir"
HIVM_FILE = "kernel.hivm.mlir"
COMPILE_SCRIPT = "compile.sh"
SUMMARY_FILE = "summary.json"


def signature_summary(
    signature: Signature, function: func.FuncOp, hivm: str, target: AscendNpuIrTarget
) -> dict[str, Any]:
    """The JSON summary of one signature: its HFusion-form function and the HIVM IR."""
    summary = summarize(hivm)
    return {
        "signature": signature.id,
        "operator": signature.op_type,
        "attributes": signature.attributes,
        "element_types": [t.name for t in signature.types],
        "soc": target.soc_name,
        "device": target.device,
        "block_dim": target.block_dim,
        "compiler": version(),
        "pipeline": ["bishengir-opt", *target.opt_options],
        "compile_command": target.compile_command(HFUSION_FILE, "kernel.o"),
        "hfusion_ops": sum(op.name.startswith(("linalg.", "hfusion.")) for op in function.body.ops),
        **summary.as_json(),
    }


def write_outputs(
    signatures: Iterable[Signature], out_dir: Path, target: AscendNpuIrTarget
) -> list[dict[str, Any]]:
    """Write every signature's files under `out_dir`; their summaries."""
    summaries = []
    unique = list(dict.fromkeys(signatures))
    module = hfusion_module(unique)
    for signature, function in zip(unique, module.ops, strict=True):
        assert isinstance(function, func.FuncOp) and function.sym_name.data == signature.id
        hfusion = str(ModuleOp([function.clone()]))
        hivm = hivm_text(hfusion, target)
        summary = signature_summary(signature, function, hivm, target)
        folder = out_dir / signature.id
        folder.mkdir(parents=True, exist_ok=True)
        script = (
            "#!/bin/sh\n# Turns the HFusion form into an Ascend kernel binary. bishengir-compile\n"
            "# runs CANN's hivmc last: it needs the CANN toolkit on PATH.\nset -e\n"
            f'cd "$(dirname "$0")"\n{summary["compile_command"]}\n'
        )
        for name, text in (
            (HFUSION_FILE, hfusion),
            (HIVM_FILE, hivm),
            (COMPILE_SCRIPT, script),
            (SUMMARY_FILE, json.dumps(summary, indent=2) + "\n"),
        ):
            write_atomically(folder / name, text.encode("utf-8"))
        (folder / COMPILE_SCRIPT).chmod(0o755)
        summaries.append(summary)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(out_dir / SUMMARY_FILE, (json.dumps(summaries, indent=2) + "\n").encode())
    return summaries
