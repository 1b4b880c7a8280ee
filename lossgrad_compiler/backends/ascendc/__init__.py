"""The Ascend C backend: level-2 IR → CANN custom-operator projects, and a CPU emulation
that compiles and runs them (emulation.py; `lossgrad_compiler.evaluation.ascendc.emulate` runs
one call with reference.evaluate's call shape).

    emit_project(module, out_dir, soc="ascend910b") -> list[Path]
    emitted_files(module, soc="ascend910b") -> dict[str, str]   (the same files, in memory)

The pipeline: `convert-linalg-to-ascendc` (the tile-level IR of dialects/ascendc/),
`ascendc-plan-buffers` (UB placement and tile length), then the printers in this package.
Both functions import their module on first call (xDSL and the printers are not needed to
import the package); no submodule is named like them, because importing a submodule sets
the package attribute of its name and would replace the function.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


def emit_project(module: ModuleOp, out_dir: Path | str, soc: str = "ascend910b") -> list[Path]:
    """One CANN custom-operator project per level-2 function (see project.py)."""
    # deferred: the xDSL pipeline (passes, dialects, printers) loads only when it is used
    from lossgrad_compiler.backends.ascendc.project import emit_project as emit

    return emit(module, out_dir, soc)


def emitted_files(module: ModuleOp, soc: str = "ascend910b") -> dict[str, str]:
    """The files emit_project writes, by path relative to its output directory."""
    # deferred: the xDSL pipeline (passes, dialects, printers) loads only when it is used
    from lossgrad_compiler.backends.ascendc.project import emitted_files as emitted

    return emitted(module, soc)


EXECUTABLE_FILES = ("build.sh",)
"""Project files written with mode 755 (project.py's EXECUTABLE_FILES)."""

__all__ = ["EXECUTABLE_FILES", "emit_project", "emitted_files"]
