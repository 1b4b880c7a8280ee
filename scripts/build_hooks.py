"""setuptools commands for lossgrad_compiler's sdist and wheel (pyproject.toml's
[tool.setuptools.cmdclass]; setuptools loads this file by path, so it imports nothing of the
project at module level).

* sdist: carries the ONNX Runtime headers in third_party/onnxruntime (fetched first by
  fetch_ort_headers.sh when missing), so a wheel built from the sdist needs no network.
* build_py (wheel builds, not editable installs): adds the ORT C API headers and their
  license text as package data (backends/ort/onnxruntime/), and the prebuilt kernel
  libraries (backends/ort/prebuilt/), printed by the package being built and compiled once
  per x86-64 level through the kernel build cache ($LOSSGRAD_CACHE_DIR: an unchanged source,
  compiler and flags is a copy).
* bdist_wheel: a wheel with prebuilt libraries is a platform wheel, `py3-none-<platform>`
  (the libraries are loaded by ONNX Runtime, not by Python, so no Python or ABI tag). The
  platform is the build machine's (linux_x86_64): the libraries link libstdc++ as the JIT
  build does, so a wheel for PyPI is built in a manylinux container and checked by
  auditwheel, which this project does not do.

LOSSGRAD_PREBUILT=0 builds a pure wheel without the prebuilt libraries (as does a machine
that is not x86-64); the headers are shipped either way."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.errors import SetupError

ROOT = Path(__file__).resolve().parents[1]
FETCH_SCRIPT = ROOT / "scripts" / "fetch_ort_headers.sh"
THIRD_PARTY = ROOT / "third_party" / "onnxruntime"
ORT_PACKAGE = Path("lossgrad_compiler", "backends", "ort")
# The C API headers (the kernels include only the first); the C++ wrappers are not shipped.
C_HEADERS = (
    "onnxruntime_c_api.h",
    "onnxruntime_run_options_config_keys.h",
    "onnxruntime_session_options_config_keys.h",
)
ENV_PREBUILT = "LOSSGRAD_PREBUILT"

PREBUILD = """
import pathlib, sys
import lossgrad_compiler
from lossgrad_compiler.backends.ort.build import toolchain
from lossgrad_compiler.targets.ort_library import kernel_library_source
from lossgrad_compiler.backends.ort.prebuilt import build_prebuilt

build_lib = pathlib.Path(sys.argv[1]).resolve()
assert pathlib.Path(lossgrad_compiler.__file__).resolve().is_relative_to(build_lib), (
    f"building the prebuilt library from {lossgrad_compiler.__file__}, not {build_lib}"
)
for path in build_prebuilt(kernel_library_source(), pathlib.Path(sys.argv[2]), toolchain()):
    print(f"prebuilt: {path.name}")
"""


def pinned_headers() -> str:
    """`<package> <version>` of the headers fetch_ort_headers.sh fetches (its VERSION file)."""
    text = FETCH_SCRIPT.read_text()
    package = re.search(r"^PKG=(\S+)", text, re.MULTILINE)
    version = re.search(r"^VERSION=(\S+)", text, re.MULTILINE)
    if not (package and version):
        raise SetupError(f"{FETCH_SCRIPT} names no PKG= and VERSION=")
    return f"{package.group(1)} {version.group(1)}"


def ensure_headers() -> Path:
    """third_party/onnxruntime, fetched by the script when missing, checked to be the
    package and version the script pins (the script checks the .deb's SHA-256)."""
    if not (THIRD_PARTY / "include" / C_HEADERS[0]).is_file():
        done = subprocess.run(
            ["sh", str(FETCH_SCRIPT), str(THIRD_PARTY)], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SetupError(
                f"fetching the ONNX Runtime headers failed ({FETCH_SCRIPT.name}): "
                f"{done.stderr.strip()[-500:]}"
            )
    found = (THIRD_PARTY / "VERSION").read_text().strip()
    if found != pinned_headers():
        raise SetupError(
            f"{THIRD_PARTY} holds {found}, the build wants {pinned_headers()}: remove it "
            f"and build again"
        )
    return THIRD_PARTY


def prebuilt_wanted() -> bool:
    machine = platform.machine().lower() in ("x86_64", "amd64")
    return machine and os.environ.get(ENV_PREBUILT, "1") not in ("0", "")


class BuildPy(build_py):
    """build_py plus the ORT headers and the prebuilt kernel libraries."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # a checkout finds third_party/ and builds the JIT library
            return
        package = Path(self.build_lib) / ORT_PACKAGE
        headers = ensure_headers()
        shipped = package / "onnxruntime"
        (shipped / "include").mkdir(parents=True, exist_ok=True)
        for name in C_HEADERS:
            shutil.copyfile(headers / "include" / name, shipped / "include" / name)
        shutil.copyfile(headers / "COPYRIGHT.debian", shipped / "COPYRIGHT")
        shutil.copyfile(headers / "VERSION", shipped / "VERSION")
        if prebuilt_wanted():
            self._build_prebuilt(package / "prebuilt", shipped / "include")

    def _build_prebuilt(self, destination: Path, include: Path) -> None:
        build_lib = Path(self.build_lib).resolve()
        env = {**os.environ, "LOSSGRAD_ORT_INCLUDE": str(include.resolve())}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(build_lib), env.get("PYTHONPATH")]))
        env.pop("LOSSGRAD_ORT_MARCH", None)
        print("building the prebuilt kernel libraries (one per x86-64 level; cached)", flush=True)
        done = subprocess.run(
            [sys.executable, "-c", PREBUILD, str(build_lib), str(destination.resolve())],
            cwd=build_lib,  # not the source tree, whose folders are not the installed layout
            env=env,
            text=True,
            capture_output=True,
        )
        print(done.stdout + done.stderr, end="", flush=True)
        if done.returncode != 0:
            raise SetupError(
                f"building the prebuilt kernel libraries failed (needs a C++ compiler; "
                f"{ENV_PREBUILT}=0 builds a wheel without them)"
            )


class Sdist(sdist):
    """sdist that first makes sure third_party/onnxruntime is there to be carried."""

    def run(self) -> None:
        ensure_headers()
        super().run()


class BdistWheel(bdist_wheel):
    """A platform wheel when it carries the prebuilt libraries, `py3-none-<platform>`."""

    def finalize_options(self) -> None:
        if prebuilt_wanted():  # installs into platlib, as a wheel with compiled code does
            self.distribution.has_ext_modules = lambda: True
        super().finalize_options()

    def get_tag(self) -> tuple[str, str, str]:
        if self.root_is_pure:
            return super().get_tag()
        return "py3", "none", super().get_tag()[2]
