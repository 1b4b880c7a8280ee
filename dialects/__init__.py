"""The project's xDSL dialects (`lossgrad`, `ascendc`, and `hfusion`/`hacc` of the HFusion
form), one package or module each.

Installed as `lossgrad_compiler.dialects`. `DIALECTS` names each by reference;
lossgrad_compiler/universe.py assembles it with the passes and lossgrad-opt's outputs."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect

from lossgrad_compiler.lazy_factories import factories

DIALECTS: dict[str, str] = {
    "lossgrad": "lossgrad_compiler.dialects.lossgrad:Lossgrad",
    "ascendc": "lossgrad_compiler.dialects.ascendc:Ascendc",
    "hfusion": "lossgrad_compiler.dialects.hfusion:Hfusion",
    "hacc": "lossgrad_compiler.dialects.hfusion:Hacc",
}

EAGER_DIALECTS: tuple[str, ...] = ("hfusion",)
"""Dialects whose ops carry another dialect's prefix (`linalg.elemwise_binary`): a context
must load them before parsing, since xDSL looks a name up by its prefix."""


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Dialect name → lazy factory, as xdsl.dialects.get_all_dialects does upstream."""
    return factories(DIALECTS)
