"""The project's xDSL dialects (`lossgrad`, `ascendc`), one module each.

Installed as `lossgrad_compiler.dialects`. The names are registered in
lossgrad_compiler/universe.py (the one registration table)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Dialect name → lazy factory, as xdsl.dialects.get_all_dialects does upstream."""
    from lossgrad_compiler.universe import DIALECTS, factories

    return factories(DIALECTS)
