"""Building and caching shared libraries: keyed by content, built once, atomic under
concurrency; without a compiler or headers the session falls back to the function path."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from lossgrad_compiler.backends.ort import build
from lossgrad_compiler.backends.ort.build import (
    NativeUnavailableError,
    build_shared_library,
    find_compiler,
    find_headers,
)
from lossgrad_compiler.runtime import ort as runtime_ort
from tests.helpers.cases import make_case
from tests.ort_native_support import case_model, feeds_of

SOURCE = textwrap.dedent(
    """
    extern "C" __attribute__((visibility("default"))) int answer() { return %d; }
    """
)


def _tools() -> build.Toolchain:
    try:
        return build.toolchain()
    except NativeUnavailableError as err:
        pytest.skip(f"no toolchain: {err}")


def test_built_once_and_keyed_by_source_and_flags(tmp_path: Path) -> None:
    tools = _tools()
    first = build_shared_library(SOURCE % 41, "probe", directory=tmp_path, tools=tools)
    stamp = first.stat().st_mtime_ns
    again = build_shared_library(SOURCE % 41, "probe", directory=tmp_path, tools=tools)
    assert again == first and again.stat().st_mtime_ns == stamp
    other_source = build_shared_library(SOURCE % 42, "probe", directory=tmp_path, tools=tools)
    other_flags = build_shared_library(
        SOURCE % 41, "probe", flags=("-O1",), directory=tmp_path, tools=tools
    )
    assert len({first, other_source, other_flags}) == 3
    assert ctypes.CDLL(str(first)).answer() == 41
    assert ctypes.CDLL(str(other_source)).answer() == 42
    assert not list(tmp_path.glob("*.tmp"))


def test_concurrent_builds_all_succeed(tmp_path: Path) -> None:
    """Several processes build the same library at once: each gets the complete file."""
    _tools()
    script = textwrap.dedent(
        f"""
        import ctypes, pathlib
        from lossgrad_compiler.backends.ort.build import build_shared_library
        directory = pathlib.Path({str(tmp_path)!r})
        path = build_shared_library({SOURCE % 7!r}, "race", directory=directory)
        print(path, ctypes.CDLL(str(path)).answer())
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=300)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len({path for path, _ in outputs}) == 1
    assert all(answer == "7" for _, answer in outputs)
    assert len(list(tmp_path.glob("race-*.so"))) == 1


def test_compile_error_is_reported(tmp_path: Path) -> None:
    tools = _tools()
    with pytest.raises(build.OrtBackendError, match="failed"):
        build_shared_library("this is not C++", "broken", directory=tmp_path, tools=tools)
    assert not list(tmp_path.glob("*.so"))


def test_missing_compiler_and_headers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    with pytest.raises(NativeUnavailableError, match="no C\\+\\+ compiler"):
        find_compiler()
    monkeypatch.setenv("LOSSGRAD_ORT_INCLUDE", str(tmp_path))
    with pytest.raises(NativeUnavailableError, match=r"onnxruntime_c_api\.h"):
        find_headers()


def test_fallback_warns_once_and_runs_the_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> Path:
        raise NativeUnavailableError("no C++ compiler found (test)")

    monkeypatch.setattr(runtime_ort, "library_path", unavailable)
    runtime_ort.native_library.cache_clear()
    try:
        case = make_case("SmoothL1LossBackward", {"reduction": "sum", "beta": 0.5}, (3,), (3,), ())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = runtime_ort.run_native(case_model(case), feeds_of(case.inputs))[0]
            second = runtime_ort.run_native(case_model(case), feeds_of(case.inputs))[0]
        messages = [str(w.message) for w in caught if "native ORT kernels" in str(w.message)]
        assert len(messages) == 1 and "no C++ compiler" in messages[0]
        np.testing.assert_array_equal(first, second)
    finally:
        runtime_ort.native_library.cache_clear()


def test_fetch_script_is_pinned() -> None:
    text = (build.FETCH_SCRIPT).read_text()
    assert "VERSION=1.21.0+dfsg-1" in text
    assert "SHA256=14f7d959d5deacbcf1504830d4189f91fc67382b399ed9ae9d3aa9c4050ced08" in text
