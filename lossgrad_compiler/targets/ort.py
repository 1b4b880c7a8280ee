"""`--target ort`: the `functions` model, whose nodes the native ONNX Runtime kernel library
runs where it is registered, and that library, copied beside the model."""

from __future__ import annotations

from pathlib import Path

from lossgrad_compiler.targets.interface import Artifact, Compilation, Option, Produces, Target
from lossgrad_compiler.targets.onnx import onnx_model

LIBRARY = "kernel library"
"""The companion's role: "copied the kernel library (<which one>) to ..."."""


class Ort(Target):
    name = "ort"
    produces = Produces.MODEL
    description = "the functions model plus the native ONNX Runtime kernel library beside it"
    options = (
        Option(
            "mode",
            "the kernels replace the nodes of the functions model (its functions are the "
            "fallback where the library is not registered)",
            default="functions",
            choices=("functions",),
        ),
    )
    streamable = False
    stream_refusal = (
        "--target ort also writes the kernel library beside the model; give a file path"
    )

    def compile(self, compilation: Compilation) -> Artifact:
        try:  # defers the pipeline and the kernel build, which only this target needs
            from lossgrad_compiler.targets.ort_library import library_path
        except ImportError as err:
            raise self.unavailable(err) from None
        from lossgrad_compiler.backends.ort.prebuilt import describe  # deferred as above

        library = Path(library_path())
        artifact = onnx_model(compilation, "functions")
        artifact.companions = {LIBRARY: library}
        artifact.notes = {LIBRARY: describe(library)}  # prebuilt for a level, or built here
        artifact.hint = lambda copied: [
            "load it with: so = onnxruntime.SessionOptions(); "
            f"so.register_custom_ops_library('{copied[LIBRARY]}')"
        ]
        return artifact
