"""Every dialect, pass and target of lossgrad_compiler, by name: the one registration table.

`LOSSGRAD_UNIVERSE` is the `xdsl.universe` entry point (pyproject.toml), which makes the stock
`xdsl-opt` see our constructs; `lossgrad-opt`, `dialects.get_all_dialects()` and
`passes.get_all_passes()` read the same table. Each entry is imported only when it is first
used, so a name whose module is still being written does not break the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from xdsl.universe import Universe

DIALECTS: dict[str, str] = {
    "lossgrad": "lossgrad_compiler.dialects.lossgrad:Lossgrad",
    "ascendc": "lossgrad_compiler.dialects.ascendc:Ascendc",
}
PASSES: dict[str, str] = {
    "lower-lossgrad": "lossgrad_compiler.passes.lower_lossgrad:LowerLossgradPass",
    "convert-linalg-to-ascendc": (
        "lossgrad_compiler.passes.convert_linalg_to_ascendc:ConvertLinalgToAscendcPass"
    ),
    "ascendc-plan-buffers": "lossgrad_compiler.passes.ascendc_plan_buffers:AscendcPlanBuffersPass",
}
TARGETS: dict[str, str] = {
    # `-t ascendc`: the Ascend C emitter (a xdsl.utils.target.Target subclass).
    "ascendc": "lossgrad_compiler.backends.ascendc.target:AscendCTarget",
}


def lazy(reference: str) -> Callable[[], Any]:
    """A factory that imports `module:attribute` when called (xDSL's lazy-registry style)."""
    module_name, _, attribute = reference.partition(":")

    def load() -> Any:
        return getattr(importlib.import_module(module_name), attribute)

    load.__qualname__ = load.__name__ = f"load_{attribute}"
    return load


def factories(table: dict[str, str]) -> dict[str, Callable[[], Any]]:
    """name → lazy factory, for one of DIALECTS, PASSES, TARGETS."""
    return {name: lazy(reference) for name, reference in table.items()}


LOSSGRAD_UNIVERSE = Universe(
    all_dialects=factories(DIALECTS),
    all_passes=factories(PASSES),
    all_targets=factories(TARGETS),
)
