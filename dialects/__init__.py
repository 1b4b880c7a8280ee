"""The project's xDSL dialects (`lossgrad`, `ascendc`), one module each.

Installed as `lossgrad_compiler.dialects`. `DIALECTS` names each by reference;
lossgrad_compiler/universe.py assembles it with the passes and targets."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect

from lossgrad_compiler.registry import factories

DIALECTS: dict[str, str] = {
    "lossgrad": "lossgrad_compiler.dialects.lossgrad:Lossgrad",
    "ascendc": "lossgrad_compiler.dialects.ascendc:Ascendc",
}


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Dialect name → lazy factory, as xdsl.dialects.get_all_dialects does upstream."""
    return factories(DIALECTS)
