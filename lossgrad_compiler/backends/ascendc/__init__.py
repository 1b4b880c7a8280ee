"""The Ascend C backend: level-2 IR → CANN custom-operator projects, and a CPU emulation
that compiles and runs them.

    emit_project(module, out_dir, soc="ascend910b") -> list[Path]
    emulate(op_type, inputs, attrs, soc="ascend910b", block_dim=None) -> np.ndarray

The pipeline: `convert-linalg-to-ascendc` (the tile-level IR of dialects/ascendc/),
`ascendc-plan-buffers` (UB placement and tile length), then the printers in this package.
Both functions import their module on first call (xDSL and the printers are not needed to
import the package); no submodule is named like them, because importing a submodule sets
the package attribute of its name and would replace the function.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from xdsl.dialects.builtin import ModuleOp


def emit_project(module: ModuleOp, out_dir: Path | str, soc: str = "ascend910b") -> list[Path]:
    """One CANN custom-operator project per level-2 function (see project.py)."""
    # deferred: the xDSL pipeline (passes, dialects, printers) loads only when it is used
    from lossgrad_compiler.backends.ascendc.project import emit_project as emit

    return emit(module, out_dir, soc)


def emulate(
    op_type: str,
    inputs: dict[str, np.ndarray],
    attrs: dict[str, Any] | None = None,
    soc: str = "ascend910b",
    block_dim: int | None = None,
) -> np.ndarray:
    """Run one call through the emitted project on the CPU emulation (see emulation.py)."""
    # deferred: the xDSL pipeline and the emulation's build machinery load only when used
    from lossgrad_compiler.backends.ascendc.emulation import emulate as run

    return run(op_type, inputs, attrs, soc=soc, block_dim=block_dim)


__all__ = ["emit_project", "emulate"]
