"""Ascend through Huawei's own MLIR compiler, AscendNPU IR (bishengir): level 2 →
`convert-linalg-to-hfusion` → the HFusion pipeline (fusion, auto-schedule, tiling for the
Unified Buffer, kernel outlining) → HIVM (Ascend vector instructions), run with the
compiler's `bishengir-opt`. The last step to a kernel binary, `bishengir-compile`, runs
CANN's `hivmc`; each signature's folder holds that command for machines with CANN.

AscendNPU IR is the optional extra `ascend` (`pip install 'lossgrad_compiler[ascend]'`)."""

from lossgrad_compiler.backends.ascendnpu_ir.hfusion import hfusion_module
from lossgrad_compiler.backends.ascendnpu_ir.hivm import (
    BISHENGIR_DEVICES,
    AscendNpuIrSoc,
    hivm_text,
)
from lossgrad_compiler.backends.ascendnpu_ir.outputs import (
    Outputs,
    signature_outputs,
    signature_summary,
    write_outputs,
)
from lossgrad_compiler.backends.ascendnpu_ir.summary import HivmSummary, Kernel, summarize
from lossgrad_compiler.backends.ascendnpu_ir.toolchain import (
    EXTRA_HINT,
    AscendNpuIrUnavailableError,
    BishengirError,
    tool,
)

__all__ = [
    "BISHENGIR_DEVICES",
    "EXTRA_HINT",
    "AscendNpuIrSoc",
    "AscendNpuIrUnavailableError",
    "BishengirError",
    "HivmSummary",
    "Kernel",
    "Outputs",
    "hfusion_module",
    "hivm_text",
    "signature_outputs",
    "signature_summary",
    "summarize",
    "tool",
    "write_outputs",
]
