"""The project's passes, one module per pass named after it (`lower-lossgrad` →
lower_lossgrad.py).

Installed as `lossgrad_compiler.passes`. The names are registered in
lossgrad_compiler/universe.py (the one registration table)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name → lazy factory, as xdsl.transforms.get_all_passes does upstream."""
    from lossgrad_compiler.universe import PASSES, factories

    return factories(PASSES)
