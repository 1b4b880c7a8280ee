"""Level 2 → the HFusion form: `convert-linalg-to-hfusion` and `cse` on a copy of the
level-2 module (one function per signature, named by its id) the pipeline hands down."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

from lossgrad_compiler.context import make_context
from lossgrad_compiler.dialects import hfusion as hf
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.passes.convert_linalg_to_hfusion import ConvertLinalgToHfusionPass


def hfusion_module(level2: ModuleOp) -> ModuleOp:
    """The HFusion form of a level-2 module (left unchanged), verified."""
    module = level2.clone()
    context = make_context()
    ConvertLinalgToHfusionPass().apply(context, module)
    CommonSubexpressionElimination().apply(context, module)
    module.verify()
    for function in module.ops:
        assert isinstance(function, func.FuncOp)
        _refuse_unit_dimensions_beside_a_position(function)
    return module


def _refuse_unit_dimensions_beside_a_position(function: func.FuncOp) -> None:
    """AscendNPU IR 1.2.0 drops a static size-1 dimension of an iteration space and then
    rejects the class position broadcast over it ("'linalg.index' op expected dim (1) to be
    lower than the number of loops (1) of the enclosing LinalgOp"), as a 1-d arange
    broadcast or as one arange over every dimension. Such a signature is refused before
    bishengir runs; its dynamic signature (what `lossgrad-compile` and the CPU runner
    compile) has no static 1 and compiles."""
    for op in function.walk():
        if not isinstance(op, hf.ArangeOp):
            continue
        for use in op.result.uses:
            out = use.operation.results[0].type if use.operation.results else None
            if isinstance(out, TensorType) and 1 in out.get_shape() and len(out.get_shape()) > 1:
                raise UnsupportedByBackendError(
                    function.sym_name.data,
                    "static size-1 dimension",
                    "AscendNPU IR 1.2.0 cannot compile a class position (hfusion.arange) "
                    f"broadcast over {out} (it drops the static 1 and rejects the "
                    "linalg.index left over); compile the dynamic signature",
                )
