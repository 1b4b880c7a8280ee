"""Level-2 IR → standard ONNX (ai.onnx opset 13 and later, 21 by default).

`translate_function` turns one level-2 function into ONNX nodes, reading level 2 through
`lossgrad_compiler.level2` (no operator formula lives here); `apply_functions` and
`apply_inline` put the results into a model as model-local functions or inline. Running the
compiled models is `lossgrad_compiler.runtime`'s job."""

from lossgrad_compiler.backends.onnx.functions import apply_functions
from lossgrad_compiler.backends.onnx.inline import apply_inline
from lossgrad_compiler.backends.onnx.translator import TranslatedFunction, translate_function

__all__ = [
    "TranslatedFunction",
    "apply_functions",
    "apply_inline",
    "translate_function",
]
