"""AscendNPU IR's compiler binaries (`bishengir-opt`, `bishengir-compile`), from the optional
extra `ascend` (the pip package `ascendnpu-ir`): where they are, and how they are run.

The wheel ships the binaries inside its package folder, not as console scripts, and may
install them without their executable bit; they are found through the package and the bit
is set where it is missing."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
from functools import cache
from pathlib import Path

EXTRA_HINT = "pip install 'lossgrad_compiler[ascend]'"
PACKAGE = "ascendnpuir"


class AscendNpuIrUnavailableError(RuntimeError):
    """The `ascendnpu-ir` package (AscendNPU IR's compiler) is not installed."""


class BishengirError(RuntimeError):
    """A bishengir tool failed: its diagnostics and the command line."""


@cache
def package_folder() -> Path:
    found = importlib.util.find_spec(PACKAGE)
    if found is None or not found.submodule_search_locations:
        raise AscendNpuIrUnavailableError(
            f"the ascendnpu-ir target needs AscendNPU IR's compiler (the Python package "
            f"'{PACKAGE}' is not installed); {EXTRA_HINT}"
        )
    return Path(next(iter(found.submodule_search_locations)))


def tool(name: str) -> Path:
    """The path of a bishengir binary of the installed package, executable."""
    path = package_folder() / "bin" / name
    if not path.is_file():
        raise AscendNpuIrUnavailableError(
            f"the installed '{PACKAGE}' package has no bin/{name}; reinstall it: {EXTRA_HINT}"
        )
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:
        try:
            path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError as err:
            raise AscendNpuIrUnavailableError(
                f"{path} is not executable and cannot be made so ({err.strerror or err})"
            ) from None
    return path


@cache
def version() -> str:
    """`bishengir-opt --version`'s first line: what a cached result was made with."""
    done = subprocess.run(
        [os.fspath(tool("bishengir-opt")), "--version"], capture_output=True, text=True, check=False
    )
    return (done.stdout.strip().splitlines() or ["unknown"])[0]


def run_opt(text: str, options: list[str]) -> str:
    """`bishengir-opt OPTIONS` on MLIR text; its output, or BishengirError."""
    command = [os.fspath(tool("bishengir-opt")), "-", *options]
    done = subprocess.run(command, input=text, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        diagnostics = done.stderr.strip() or "(no message)"
        if done.returncode < 0:
            diagnostics = f"killed by signal {-done.returncode}; {diagnostics[:2000]}"
        raise BishengirError(
            f"bishengir-opt failed (exit {done.returncode}): {diagnostics}\n"
            f"command: {' '.join(command)}"
        )
    return done.stdout
