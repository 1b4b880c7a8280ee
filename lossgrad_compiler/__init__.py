"""lossgrad_compiler: KlDivBackward, KlDivTargetBackward and SmoothL1LossBackward as ONNX
custom operators and an xDSL dialect, lowered to elementwise primitives and compiled to
standard ONNX, native ONNX Runtime kernels and Ascend C."""

from lossgrad_compiler.errors import LossGradError

__all__ = ["LossGradError"]
