"""`--target ascendc`: one CANN custom-operator project (msOpGen layout) per signature, and
`evaluate`, the CPU emulation of those projects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lossgrad_compiler.targets.interface import Artifact, Compilation, Option, Produces, Target

if TYPE_CHECKING:
    import numpy as np

DEFAULT_SOC = "ascend910b"  # dialects/ascendc/soc.py's DEFAULT_SOC, without importing xDSL
SOC = Option("soc", "the Ascend SoC", default=DEFAULT_SOC)


class AscendC(Target):
    name = "ascendc"
    produces = Produces.DIRECTORY
    description = "a CANN custom-operator project per signature"
    options = (SOC,)

    def compile(self, compilation: Compilation) -> Artifact:
        try:  # defers the Ascend C backend, which only this target needs
            from lossgrad_compiler.backends.ascendc import EXECUTABLE_FILES, emitted_files
        except ImportError as err:
            raise self.unavailable(err) from None
        soc = compilation.options["soc"]
        files = emitted_files(compilation.level2, soc)
        return Artifact(
            Produces.DIRECTORY,
            files={path: text.encode("utf-8") for path, text in files.items()},
            executables=frozenset(p for p in files if p.rsplit("/", 1)[-1] in EXECUTABLE_FILES),
            contents="the project",
            detail=f" ({soc})",
        )

    def evaluate(
        self,
        op_type: str,
        inputs: Mapping[str, Any],
        attrs: Mapping[str, Any] | None = None,
        soc: str = DEFAULT_SOC,
        block_dim: int | None = None,
    ) -> np.ndarray:
        """One call through the emulated project (evaluation.ascendc.emulate)."""
        # defers the emulation's build machinery, which only evaluation needs
        from lossgrad_compiler.evaluation.ascendc import emulate

        return emulate(op_type, inputs, attrs, soc=soc, block_dim=block_dim)
