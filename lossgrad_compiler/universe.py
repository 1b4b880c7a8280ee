"""Every dialect, pass and target of lossgrad_compiler, by name: the one registration table.

The dialect and pass tables live with their packages (dialects/, passes/), which list what
they hold without importing anything above them; this module adds the targets (backends)
and assembles the three.

`LOSSGRAD_UNIVERSE` is the `xdsl.universe` entry point (pyproject.toml), which makes the stock
`xdsl-opt` see our constructs; `lossgrad-opt`, `dialects.get_all_dialects()` and
`passes.get_all_passes()` read the same table. Each entry is imported only when it is first
used, so a name whose module is still being written does not break the others.
"""

from __future__ import annotations

from xdsl.universe import Universe

from lossgrad_compiler.dialects import DIALECTS
from lossgrad_compiler.passes import PASSES
from lossgrad_compiler.registry import factories, lazy

__all__ = ["DIALECTS", "LOSSGRAD_UNIVERSE", "PASSES", "TARGETS", "factories", "lazy"]

TARGETS: dict[str, str] = {
    # `-t ascendc`: the Ascend C emitter (a xdsl.utils.target.Target subclass).
    "ascendc": "lossgrad_compiler.backends.ascendc.target:AscendCTarget",
}


LOSSGRAD_UNIVERSE = Universe(
    all_dialects=factories(DIALECTS),
    all_passes=factories(PASSES),
    all_targets=factories(TARGETS),
)
