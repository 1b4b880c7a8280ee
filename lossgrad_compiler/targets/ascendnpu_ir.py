"""`--target ascendnpu-ir`: per signature, the HFusion form, the HIVM IR AscendNPU IR's
bishengir-opt makes of it, the bishengir-compile command and a summary; `evaluate` runs
the scheduled kernel on this CPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lossgrad_compiler.targets.ascendc import SOC
from lossgrad_compiler.targets.interface import Artifact, Compilation, Produces, Target

if TYPE_CHECKING:
    import numpy as np


class AscendNpuIr(Target):
    name = "ascendnpu-ir"
    produces = Produces.DIRECTORY
    description = (
        "per signature, the HFusion form, its HIVM IR from AscendNPU IR's bishengir-opt and "
        "the bishengir-compile command"
    )
    options = (SOC,)
    extra = "ascend"

    def compile(self, compilation: Compilation) -> Artifact:
        try:  # defers the AscendNPU IR backend, which only this target needs
            from lossgrad_compiler.backends.ascendnpu_ir import (
                AscendNpuIrSoc,
                signature_outputs,
                tool,
            )
        except ImportError as err:
            raise self.unavailable(err) from None
        soc = AscendNpuIrSoc(compilation.options["soc"])
        tool("bishengir-opt")  # before any work: one line naming the extra if it is missing
        outputs = signature_outputs(compilation.level2, soc)
        kernels = sum(len(s["kernels"]) for s in outputs.summaries)
        vector_ops = sum(k["vector_op_count"] for s in outputs.summaries for k in s["kernels"])
        return Artifact(
            Produces.DIRECTORY,
            files=outputs.files,
            executables=outputs.executables,
            contents="the HFusion form, HIVM IR, bishengir-compile command and summary of "
            "each signature",
            detail=f" ({soc.soc_name}, {soc.device}, block dim {soc.block_dim})",
            lines=[
                f"bishengir-opt outlined {kernels} device kernels with {vector_ops} HIVM vector ops"
            ],
            extra=outputs.summaries,
        )

    def evaluate(
        self,
        op_type: str,
        inputs: Mapping[str, Any],
        attrs: Mapping[str, Any] | None = None,
        soc: str = "ascend910b",
        schedule: bool = True,
    ) -> np.ndarray:
        """One call through the scheduled kernel on this CPU (evaluation.ascendnpu_ir)."""
        # defers AscendNPU IR, which only evaluation needs
        from lossgrad_compiler.backends.ascendnpu_ir import AscendNpuIrSoc
        from lossgrad_compiler.evaluation.ascendnpu_ir import evaluate

        return evaluate(op_type, inputs, attrs, AscendNpuIrSoc(soc), schedule=schedule)
