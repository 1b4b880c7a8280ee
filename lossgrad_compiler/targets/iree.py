"""`--target iree`: the whole model (ai.lossgrad nodes as level 2, standard nodes through
IREE's ONNX importer) as one IREE module, and `evaluate`, one call through IREE."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lossgrad_compiler.targets.interface import Artifact, Compilation, Option, Produces, Target

if TYPE_CHECKING:
    import numpy as np

BACKEND = Option(
    "backend",
    "what the IREE module runs on (hip is rocm)",
    default="llvm-cpu",
    choices=("llvm-cpu", "cuda", "rocm", "hip", "vulkan"),
    flag="--iree-backend",
)
ARCH = Option(
    "arch",
    "the CPU for llvm-cpu (default: host, this machine's; e.g. x86-64-v3 for modules to ship) "
    "or the GPU architecture (defaults: sm_80, gfx942, rdna3)",
    flag="--iree-arch",
)


class Iree(Target):
    name = "iree"
    produces = Produces.MODULE
    description = "the whole model as one IREE module (.vmfb)"
    options = (BACKEND, ARCH)
    extra = "iree"
    suffix = ".vmfb"

    def compile(self, compilation: Compilation) -> Artifact:
        try:  # defers IREE's compiler, which only this target needs
            from lossgrad_compiler.backends.iree import compile_whole_model
        except ImportError as err:
            raise self.unavailable(err) from None
        options = iree_options(compilation.options["backend"], compilation.options["arch"])
        vmfb, spliced = compile_whole_model(compilation.model, options, compilation.level2_of)
        lines = [f"function: {spliced.interface.text()}"]
        if spliced.interface.checks:  # e.g. the classification nodes' target range
            lines.append(
                f"value checks: {len(spliced.interface.checks)}, raised by "
                "lossgrad_compiler.runtime.iree.session from the module's extra results"
            )
        return Artifact(
            Produces.MODULE,
            data=vmfb,
            detail=f" ({options.backend})",
            lines=lines,
            extra=spliced,
        )

    def evaluate(
        self,
        op_type: str,
        inputs: Mapping[str, Any],
        attrs: Mapping[str, Any] | None = None,
        backend: str = "llvm-cpu",
        arch: str | None = None,
        device: str = "local-task",
    ) -> np.ndarray:
        """One call compiled and run by IREE (evaluation.iree.evaluate)."""
        # defers IREE and the pipeline, which only evaluation needs
        from lossgrad_compiler.evaluation.iree import evaluate

        return evaluate(op_type, inputs, attrs, device, iree_options(backend, arch))


def iree_options(backend: str, arch: str | None) -> Any:
    """The backend's IreeOptions for the target's options: `arch` is the CPU of llvm-cpu,
    else the GPU."""
    # defers IREE's compiler, which only this target needs
    from lossgrad_compiler.backends.iree import IreeOptions

    if backend == "llvm-cpu":
        return IreeOptions(backend, cpu=arch or "host")
    return IreeOptions(backend, gpu=arch)
