"""IREE's CUDA driver opens the NVIDIA driver library by the plain name `libcuda.so`
(iree/hal/drivers/cuda/cuda_dynamic_symbols.c), which only CUDA's development files
provide; a machine with just the driver has `libcuda.so.1`. Where the plain name does not
load, `link_folder` makes a folder whose `libcuda.so` points at the real library, and
scripts/device_check.sh puts it first on LD_LIBRARY_PATH before Python starts (the loader
reads that variable once, at start-up). Standard library only."""

from __future__ import annotations

import ctypes
import sys
import tempfile
from pathlib import Path

PLAIN = "libcuda.so"
VERSIONED = "libcuda.so.1"


def loads(name: str) -> bool:
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def loaded_file(name: str) -> Path | None:
    """The file the loader maps for `name` (a versioned library name), if it loads."""
    if not loads(name):
        return None
    stem = name.split(".so")[0] + ".so"
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and Path(fields[5]).name.startswith(stem):
            return Path(fields[5])
    return None


def link_folder(
    plain: str = PLAIN, versioned: str = VERSIONED, folder: Path | None = None
) -> Path | None:
    """A folder (`folder`, or a new scratch one) holding `plain` -> the file of `versioned`;
    None where `plain` loads as it is, or where `versioned` does not load either (no
    driver: a CPU run)."""
    if loads(plain):
        return None
    real = loaded_file(versioned)
    if real is None:
        return None
    folder = folder or Path(tempfile.mkdtemp(prefix="device-check-lib-"))
    (folder / plain).symlink_to(real)
    return folder


if __name__ == "__main__":
    found = link_folder()
    print(found or "", file=sys.stdout)
