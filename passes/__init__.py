"""The project's passes, one module per pass named after it (`lower-lossgrad` →
lower_lossgrad.py).

Installed as `lossgrad_compiler.passes`. `PASSES` names each by reference;
lossgrad_compiler/universe.py assembles it with the dialects and lossgrad-opt's outputs."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass

from lossgrad_compiler.lazy_factories import factories

PASSES: dict[str, str] = {
    "lower-lossgrad": "lossgrad_compiler.passes.lower_lossgrad:LowerLossgradPass",
    "convert-linalg-to-ascendc": (
        "lossgrad_compiler.passes.convert_linalg_to_ascendc:ConvertLinalgToAscendcPass"
    ),
    "ascendc-plan-buffers": "lossgrad_compiler.passes.ascendc_plan_buffers:AscendcPlanBuffersPass",
    "convert-linalg-to-hfusion": (
        "lossgrad_compiler.passes.convert_linalg_to_hfusion:ConvertLinalgToHfusionPass"
    ),
}


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name → lazy factory, as xdsl.transforms.get_all_passes does upstream."""
    return factories(PASSES)
