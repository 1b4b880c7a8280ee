"""lossgrad_compiler: KlDivBackward, KlDivTargetBackward and SmoothL1LossBackward as ONNX
custom operators and an xDSL dialect, lowered to elementwise primitives and compiled to
standard ONNX, native ONNX Runtime kernels and Ascend C."""

from typing import Any

from lossgrad_compiler.errors import LossGradError

__version__ = "0.1.0"

__all__ = ["LossGradError", "__version__", "compile_model", "fuse"]


def __getattr__(name: str) -> Any:
    """`compile_model` and `fuse` are imported on first use: the compiler pulls in xDSL, which
    plain users of the spec or the reference do not need."""
    if name == "compile_model":
        # defers xDSL, which plain users of the spec or the reference do not need
        from lossgrad_compiler.driver import compile_model

        return compile_model
    if name == "fuse":
        # deferred like compile_model: users of the spec or the reference need no fusion
        from lossgrad_compiler.fusion import fuse

        return fuse
    raise AttributeError(f"module 'lossgrad_compiler' has no attribute {name!r}")
