"""The project's sdist and wheels, built as a release would be, from a copy of the project
(the working tree gets no build/ or egg-info), and throwaway virtual environments that
install the wheel as a user would, offline.

`python -m build --no-isolation` builds with this environment's setuptools, xDSL and onnx
(the build requirements), so nothing is downloaded; the prebuilt kernel libraries come from
the kernel build cache ($LOSSGRAD_CACHE_DIR), keyed by their source, compiler and flags, so
only a change of the kernels rebuilds them."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.egg-info")
PROJECT_FILES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in")


def package_roots() -> dict[str, Path]:
    """Top-level install folder (as a path inside the wheel) -> its source folder."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dir = config.get("package-dir", {})
    roots = {}
    for package in config["packages"]:
        source = package_dir.get(package)
        if source is not None:
            roots[package.replace(".", "/")] = REPO / source
    return roots


def copy_project(destination: Path) -> Path:
    """What `git clone` plus `make`'s header fetch give: the committed project files and
    third_party/onnxruntime."""
    destination.mkdir(parents=True)
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, destination / name)
    sources = {p.relative_to(REPO).parts[0] for p in package_roots().values()}
    for source in sorted(sources | {"scripts"}):
        shutil.copytree(REPO / source, destination / source, ignore=IGNORED)
    headers = Path("third_party", "onnxruntime")
    shutil.copytree(REPO / headers, destination / headers)
    return destination


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path  # built from the sdist, as `python -m build` does
    direct_wheel: Path  # built from the project folder itself
    output: str  # what the builds printed


def build_dists(work: Path) -> Dists:
    """`python -m build` (the sdist, then the wheel from it) and a wheel built straight from
    the project folder. It runs in `work`: `-m` puts the working directory first on
    sys.path, and in a checkout where `make demo` has written build/ that folder would be
    imported as the `build` package."""
    project = copy_project(work / "project")
    output = []
    for out, extra in ((work / "dist", []), (work / "direct", ["--wheel"])):
        done = subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", *extra, "--outdir", str(out),
             str(project)],
            capture_output=True, text=True, timeout=3000, env={**os.environ, "PIP_NO_INPUT": "1"},
            cwd=work,
        )  # fmt: skip
        output.append(done.stdout + done.stderr)
        assert done.returncode == 0, output[-1][-6000:]
    (sdist,) = (work / "dist").glob("lossgrad_compiler-*.tar.gz")
    (wheel,) = (work / "dist").glob("lossgrad_compiler-*.whl")
    (direct,) = (work / "direct").glob("lossgrad_compiler-*.whl")
    return Dists(sdist, wheel, direct, "\n".join(output))


def _requirement_names(distribution: str) -> set[str]:
    """The distributions `distribution` needs without extras (markers evaluated here)."""
    from packaging.requirements import Requirement

    names = set()
    for text in importlib.metadata.requires(distribution) or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.add(requirement.name)
    return names


def runtime_closure() -> list[importlib.metadata.Distribution]:
    """The installed distributions lossgrad_compiler needs at run time, transitively: what
    `pip install lossgrad_compiler` would bring, without any extra."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    pending = list(_requirement_names("lossgrad_compiler"))
    while pending:
        name = re.sub(r"[-_.]+", "-", pending.pop()).lower()
        if name in seen:
            continue
        distribution = importlib.metadata.distribution(name)
        seen[name] = distribution
        pending.extend(_requirement_names(distribution.metadata["Name"]))
    return list(seen.values())


def make_venv(where: Path, wheel: Path) -> Path:
    """A virtual environment at `where` with `wheel` installed (--no-deps, --no-index) and
    its run-time dependencies taken from this environment: a folder of links to exactly
    those distributions' files, put on the venv's path by a .pth file (this environment's
    own site-packages, with its editable lossgrad_compiler and every extra, stays out).
    Returns the venv's python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    deps = where / "dependencies"
    deps.mkdir()
    for distribution in runtime_closure():
        for file in distribution.files or []:
            top = file.parts[0]
            source = Path(str(distribution.locate_file(top)))
            if top not in ("..", "__pycache__") and source.exists() and not (deps / top).exists():
                (deps / top).symlink_to(source)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "lossgrad_test_dependencies.pth").write_text(f"{deps}\n")
    return python
