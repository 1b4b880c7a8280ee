"""PyTorch training steps exported to ONNX with ai.lossgrad nodes where the losses'
gradients are (the optional extra `torch`: pip install 'lossgrad_compiler[torch]').

    model, report = export_training_step(step, (x, t), "step.onnx")
"""

from lossgrad_compiler.torch.export import SUPPORTED_TORCH, export_training_step

__all__ = ["SUPPORTED_TORCH", "export_training_step"]
