"""The wheel where a user installs it: a throwaway virtual environment outside the
repository (the wheel installed with --no-deps, its dependencies linked from this
environment, no extra), with HOME, the working directory and the kernel cache elsewhere.
There the native-kernel block of docs/ort.md runs as written, and `lossgrad-compile --target ort`
writes a model and a library that ONNX Runtime loads, two ways:

1. with a C++ compiler: the JIT build, compiled against the headers the wheel ships (the
   compiler is tests/helpers/quick_compiler.py's wrapper, which logs its command and
   compiles at -O0: the include folder is the package's, and nothing names the checkout's
   third_party/);
2. with none ($CXX a program that fails, no c++/g++ on PATH): the prebuilt library for this
   CPU, native rows in lossgrad-demo, and no fallback warning."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest

from lossgrad_compiler import examples
from lossgrad_compiler.backends.ort.build import NativeUnavailableError, find_compiler
from tests.docs.test_docs_blocks import by_language
from tests.helpers import dists
from tests.helpers.quick_compiler import compiles, quick_compiler

NATIVE_BLOCK = next(
    b for b in by_language("python") if "register_custom_ops_library(library_path())" in b.code
)

# After the page's block, in the same process: what it used, for the checks below.
REPORT = """
import lossgrad_compiler, pathlib, sys
from lossgrad_compiler.backends.ort import build
print("PACKAGE", pathlib.Path(lossgrad_compiler.__file__).parent)
print("LIBRARY", library_path())
print("OUTPUTS", [o.shape for o in outputs], sess.get_outputs()[0].name)
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        find_compiler()
    except NativeUnavailableError as err:
        pytest.skip(f"building the wheel's prebuilt libraries needs a C++ compiler: {err}")
    work = tmp_path_factory.mktemp("wheel-install")
    built = dists.build_dists(work / "build")
    return dists.make_venv(work / "venv", built.wheel)


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, check=False
    )


def _environment(root: Path, path: str, **extra: str) -> dict[str, str]:
    """A user's environment: HOME, the cache and the working folder in `root`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOSSGRAD_", "PYTHON"))}
    (root / "home").mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(root / "home"), LOSSGRAD_CACHE_DIR=str(root / "cache"), PATH=path)
    env.update(extra)
    return env


def _compile_for_ort(python: Path, work: Path, env: dict[str, str], which: str) -> Path:
    """`lossgrad-compile m.onnx --target ort -o dep/m.onnx`; the copied library, after a
    fresh ONNX Runtime session has run the written model with it."""
    onnx.save(examples.example_model(), work / "m.onnx")
    done = _run(
        [str(python.parent / "lossgrad-compile"), "m.onnx", "--target", "ort", "-o", "dep/m.onnx"],
        work,
        env,
    )
    assert done.returncode == 0, done.stderr
    (library,) = (work / "dep").glob("liblossgrad_ort*.so")
    copied = f"copied the kernel library ({which}) to dep/{library.name}"
    assert copied in done.stdout, done.stdout
    check = (
        "import sys, onnxruntime as ort\n"
        "from lossgrad_compiler import examples\n"
        "from lossgrad_compiler.runtime.ort_io import run_session\n"
        "so = ort.SessionOptions(); so.register_custom_ops_library(sys.argv[1])\n"
        "s = ort.InferenceSession('dep/m.onnx', so, providers=['CPUExecutionProvider'])\n"
        "print(len(run_session(s, examples.example_feeds(batch=3))))\n"
    )
    ran = _run([str(python), "-c", check, str(library)], work, env)
    outputs = len(examples.example_model().graph.output)
    assert ran.returncode == 0 and ran.stdout.split() == [str(outputs)], ran.stderr
    return library


def _report(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [line.split(" ", 1) for line in done.stdout.splitlines() if " " in line]
    return {key: value for key, value in lines}


def test_with_a_compiler_the_jit_build_uses_the_shipped_headers(
    venv: Path, tmp_path: Path
) -> None:
    wrapper, log = quick_compiler(tmp_path / "bin")
    env = _environment(tmp_path, os.environ["PATH"], CXX=str(wrapper))
    work = tmp_path / "work"
    work.mkdir()
    done = _run([str(venv), "-c", NATIVE_BLOCK.code + REPORT], work, env)
    report = _report(done)
    package = Path(report["PACKAGE"])
    assert package.is_relative_to(venv.parent.parent), report  # the installed copy
    assert Path(report["LIBRARY"]).name.startswith("liblossgrad_ort-native-"), report
    assert "function path" not in done.stderr, done.stderr
    (compile_,) = compiles(log)
    command = shlex.split(compile_)
    include = command[command.index("-I") + 1]
    assert Path(include) == package / "backends" / "ort" / "onnxruntime" / "include"
    assert "third_party" not in log.read_text() and str(dists.REPO) not in log.read_text()
    library = _compile_for_ort(venv, work, env, "built here for this machine's CPU")
    assert library.name == Path(report["LIBRARY"]).name  # the copy says it is the JIT build


def test_without_a_compiler_the_prebuilt_library_serves(venv: Path, tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    failing = tools / "broken-cxx"
    failing.write_text("#!/bin/sh\necho 'this compiler does not work' >&2\nexit 1\n")
    failing.chmod(0o755)
    assert not any(shutil.which(name, path=str(tools)) for name in ("c++", "g++"))
    env = _environment(tmp_path, str(tools), CXX=str(failing))
    work = tmp_path / "work"
    work.mkdir()
    done = _run([str(venv), "-c", NATIVE_BLOCK.code + REPORT], work, env)
    report = _report(done)
    library = Path(report["LIBRARY"])
    assert library.parent == Path(report["PACKAGE"]) / "backends" / "ort" / "prebuilt", report
    assert library.name.startswith("liblossgrad_ort-prebuilt-x86-64-v"), report
    assert "Warning" not in done.stderr and "function path" not in done.stderr, done.stderr
    assert not (tmp_path / "cache").exists()  # nothing was built
    level = library.name.removeprefix("liblossgrad_ort-prebuilt-").removesuffix(".so")
    copied = _compile_for_ort(venv, work, env, f"prebuilt for {level}")
    assert copied.name == library.name  # the copy says which level it is
    demo = _run([str(venv.parent / "lossgrad-demo")], work, env)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    runs = [line for line in demo.stdout.splitlines() if line.startswith("run")]
    native = [line for line in runs if "ort-native" in line]
    assert native and not any("skipped" in line for line in native), demo.stdout
    assert sum(1 for line in native if line.rstrip().endswith(": ok")) == 3, demo.stdout
    assert "function path" not in demo.stderr, demo.stderr
    # the Ascend C emulation has no prebuilt form: without a compiler it is one skip line
    (ascendc,) = [line for line in runs if re.match(r"run\s+ascendc\s", line)]
    assert "skipped: ascendc: emulation: needs a C++17 compiler" in ascendc, ascendc
