"""Signatures → level-2 IR: the one lowering that the driver and every backend start from,
below both so that backends need not import the driver."""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler.context import make_context
from lossgrad_compiler.frontend.ir import lossgrad_module
from lossgrad_compiler.frontend.signature import Signature
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass


def lower_signatures(
    signatures: Iterable[Signature], *, runtime_parameters: bool = False
) -> ModuleOp:
    """One level-2 function per signature, named by its id and marked with its operator
    (docs/level2.md); `runtime_parameters` gives the form whose n and beta are arguments."""
    module = lossgrad_module(signatures)
    LowerLossgradPass(runtime_parameters=runtime_parameters).apply(make_context(), module)
    return module
