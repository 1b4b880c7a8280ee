"""The released package: `python -m build` makes an sdist and a platform wheel from it; the
wheel holds every file of the package folders plus what the build adds (the ONNX Runtime C
API headers with their license text, the prebuilt kernel libraries with their manifest);
a wheel built straight from the project holds the same files; twine checks both; the
metadata gives the version, license and classifiers; the build is quiet (no setuptools
warnings about data folders it would take for packages)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import lossgrad_compiler
from lossgrad_compiler.backends.ort.build import NativeUnavailableError, find_compiler
from lossgrad_compiler.backends.ort.prebuilt import LEVELS, PROBE_NAME, library_name
from tests.helpers import dists

REPO = dists.REPO
ORT = "lossgrad_compiler/backends/ort"
# What the wheel build adds to the package folders (scripts/build_hooks.py).
GENERATED = {
    f"{ORT}/onnxruntime/include/onnxruntime_c_api.h",
    f"{ORT}/onnxruntime/include/onnxruntime_run_options_config_keys.h",
    f"{ORT}/onnxruntime/include/onnxruntime_session_options_config_keys.h",
    f"{ORT}/onnxruntime/COPYRIGHT",
    f"{ORT}/onnxruntime/VERSION",
    f"{ORT}/prebuilt/manifest.json",
    f"{ORT}/prebuilt/BUILD_INFO",
    f"{ORT}/prebuilt/{PROBE_NAME}",
    *(f"{ORT}/prebuilt/{library_name(level)}" for level in LEVELS),
}


def _source_files() -> set[str]:
    """Every file the packages' folders hold, as the wheel should name it."""
    files = set()
    for target, source in dists.package_roots().items():
        for path in source.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.add(f"{target}/{path.relative_to(source).as_posix()}")
    return files


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dists.Dists:
    try:
        find_compiler()
    except NativeUnavailableError as err:
        pytest.skip(f"the platform wheel's prebuilt libraries need a C++ compiler: {err}")
    return dists.build_dists(tmp_path_factory.mktemp("dists"))


def _contents(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        return {
            name: hashlib.sha256(archive.read(name)).hexdigest()
            for name in archive.namelist()
            if not name.endswith(".dist-info/RECORD")
        }


def _metadata(wheel: Path) -> tuple[dict, str]:
    with zipfile.ZipFile(wheel) as archive:
        (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        (tags,) = [n for n in archive.namelist() if n.endswith(".dist-info/WHEEL")]
        return Parser().parsestr(archive.read(meta).decode()), archive.read(tags).decode()


def test_wheel_holds_the_package_folders_and_the_build_inputs(built: dists.Dists) -> None:
    names = {n for n in _contents(built.wheel) if ".dist-info/" not in n}
    expected = _source_files() | GENERATED
    assert names == expected, (sorted(expected - names), sorted(names - expected))


def test_the_wheel_from_the_sdist_holds_the_same_files(built: dists.Dists) -> None:
    assert _contents(built.wheel) == _contents(built.direct_wheel)


def test_the_sdist_carries_the_headers_and_what_builds_the_wheel(built: dists.Dists) -> None:
    with tarfile.open(built.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for name in ("LICENSE", "scripts/build_hooks.py", "scripts/fetch_ort_headers.sh",
                 "third_party/onnxruntime/VERSION", "third_party/onnxruntime/COPYRIGHT.debian",
                 "third_party/onnxruntime/include/onnxruntime_c_api.h"):  # fmt: skip
        assert name in names, name


def test_platform_wheel_metadata(built: dists.Dists) -> None:
    meta, tags = _metadata(built.wheel)
    assert meta["Version"] == lossgrad_compiler.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    classifiers = meta.get_all("Classifier")
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Operating System :: POSIX :: Linux" in classifiers
    assert "Root-Is-Purelib: false" in tags
    assert built.wheel.name.endswith("-py3-none-linux_x86_64.whl"), built.wheel.name
    with zipfile.ZipFile(built.wheel) as archive:
        copyright_text = archive.read(f"{ORT}/onnxruntime/COPYRIGHT").decode()
        version = archive.read(f"{ORT}/onnxruntime/VERSION").decode()
    assert "Permission is hereby granted" in copyright_text  # the MIT text of ONNX Runtime
    assert version.strip() == "libonnxruntime-dev 1.21.0+dfsg-1"


def test_twine_check_passes(built: dists.Dists) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(built.sdist), str(built.wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_building_is_quiet(built: dists.Dists) -> None:
    for warning in ("Package would be ignored", "absent from the `packages` configuration"):
        assert warning not in built.output, built.output
    assert "SetuptoolsDeprecationWarning" not in built.output, built.output


def test_build_requirements_are_the_dependencies_pins() -> None:
    """The wheel build prints the kernels with the package being built: its requirements
    carry the same pins as the package's own dependencies."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    dependencies = set(project["project"]["dependencies"])
    build_requires = [r for r in project["build-system"]["requires"] if "setuptools" not in r]
    assert build_requires and set(build_requires) <= dependencies


@pytest.mark.parametrize("command", ["lossgrad-compile", "lossgrad-opt", "lossgrad-demo"])
def test_commands_print_their_version(command: str) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / command), "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{command} {lossgrad_compiler.__version__}"), done.stdout
