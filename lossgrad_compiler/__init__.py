"""lossgrad_compiler: the loss-gradient operators of CANN's aclnn library (the table in
`spec.OPERATORS`) as ONNX custom operators and an xDSL dialect, lowered to level 2 (linalg
on tensors) and compiled to standard ONNX, native ONNX Runtime kernels, Ascend C, IREE and
AscendNPU IR; `fuse` turns PyTorch's exported gradients back into them."""

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
