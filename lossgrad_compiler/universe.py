"""Every dialect, pass and lossgrad-opt output of lossgrad_compiler, by name: the one
registration table of the xDSL tools.

The dialect and pass tables live with their packages (dialects/, passes/), which list what
they hold without importing anything above them; this module adds the outputs of `-t`
(xDSL calls them targets; here a target is a compilation target of `lossgrad-compile`,
lossgrad_compiler.targets) and assembles the three.

`LOSSGRAD_UNIVERSE` is the `xdsl.universe` entry point (pyproject.toml), which makes the stock
`xdsl-opt` see our constructs; `lossgrad-opt`, `dialects.get_all_dialects()` and
`passes.get_all_passes()` read the same table. Each entry is imported only when it is first
used, so a name whose module is still being written does not break the others.
"""

from __future__ import annotations

from xdsl.universe import Universe

from lossgrad_compiler.dialects import DIALECTS
from lossgrad_compiler.lazy_factories import factories, lazy
from lossgrad_compiler.passes import PASSES

__all__ = ["DIALECTS", "LOSSGRAD_UNIVERSE", "OPT_OUTPUTS", "PASSES", "factories", "lazy"]

OPT_OUTPUTS: dict[str, str] = {
    # `-t ascendc`: the Ascend C kernels (an xdsl.utils.target.Target subclass).
    "ascendc": "lossgrad_compiler.backends.ascendc.opt_output:AscendCOptOutput",
}


LOSSGRAD_UNIVERSE = Universe(
    all_dialects=factories(DIALECTS),
    all_passes=factories(PASSES),
    all_targets=factories(OPT_OUTPUTS),
)
