"""The first step on the device: the carried wheels that its Python lacks, installed into a
scratch folder put first on sys.path (the device has no registry, and its own packages stay
as they are). Standard library only: it runs before numpy's companions are importable."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

EXACT = {"iree_base_runtime"}
"""Distributions installed whenever the interpreter's version differs from the wheel's: a
module runs on the runtime of the release that compiled it. Any other wheel is installed
only where its distribution is missing."""


def wanted(wheel: Path) -> bool:
    """Whether this interpreter needs the wheel (its file name: dist-version-...)."""
    dist, version = wheel.name.split("-")[:2]
    try:
        installed = metadata.version(dist)
    except metadata.PackageNotFoundError:
        return True
    return dist.lower() in EXACT and installed != version


def install_missing(bundle: Path, site: Path) -> list[str]:
    """Install the bundle's wheels this interpreter needs into `site`; their names."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    needed = [bundle / w for w in manifest["wheels"] if wanted(bundle / w)]
    if not needed:
        return []
    site.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps"]
    command += ["--no-compile", "--upgrade", "--target", str(site), *map(str, needed)]
    subprocess.run(command, check=True)
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    return [w.name for w in needed]
