"""Level 2 → the HFusion form: `convert-linalg-to-hfusion` and `cse` on a copy of the
level-2 module (one function per signature, named by its id) the pipeline hands down."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

from lossgrad_compiler.context import make_context
from lossgrad_compiler.passes.convert_linalg_to_hfusion import ConvertLinalgToHfusionPass


def hfusion_module(level2: ModuleOp) -> ModuleOp:
    """The HFusion form of a level-2 module (left unchanged), verified."""
    module = level2.clone()
    context = make_context()
    ConvertLinalgToHfusionPass().apply(context, module)
    CommonSubexpressionElimination().apply(context, module)
    module.verify()
    return module
