"""Fusion of decomposed loss gradients: standard-ONNX subgraphs that compute
KlDivBackward, KlDivTargetBackward or SmoothL1LossBackward become one ai.lossgrad node.

    fused, report = lossgrad_compiler.fuse(model)
"""

from lossgrad_compiler.fusion.fuser import fuse
from lossgrad_compiler.fusion.report import Fused, FusionReport, LeftAlone

__all__ = ["Fused", "FusionReport", "LeftAlone", "fuse"]
