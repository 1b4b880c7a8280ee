"""A build cache on a full file system: the kernel library cannot be built there, and the
runtime says so in one warning and runs the ONNX functions (no traceback, no compiler
command). The failure is remembered beside the cache entry, so a later process does not
spend the compile again until the cache, the compiler or the flags change or more space is
free; nothing half-written is left or loaded.

The real tests mount a small tmpfs as LOSSGRAD_CACHE_DIR in a private mount namespace
(`unshare -m`, so the mount ends with the processes and nothing else sees it); they skip, saying
why, only where the kernel refuses the mount. The last test simulates the linker's ENOSPC with
a compiler wrapper, so the bookkeeping is checked everywhere. Each test's $CXX is
tests/helpers/quick_compiler.py's wrapper, which logs the commands and compiles at -O0 (or,
in the last test, fails as the linker does): what is checked is the bookkeeping, not the
optimised code."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lossgrad_compiler.backends.ort import build
from lossgrad_compiler.backends.ort.build import NativeUnavailableError, build_shared_library
from lossgrad_compiler.targets.ort_library import kernel_library_source
from tests.helpers.quick_compiler import compiles, quick_compiler
from tests.ort.support import TWO_NATIVE_RUNS

ROOT = Path(__file__).resolve().parents[2]


def _tools() -> build.Toolchain:
    try:
        return build.toolchain()
    except NativeUnavailableError as err:
        pytest.skip(f"no toolchain: {err}")


def _mount_problem(tmp_path: Path) -> str | None:
    """Why a tmpfs cannot be mounted in a private mount namespace here, or None."""
    if not shutil.which("unshare"):
        return "util-linux's unshare is not installed"
    probe = tmp_path / "probe-mount"
    probe.mkdir()
    mount = f"mount -t tmpfs -o size=64k tmpfs {shlex.quote(str(probe))}"
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", mount],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return f"mounting a tmpfs needs CAP_SYS_ADMIN: {done.stderr.strip()}"
    return None


def _on_small_tmpfs(mount: Path, size: str, commands: list[list[str]], env: dict) -> str:
    """Run `commands` one after another in a private mount namespace in which `mount` is a
    tmpfs of `size`; the shell prints `=== <exit status>` after each."""
    script = [f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(mount))} || exit 97"]
    for command in commands:
        script.append(f"{shlex.join(command)}; echo \"=== $?\"")
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", "\n".join(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + "\n--- stderr\n" + done.stderr


RUN_SCRIPT = TWO_NATIVE_RUNS + textwrap.dedent(
    """
    import pathlib, sys
    cache = pathlib.Path(sys.argv[1]) / "ort"
    print("LEFT", sorted(p.name for p in cache.iterdir() if p.suffix in (".so", ".tmp")))
    """
)


def test_full_cache_file_system_warns_once_and_is_not_retried(tmp_path: Path) -> None:
    """The issue's case: the .cc fits on the cache's file system, the link does not. The
    first process compiles, fails, warns once and runs the functions; the second warns the
    same way without compiling."""
    _tools()
    problem = _mount_problem(tmp_path)
    if problem:
        pytest.skip(f"cannot mount a small file system for the cache: {problem}")
    cache = tmp_path / "cache"
    cache.mkdir()
    wrapper, log = quick_compiler(tmp_path / "bin")
    env = {**os.environ, "LOSSGRAD_CACHE_DIR": str(cache), "CXX": str(wrapper)}
    env.pop(build.ENV_MARCH, None)
    run = [sys.executable, "-c", RUN_SCRIPT, str(cache)]
    # the source fits (with a MiB to spare), the library, about three times its size, does not
    size = f"{(len(kernel_library_source().encode()) >> 20) + 1}m"
    output = _on_small_tmpfs(cache, size, [run, run], env)
    first, second = output.split("=== ")[:2]
    assert output.count("=== 0") == 2, output
    for part in (first, second):
        warned = [line for line in part.splitlines() if line.startswith("WARNING")]
        assert len(warned) == 1, output
        assert "RuntimeWarning" in warned[0] and "using the ONNX function path" in warned[0]
        assert "No space left on device" in warned[0] and str(cache) in warned[0]
        assert "LEFT []" in part, output  # no library, no temporary file
    assert "Traceback" not in output and "-fPIC" not in output, output
    assert len(compiles(log)) == 1, log.read_text()


PROBE = 'extern "C" __attribute__((visibility("default"))) int answer() { return %d; }\n'

PROBE_SCRIPT = textwrap.dedent(
    """
    import ctypes, pathlib, sys
    from lossgrad_compiler.backends.ort.build import NativeUnavailableError, build_shared_library
    try:
        path = build_shared_library(sys.argv[1], "probe", directory=pathlib.Path(sys.argv[2]))
        print("BUILT", ctypes.CDLL(str(path)).answer())
    except NativeUnavailableError as err:
        print("UNAVAILABLE", err)
    """
)


def test_remembered_until_flags_change_or_space_is_freed(tmp_path: Path) -> None:
    """On a real full tmpfs: the remembered failure holds for the same source, compiler and
    flags; other flags try again; once the file system has room the build is retried and
    succeeds."""
    _tools()
    problem = _mount_problem(tmp_path)
    if problem:
        pytest.skip(f"cannot mount a small file system for the cache: {problem}")
    cache = tmp_path / "cache"
    cache.mkdir()
    wrapper, log = quick_compiler(tmp_path / "bin")
    env = {**os.environ, "CXX": str(wrapper), "LOSSGRAD_ORT_MARCH": "x86-64"}
    # a library of about 40 kB: 8 kB of static data does not fit beside its .cc in 16 kB
    source = 'extern "C" { __attribute__((visibility("default"))) char blob[32768] = {1}; }\n'
    source += PROBE % 41
    run = [sys.executable, "-c", PROBE_SCRIPT, source, str(cache)]
    other_flags = ["env", "LOSSGRAD_ORT_MARCH=x86-64-v2", *run]
    grow = ["mount", "-o", "remount,size=4m", str(cache)]
    output = _on_small_tmpfs(cache, "16k", [run, run, other_flags, grow, run], env)
    results = [line for line in output.splitlines() if line.startswith(("BUILT", "UNAVAILABLE"))]
    assert len(results) == 4, output
    assert all("No space left on device" in r for r in results[:3]), output
    assert "earlier" in results[1] and "earlier" not in results[0], output
    assert results[3] == "BUILT 41", output
    # compiled: the first run, the other flags, the retry with room; not the second run
    assert len(compiles(log)) == 3, log.read_text()


def test_linker_out_of_space_is_unavailable_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a mount: a compiler that fails as GNU ld does on ENOSPC gives one line (no
    compiler command), remembered for the same key; a different source compiles again."""
    tools = _tools()
    wrapper, log = quick_compiler(tmp_path / "bin", fail_links=True)
    failing = build.Toolchain((str(wrapper),), tools.version, tools.include, tools.api_version, ())
    for attempt in range(2):
        with pytest.raises(NativeUnavailableError) as err:
            build_shared_library(PROBE % 7, "probe", directory=tmp_path, tools=failing)
        message = str(err.value)
        assert "\n" not in message and "No space left on device" in message
        assert "-fPIC" not in message and str(tmp_path) in message
        assert ("earlier" in message) == (attempt == 1)
    assert len(compiles(log)) == 1
    with pytest.raises(NativeUnavailableError):
        build_shared_library(PROBE % 8, "probe", directory=tmp_path, tools=failing)
    assert len(compiles(log)) == 2
    assert not list(tmp_path.glob("*.so")) and not list(tmp_path.glob("*.tmp"))
