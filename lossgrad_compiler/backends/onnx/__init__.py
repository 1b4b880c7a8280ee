"""Level-2 IR → standard ONNX (ai.onnx opset 13 and later, 21 by default).

`translate_function` turns one level-2 function into ONNX nodes by rules registered per op
(no operator formula lives here); `model` puts the results into a model as model-local
functions or inline; `run` executes compiled models in ONNX Runtime."""

from lossgrad_compiler.backends.onnx.functions import apply_functions
from lossgrad_compiler.backends.onnx.inline import apply_inline
from lossgrad_compiler.backends.onnx.translator import TranslatedFunction, translate_function
from lossgrad_compiler.backends.onnx.types import Level2TranslationError

__all__ = [
    "Level2TranslationError",
    "TranslatedFunction",
    "apply_functions",
    "apply_inline",
    "translate_function",
]
