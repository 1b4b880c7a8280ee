"""ONNX → lossgrad IR: find the ai.lossgrad nodes of a model (also in subgraphs and
model-local functions), type and validate them, and group them by signature; each signature
becomes one small level-1 function."""

from lossgrad_compiler.frontend.importer import ImportedModel, Site, check_node, import_model
from lossgrad_compiler.frontend.ir import lossgrad_module, signature_function
from lossgrad_compiler.frontend.lowering import LoweringForm, lower_signatures
from lossgrad_compiler.frontend.signature import Signature, signature_of

__all__ = [
    "ImportedModel",
    "LoweringForm",
    "Signature",
    "Site",
    "check_node",
    "import_model",
    "lossgrad_module",
    "lower_signatures",
    "signature_function",
    "signature_of",
]
