"""Building and caching shared libraries: keyed by content, built once, atomic under
concurrency, checked against their manifest before use (a damaged library is rebuilt, never
loaded), announced on stderr while they build; without a compiler, headers or a usable
cache directory the session falls back to the function path."""

from __future__ import annotations

import contextlib
import ctypes
import io
import re
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from lossgrad_compiler import reference
from lossgrad_compiler.backends.build_cache import build_notice, manifest_problem
from lossgrad_compiler.backends.ort import build
from lossgrad_compiler.backends.ort.build import (
    NativeUnavailableError,
    build_shared_library,
    find_compiler,
    find_headers,
)
from lossgrad_compiler.evaluation import ort as native_ort
from lossgrad_compiler.targets import ort_library
from tests.helpers import isolated
from tests.helpers.cases import make_case
from tests.helpers.quick_compiler import compiles, quick_compiler
from tests.helpers.tolerances import assert_close
from tests.ort.support import TWO_NATIVE_RUNS, case_model, feeds_of, native_library

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

    monkeypatch.setattr(ort_library, "library_path", unavailable)
    ort_library.native_library.cache_clear()
    try:
        case = make_case("SmoothL1LossBackward", {"reduction": "sum", "beta": 0.5}, (3,), (3,), ())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = native_ort.run_native(case_model(case), feeds_of(case.inputs))[0]
            second = native_ort.run_native(case_model(case), feeds_of(case.inputs))[0]
        messages = [str(w.message) for w in caught if "native ORT kernels" in str(w.message)]
        assert len(messages) == 1 and "no C++ compiler" in messages[0]
        np.testing.assert_array_equal(first, second)
    finally:
        ort_library.native_library.cache_clear()


def test_fetch_script_is_pinned() -> None:
    text = (build.FETCH_SCRIPT).read_text()
    assert "VERSION=1.21.0+dfsg-1" in text
    assert "SHA256=14f7d959d5deacbcf1504830d4189f91fc67382b399ed9ae9d3aa9c4050ced08" in text


# --------------------------------------------------------------------------- item 2


def test_library_path_is_what_register_custom_ops_library_takes() -> None:
    """The README's registration line, as written: a raw model straight into ORT."""
    library = native_library()
    assert isinstance(ort_library.library_path(), str)
    case = make_case("KlDivBackward", {"reduction": "sum", "log_target": 1}, (2, 3), (3,), ())
    so = ort.SessionOptions()
    so.register_custom_ops_library(ort_library.library_path())
    sess = ort.InferenceSession(
        case_model(case).SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    (got,) = sess.run(None, feeds_of(case.inputs))
    want = reference.evaluate(case.op_type, case.inputs, case.attrs)
    assert_close(got, want, compute=case.compute_dtype, tight=True)
    assert Path(library).is_file()


# --------------------------------------------------------------------------- item 6

PROBE_SCRIPT = textwrap.dedent(
    """
    import ctypes, pathlib, sys
    from lossgrad_compiler.backends.ort.build import build_shared_library
    source, directory = sys.argv[1], pathlib.Path(sys.argv[2])
    path = build_shared_library(source, "probe", directory=directory)
    print(ctypes.CDLL(str(path)).answer())
    """
)


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "zero-filled":  # the size is right, the content is not (a crash before sync)
        path.write_bytes(bytes(len(data)))
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated", "zero-filled"])
def test_damaged_cached_library_is_rebuilt_not_loaded(tmp_path: Path, how: str) -> None:
    tools = _tools()
    library = build_shared_library(SOURCE % 41, "probe", directory=tmp_path, tools=tools)
    size, inode = library.stat().st_size, library.stat().st_ino
    _damage(library, how)
    done = isolated.run_python(PROBE_SCRIPT, tmp_path, SOURCE % 41, str(tmp_path))
    assert done.returncode == 0, isolated.outcome(done)
    assert done.stdout.split() == ["41"]
    assert library.stat().st_size == size and library.stat().st_ino != inode
    assert manifest_problem(library.with_suffix(".manifest.json")) is None


@pytest.mark.parametrize("manifest", [None, "{not json", '{"format": 0, "files": {}}', "[]"])
def test_library_without_a_valid_manifest_is_rebuilt(tmp_path: Path, manifest: str | None) -> None:
    """A library without its manifest (an older version's cache, or a build interrupted
    between the two renames) or with an unreadable one is not trusted."""
    tools = _tools()
    library = build_shared_library(SOURCE % 44, "probe", directory=tmp_path, tools=tools)
    inode = library.stat().st_ino
    if manifest is None:
        library.with_suffix(".manifest.json").unlink()
    else:
        library.with_suffix(".manifest.json").write_text(manifest)
    again = build_shared_library(SOURCE % 44, "probe", directory=tmp_path, tools=tools)
    assert again == library and library.stat().st_ino != inode
    assert ctypes.CDLL(str(again)).answer() == 44


# `lossgrad-compile --target ort` (which copies the library beside the model), then
# run_native() and session(), each checked against the reference.
SESSION_SCRIPT = textwrap.dedent(
    """
    import pathlib, sys
    import onnx, onnxruntime as ort
    from lossgrad_compiler import cli, reference
    from lossgrad_compiler.evaluation import ort as native
    from lossgrad_compiler.targets.ort_library import library_path
    from tests.helpers.cases import make_case
    from tests.helpers.tolerances import assert_close
    from tests.ort.support import case_model, feeds_of

    case = make_case("SmoothL1LossBackward", {"reduction": "none", "beta": 0.5}, (3, 4), (4,), ())
    want = reference.evaluate(case.op_type, case.inputs, case.attrs)
    feeds = feeds_of(case.inputs)
    work = pathlib.Path(sys.argv[1])
    onnx.save(case_model(case), work / "in.onnx")
    out = work / "deploy" / "m.onnx"
    assert cli.main([str(work / "in.onnx"), "-o", str(out), "--target", "ort", "-q"]) == 0
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(out.parent / pathlib.Path(library_path()).name))
    (copied,) = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    (ran,) = native.run_native(case_model(case), feeds)
    (sess,) = native.session(case_model(case)).run(None, feeds)
    for got in (copied, ran, sess):
        assert_close(got, want, compute=case.compute_dtype, tight=True)
    print("ok", library_path())
    """
)


def test_session_and_run_native_rebuild_a_truncated_kernel_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real library, truncated in a private cache: `--target ort`, run_native() and
    session() rebuild it (saying so once on stderr, compiling once), copy a whole library and
    compute the right results; the next process loads it silently. The rebuild compiles
    through tests/helpers/quick_compiler.py's wrapper (-O0, the same key): what is checked
    is the cache's handling, not the optimised code."""
    built = Path(native_library())
    wrapper, log = quick_compiler(tmp_path / "bin")
    monkeypatch.setenv("CXX", str(wrapper))
    cache = tmp_path / "cache"
    (cache / "ort").mkdir(parents=True)
    copy = cache / "ort" / built.name
    shutil.copyfile(built, copy)
    manifest = built.with_suffix(".manifest.json")
    if manifest.exists():
        shutil.copyfile(manifest, copy.with_suffix(".manifest.json"))
    _damage(copy, "truncated")
    done = isolated.run_python(SESSION_SCRIPT, cache, str(tmp_path))
    assert done.returncode == 0, isolated.outcome(done)
    assert done.stdout.split() == ["ok", str(copy)]
    notices = [line for line in done.stderr.splitlines() if line.startswith("lossgrad: build")]
    assert len(notices) == 1, done.stderr
    assert "the native ONNX Runtime kernel library" in notices[0]
    assert "cannot be used" in notices[0] and "about a minute" in notices[0]
    assert len(compiles(log)) == 1, log.read_text()
    assert manifest_problem(copy.with_suffix(".manifest.json")) is None
    assert (tmp_path / "deploy" / built.name).read_bytes() == copy.read_bytes()
    again = isolated.run_python(SESSION_SCRIPT, cache, str(tmp_path))
    assert again.returncode == 0, isolated.outcome(again)
    assert "lossgrad: build" not in again.stderr and len(compiles(log)) == 1


# --------------------------------------------------------------------------- item 7

def _unusable_cache(tmp_path: Path, kind: str) -> tuple[Path, tuple[str, ...]]:
    if kind == "unwritable":
        return isolated.unwritable_directory(tmp_path)
    regular_file = tmp_path / "cache-file"
    regular_file.write_text("not a directory")
    return (regular_file if kind == "a file" else regular_file / "below"), ()


@pytest.mark.parametrize("kind", ["a file", "below a file", "unwritable"])
def test_unusable_cache_dir_falls_back_to_the_functions_with_one_warning(
    tmp_path: Path, kind: str
) -> None:
    _tools()
    cache, prefix = _unusable_cache(tmp_path, kind)
    done = isolated.run_python(TWO_NATIVE_RUNS, cache, prefix=prefix)
    assert done.returncode == 0, isolated.outcome(done)
    warned = [line for line in done.stdout.splitlines() if line.startswith("WARNING")]
    assert len(warned) == 1, done.stdout
    assert "RuntimeWarning" in warned[0] and "using the ONNX function path" in warned[0]
    assert f"$LOSSGRAD_CACHE_DIR={cache}" in warned[0]
    assert "set $LOSSGRAD_CACHE_DIR to a writable directory" in warned[0]


def test_unusable_cache_dir_error_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = _tools()
    cache, _ = _unusable_cache(tmp_path, "below a file")
    monkeypatch.setenv("LOSSGRAD_CACHE_DIR", str(cache))
    with pytest.raises(NativeUnavailableError) as err:
        build_shared_library(SOURCE % 45, "probe", tools=tools)
    message = str(err.value)
    assert "\n" not in message
    assert f"cannot use the build cache {cache / 'ort'} from $LOSSGRAD_CACHE_DIR={cache}" in message
    assert "Not a directory" in message


# --------------------------------------------------------------------------- item 19


def test_a_build_is_announced_once_and_a_cache_hit_is_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = _tools()
    announce = build.Announcement("the probe library", "about a second")
    build_shared_library(SOURCE % 46, "probe", directory=tmp_path, tools=tools, announce=announce)
    first = capsys.readouterr()
    lines = first.err.splitlines()
    assert len(lines) == 1 and first.out == ""
    assert lines[0].startswith("lossgrad: building the probe library ")
    assert "(not in the cache yet: first use" in lines[0] and "about a second" in lines[0]
    build_shared_library(SOURCE % 46, "probe", directory=tmp_path, tools=tools, announce=announce)
    assert capsys.readouterr() == ("", "")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("fails", [False, True])
def test_build_notice_on_a_terminal_shows_a_spinner_and_ends_its_line(fails: bool) -> None:
    stream = _Terminal()
    with contextlib.suppress(RuntimeError), build_notice("X", "why", "a moment", stream):
        time.sleep(1.2)
        if fails:
            raise RuntimeError("compiler failed")
    text = stream.getvalue()
    frames = text.split("\r")[1:]
    assert len(frames) >= 3  # the spinner turned while the build ran
    spinning = re.compile(r"lossgrad: building X \(why\); a moment [|/\\-] \d+ s")
    assert all(spinning.fullmatch(f) for f in frames[:-1]), frames
    assert frames[0].endswith(" 0 s") and len({f[-5] for f in frames[:-1]}) >= 3
    ended = "failed" if fails else "done"
    assert re.fullmatch(rf"lossgrad: building X \(why\); a moment: {ended} in \d+ s\n", frames[-1])
    assert text.count("\n") == 1
