"""The Ascend SoCs the `ascendc` dialect is planned for: UB size, vector cores, and the
Select scratch.

The numbers and their public sources are in docs/ascend-c.md ("The SoC table"). The tiling
function reads the real values from the platform at run time (GetCoreMemSize,
GetCoreNumAiv); these are what `ascendc-plan-buffers` and the emulation assume for a named
SoC.
"""

from __future__ import annotations

from dataclasses import dataclass

from lossgrad_compiler.errors import InvalidArgumentError


@dataclass(frozen=True)
class Soc:
    name: str  # the AddConfig / ASCEND_COMPUTE_UNIT name
    ub_bytes: int  # unified buffer per vector core
    vector_cores: int  # AIV cores (GetCoreNumAiv)
    select_scratch: int  # UB the Select API keeps for itself in modes 1 and 2
    description: str


SOCS: dict[str, Soc] = {
    s.name: s
    for s in (
        Soc("ascend910b", 196608, 48, 8192, "Atlas A2 training series (910B1/B2: 48 AIV)"),
        Soc("ascend910b3", 196608, 40, 8192, "Atlas A2, 40-core parts (910B3/B4)"),
        Soc("ascend910_93", 196608, 48, 8192, "Atlas A3 (910_93: 48 AIV per die)"),
        Soc("ascend950", 253952, 64, 8192, "Ascend 950 (UB from its ini; core count varies)"),
    )
}
DEFAULT_SOC = "ascend910b"


def soc(name: str) -> Soc:
    """The named SoC, or InvalidArgumentError listing the known ones."""
    try:
        return SOCS[name]
    except KeyError:
        known = ", ".join(SOCS)
        raise InvalidArgumentError(
            "ascendc", "soc", f"must be one of {known}, got {name!r}"
        ) from None
