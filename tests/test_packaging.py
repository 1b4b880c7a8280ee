"""The installed package: a wheel built from the project holds every file the package's
folders hold (Python modules, the ORT kernel library's headers, the Ascend C emulator's
headers and sources, the kernel project templates), and building it is quiet (no setuptools
warnings about data folders it would take for packages)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.egg-info")


def _package_roots() -> dict[str, Path]:
    """Top-level install folder (as a path inside the wheel) -> its source folder."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dir = config.get("package-dir", {})
    roots = {}
    for package in config["packages"]:
        source = package_dir.get(package)
        if source is not None:
            roots[package.replace(".", "/")] = REPO / source
    return roots


def _source_files() -> set[str]:
    """Every file the packages' folders hold, as the wheel should name it."""
    files = set()
    for target, source in _package_roots().items():
        for path in source.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.add(f"{target}/{path.relative_to(source).as_posix()}")
    return files


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(the wheel, the build's output), built from a copy of the project (the working tree
    gets no build/ or egg-info), with this environment's setuptools when it has one."""
    work = tmp_path_factory.mktemp("wheel")
    project = work / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, project / name)
    for source in {p.relative_to(REPO).parts[0] for p in _package_roots().values()}:
        shutil.copytree(REPO / source, project / source, ignore=IGNORED)
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-w", str(work / "dist"),
         str(project)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PIP_NO_INPUT": "1"},
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    (wheel,) = (work / "dist").glob("lossgrad_compiler-*.whl")
    return wheel, output


def test_wheel_holds_every_file_of_the_package_folders(built_wheel: tuple[Path, str]) -> None:
    wheel, _ = built_wheel
    with zipfile.ZipFile(wheel) as archive:
        names = {n for n in archive.namelist() if ".dist-info/" not in n}
    expected = _source_files()
    assert names == expected, (sorted(expected - names), sorted(names - expected))


def test_wheel_holds_the_native_build_inputs(built_wheel: tuple[Path, str]) -> None:
    """The headers the kernel library and the emulator are built from are in the wheel."""
    wheel, _ = built_wheel
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    from lossgrad_compiler.backends.ort.library import RUNTIME_HEADERS

    for header in RUNTIME_HEADERS:
        assert f"lossgrad_compiler/backends/ort/cxx/{header}" in names
    emulator = "lossgrad_compiler/backends/ascendc/emulator/"
    assert f"{emulator}kernel_operator.h" in names
    assert f"{emulator}lossgrad_emu/runtime.cpp" in names
    assert any(n.startswith("lossgrad_compiler/backends/ascendc/templates/") for n in names)


def test_building_is_quiet(built_wheel: tuple[Path, str]) -> None:
    _, output = built_wheel
    for warning in ("Package would be ignored", "absent from the `packages` configuration"):
        assert warning not in output, output
    assert "SetuptoolsDeprecationWarning" not in output, output
