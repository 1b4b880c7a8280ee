"""IR facts tests ask about: which lossgrad ops a module still holds."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler.context import parse_module


def lossgrad_ops(ir: ModuleOp | str) -> list[str]:
    """The lossgrad-dialect ops left in a module or in MLIR text (split at `// -----`).

    Lowered functions carry `lossgrad.op_type` attributes, so the text always mentions
    `lossgrad.`; only ops count."""
    modules = (
        [ir]
        if isinstance(ir, ModuleOp)
        else [parse_module(part) for part in ir.split("// -----") if part.strip()]
    )
    return [op.name for m in modules for op in m.walk() if op.name.startswith("lossgrad.")]
