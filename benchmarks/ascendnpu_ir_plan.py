"""AscendNPU IR's plan for the kernels of the static report (ascendc_report.py): what
bishengir-opt's HFusion and HIVM pipelines make of the same signature, and what the
compiler's own tiling function gives for N elements, run on this CPU. A module of that
report, not a script of its own: `.venv/bin/python benchmarks/ascendc_report.py` prints its
table where the extra `ascend` is installed.

* HIVM vector ops: the `hivm.hir.v*` ops of the device kernel, each applied once to every
  element of a tile (the counterpart of the Ascend C kernel's vector instructions per tile);
  casts are the `vcast` among them.
* tile: the elements of one UB tile, the tiling function's first value for N elements.
* blocks: how many of the SoC's vector cores the tiling function gives work for N.
* UB (est.): HFusion's auto-schedule splits the UB (192 KiB less 64 bytes) into as many
  tiles of the smallest element type as its liveness count of buffers says
  (PureElemwiseSchedule.cpp: tile = UB / smallest type / buffers, aligned down to 32 bytes),
  so the buffer count is the UB in tiles, rounded down, and the bytes in use are that count
  times the tile. The count is not printed by the compiler; this recovers it from the tile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendnpu_ir import AscendNpuIrSoc, hfusion_module, summarize
from lossgrad_compiler.backends.ascendnpu_ir.cpu_runner import runner_library
from lossgrad_compiler.backends.ascendnpu_ir.hivm import hivm_text
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import signature_of
from lossgrad_compiler.runtime.ascendnpu_ir import RunnerLibrary

UB_BYTES = 192 * 1024 - 64  # the auto-schedule's kUBMaxSizeInBits, in bytes


@dataclass(frozen=True)
class VendorPlan:
    vector_ops: int
    casts: int
    tile: int
    blocks: int
    smallest_bytes: int

    @property
    def buffers(self) -> int:
        return UB_BYTES // (self.tile * self.smallest_bytes)

    @property
    def ub_bytes(self) -> int:
        return self.buffers * self.tile * self.smallest_bytes


def vendor_plan(
    op_type: str, attrs: dict[str, Any], dtype: Any, scalar_g: bool, soc: str, elements: int
) -> VendorPlan:
    """The plan for the report's signature: 1-D operands, grad_output 0-d or full."""
    shapes = {"grad_output": () if scalar_g else (4,), "self": (4,), "target": (4,)}
    infos = {n: spec.TensorInfo(np.dtype(dtype), s) for n, s in shapes.items()}
    signature = signature_of(spec.validate(op_type, infos, attrs))
    chip = AscendNpuIrSoc(soc)
    level2 = lower_signatures([signature])
    (kernel, *_) = summarize(hivm_text(str(hfusion_module(level2)), chip)).kernels
    library = RunnerLibrary(runner_library(level2, chip))
    arrays = [
        np.zeros(() if scalar_g else (elements,), dtype),
        *(np.zeros((elements,), dtype) for _ in range(3)),
    ]
    tiling = library.tiling(signature.id, arrays)
    assert tiling is not None
    return VendorPlan(
        vector_ops=kernel.vector_op_count,
        casts=kernel.vector_ops.get("hivm.hir.vcast", 0),
        tile=int(tiling.values[0]),
        blocks=int(tiling.values[1]),
        smallest_bytes=np.dtype(dtype).itemsize,
    )
