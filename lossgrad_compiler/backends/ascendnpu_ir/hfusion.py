"""Signatures → the HFusion form: level 2 (`lower-lossgrad`) through
`convert-linalg-to-hfusion` and `cse`, one function per signature, named by its id."""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects.builtin import ModuleOp
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

from lossgrad_compiler.context import make_context
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import Signature
from lossgrad_compiler.passes.convert_linalg_to_hfusion import ConvertLinalgToHfusionPass


def hfusion_module(signatures: Iterable[Signature]) -> ModuleOp:
    """The HFusion form of `signatures` (each once), verified."""
    module = lower_signatures(dict.fromkeys(signatures))
    context = make_context()
    ConvertLinalgToHfusionPass().apply(context, module)
    CommonSubexpressionElimination().apply(context, module)
    module.verify()
    return module
