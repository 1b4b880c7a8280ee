"""What is run on the HFusion form: `bishengir-opt`'s HFusion and HIVM pipelines here, and
the `bishengir-compile` command that makes a kernel binary where CANN (with `hivmc`) is
installed, for an Ascend SoC of the project's SoC table."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from lossgrad_compiler.backends.ascendnpu_ir.toolchain import run_opt
from lossgrad_compiler.dialects.ascendc.soc import soc
from lossgrad_compiler.errors import UnsupportedByBackendError

BISHENGIR_DEVICES: dict[str, str] = {
    "ascend910b": "Ascend910B1",
    "ascend910b3": "Ascend910B3",
    "ascend910_93": "Ascend910_9391",
}
"""bishengir's `--target` (a device name) for each SoC of dialects/ascendc/soc.py it covers.
Ascend 950 has its own binaries (`bishengir-opt-a5`), which the ascendnpu-ir target does not
drive."""


@dataclass(frozen=True)
class AscendNpuIrSoc:
    """An SoC of the project's table that bishengir compiles for: the block dim is its
    vector core count."""

    soc_name: str = "ascend910b"

    def __post_init__(self) -> None:
        if self.soc_name not in BISHENGIR_DEVICES:
            known = ", ".join(BISHENGIR_DEVICES)
            raise UnsupportedByBackendError(
                "ascendnpu-ir",
                "soc",
                f"AscendNPU IR's bishengir-opt targets {known}; {self.soc_name!r} is not one "
                "of them (Ascend 950 needs the separate *-a5 tools)",
            )

    @property
    def device(self) -> str:
        return BISHENGIR_DEVICES[self.soc_name]

    @property
    def block_dim(self) -> int:
        return soc(self.soc_name).vector_cores

    @property
    def hfusion_options(self) -> list[str]:
        """HFusion's fusion, auto-schedule, tiling and kernel outlining."""
        return [f"--lower-hfusion-pipeline=block-dim={self.block_dim}"]

    @property
    def opt_options(self) -> list[str]:
        """The HFusion stage, then HIVM."""
        return [*self.hfusion_options, "--convert-to-hivm-pipeline"]

    def compile_command(self, source: str, output: str) -> str:
        """The `bishengir-compile` command that turns the HFusion form into a kernel binary
        (it runs CANN's `hivmc` last, so it needs CANN)."""
        words = [
            "bishengir-compile",
            source,
            "--enable-hfusion-compile=true",
            "--enable-hivm-compile=true",
            f"--target={self.device}",
            f"--block-dim={self.block_dim}",
            "-o",
            output,
        ]
        return shlex.join(words)


def hivm_text(hfusion_text: str, soc: AscendNpuIrSoc) -> str:
    """The HIVM IR `bishengir-opt` makes of the HFusion form."""
    return run_opt(hfusion_text, soc.opt_options)
