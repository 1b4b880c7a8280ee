"""The Python packages the device lacks, as wheels for its interpreter (CPython 3.12,
manylinux x86-64): iree-base-runtime of the compiler's own version (a module runs on the
runtime of the release that compiled it), and ml_dtypes (the runtime and reference.py need
it; the device's own is used when it has one). Downloaded here, installed there with
`pip install --no-index --target` into a scratch folder (install.py)."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

PYTHON_VERSION = "3.12"
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)
PACKAGES = ("iree-base-runtime", "ml_dtypes")


def pinned(package: str) -> str:
    """`package==version` of the copy installed here."""
    return f"{package}=={metadata.version(package)}"


def download(folder: Path, packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    """The wheels of `packages`, at the versions installed here, for the device's Python."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    command += ["--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp"]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    command += ["-d", str(folder), *(pinned(p) for p in packages)]
    subprocess.run(command, check=True)
    return sorted(folder.glob("*.whl"))
