"""lossgrad_compiler: KlDivBackward, KlDivTargetBackward and SmoothL1LossBackward as ONNX
custom operators and an xDSL dialect, lowered to elementwise primitives and compiled to
standard ONNX, native ONNX Runtime kernels and Ascend C."""

from typing import Any

from lossgrad_compiler.errors import LossGradError

__all__ = ["LossGradError", "compile_model"]


def __getattr__(name: str) -> Any:
    """`compile_model` is imported on first use: it pulls in xDSL, which plain users of the
    spec or the reference do not need."""
    if name == "compile_model":
        # defers xDSL, which plain users of the spec or the reference do not need
        from lossgrad_compiler.driver import compile_model

        return compile_model
    raise AttributeError(f"module 'lossgrad_compiler' has no attribute {name!r}")
