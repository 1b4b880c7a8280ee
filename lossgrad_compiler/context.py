"""The xDSL context every layer uses: the upstream dialects of level-2 IR plus `lossgrad`, and
the HFusion form's `hfusion` and `hacc` (whose `linalg.elemwise_*` ops xDSL can only find
once their dialect is loaded: see lossgrad_compiler/dialects/hfusion).

Loading eagerly (rather than registering lazily) keeps `parse_module` free of surprises: a
module that parses here has every op class it names already defined.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.dialects.linalg import Linalg
from xdsl.dialects.math import Math
from xdsl.dialects.tensor import Tensor
from xdsl.parser import Parser

from lossgrad_compiler.dialects.hfusion import Hacc, Hfusion
from lossgrad_compiler.dialects.lossgrad import Lossgrad

_DIALECTS = (Builtin, Func, Arith, Math, Tensor, Linalg, Lossgrad, Hfusion, Hacc)


def make_context(*, allow_unregistered: bool = False) -> Context:
    """A fresh context with builtin, func, arith, math, tensor, linalg, lossgrad, hfusion and
    hacc loaded."""
    ctx = Context(allow_unregistered=allow_unregistered)
    for dialect in _DIALECTS:
        ctx.load_dialect(dialect)
    return ctx


def parse_module(text: str, ctx: Context | None = None, *, verify: bool = True) -> ModuleOp:
    """Parse MLIR text (custom or generic form) into a module, verified unless told not to.

    Raises xDSL's ParseError / VerifyException, whose messages point at the source."""
    module = Parser(ctx or make_context(), text).parse_module()
    if verify:
        module.verify()
    return module
