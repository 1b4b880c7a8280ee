"""The prebuilt kernel libraries of the platform wheel (backends/ort/prebuilt.py), built here
as the wheel build does (through the kernel build cache):

* the choice: the CPU probe names this CPU's x86-64 level, $LOSSGRAD_ORT_MARCH names one, a
  damaged set is refused, never loaded;
* the same numerics as the JIT build: tests/ort/test_ort_native.py (reference bounds, bits
  identical across thread counts, special values, mixed types) and the fused-halves tests
  run again with -v2's library (the level whose log and exp differ from the JIT build's),
  and with each level's under LOSSGRAD_FULL_MATRIX=1;
* the bits: -v3, -v4 and -v4-avx512bf16 give the JIT build's bits here (FMA log and exp,
  F16C), -v2 differs only where the float log's or exp's form differs (no FMA: the fdlibm
  log, the exp's separate roundings; docs/install.md)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from lossgrad_compiler.backends.build_cache import manifest_problem
from lossgrad_compiler.backends.ort import prebuilt
from lossgrad_compiler.backends.ort.build import ENV_MARCH, NativeUnavailableError, toolchain
from lossgrad_compiler.targets.ort_library import kernel_library_source
from tests.helpers.cases import DTYPES, OP_TYPES, full_matrix, make_case, standard_cases
from tests.helpers.hardware import skip_on_this_cpu
from tests.ort.support import (
    ENV_LIBRARY,
    build_macros,
    case_model,
    native_library,
    native_session,
    run,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prebuilt_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        tools = toolchain()
    except NativeUnavailableError as err:
        pytest.skip(f"building the prebuilt libraries needs the toolchain: {err}")
    directory = tmp_path_factory.mktemp("prebuilt")
    prebuilt.build_prebuilt(kernel_library_source(), directory, tools)
    return directory


def _features_from_proc() -> frozenset[str]:
    """This CPU's prebuilt.FEATURES from the kernel's flag list (an independent reading)."""
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    needs = {
        "x86-64-v2": {"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"},
        "x86-64-v3": {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"},
        "x86-64-v4": {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
    }
    found = set()
    for level, needed in needs.items():  # a level includes the ones below it
        if not needed <= flags:
            break
        found.add(level)
    if "avx512_bf16" in flags:
        found.add("avx512bf16")
    return frozenset(found)


def _skip_unless_runs(directory: Path, level: str) -> None:
    missing = prebuilt.LEVEL_FEATURES[level] - prebuilt.cpu_features(directory)
    if missing:
        skip_on_this_cpu(f"the {level} library (no {', '.join(sorted(missing))})")


def test_the_probe_names_this_cpus_features(tmp_path: Path) -> None:
    """Only the probe is built: the choice from its answer is tests/ort/test_ort_cpu_level.py's."""
    if not Path("/proc/cpuinfo").is_file():
        pytest.skip("no /proc/cpuinfo to compare the probe with")
    try:
        tools = toolchain()
    except NativeUnavailableError as err:
        pytest.skip(f"building the probe needs the toolchain: {err}")
    (tmp_path / prebuilt.PROBE_NAME).write_bytes(prebuilt.build_probe(tools).read_bytes())
    assert prebuilt.cpu_features(tmp_path) == _features_from_proc()


def test_the_library_for_this_cpu_or_the_named_level(
    prebuilt_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_MARCH, raising=False)
    level = prebuilt.level_for(prebuilt.cpu_features(prebuilt_dir))
    assert level is not None
    chosen = prebuilt.prebuilt_library(prebuilt_dir)
    assert chosen == prebuilt_dir / prebuilt.library_name(level)
    assert prebuilt.describe(chosen) == f"prebuilt for {level}"
    monkeypatch.setenv(ENV_MARCH, "x86-64-v2")
    assert prebuilt.prebuilt_library(prebuilt_dir).name == "liblossgrad_ort-prebuilt-x86-64-v2.so"
    monkeypatch.setenv(ENV_MARCH, "znver4")
    with pytest.raises(NativeUnavailableError, match="needs a C\\+\\+ compiler"):
        prebuilt.prebuilt_library(prebuilt_dir)


def test_a_damaged_prebuilt_library_is_refused(
    prebuilt_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_MARCH, raising=False)
    damaged = tmp_path / "prebuilt"
    damaged.mkdir()
    for path in prebuilt_dir.iterdir():
        (damaged / path.name).write_bytes(path.read_bytes())
    assert manifest_problem(damaged / prebuilt.MANIFEST) is None
    victim = damaged / prebuilt.library_name("x86-64-v2")
    victim.write_bytes(victim.read_bytes()[:4096])
    with pytest.raises(NativeUnavailableError, match=r"damaged.*reinstall"):
        prebuilt.prebuilt_library(damaged)
    with pytest.raises(NativeUnavailableError, match="no prebuilt kernel library"):
        prebuilt.prebuilt_library(tmp_path / "absent")


def _outputs(library: str, cases: list) -> list[np.ndarray]:
    return [run(native_session(case_model(c), threads=1, library=library), c.inputs) for c in cases]


def _bits(values: np.ndarray) -> bytes:
    """The bytes of `values` with every NaN made one NaN: the libraries may give a NaN result
    different sign and payload bits (docs/install.md), never a different value."""
    canonical = np.array(values, copy=True)
    canonical[np.isnan(canonical)] = np.nan
    return canonical.tobytes()


def _float_log_or_exp_case(case) -> bool:
    """Whether `case` computes a float log or exp (computed in float32: float32, float16 and
    bfloat16 inputs): KlDivTargetBackward (log with log_target 0, exp with 1), KlDivBackward
    with log_target 1, and the sigmoid's exp of SoftMarginLossBackward and
    BinaryCrossEntropyWithLogitsBackward."""
    if np.dtype(case.compute_dtype) != np.float32:
        return False
    if case.op_type == "KlDivBackward":
        return case.attrs.get("log_target", 0) == 1
    return case.op_type in (
        "KlDivTargetBackward",
        "SoftMarginLossBackward",
        "BinaryCrossEntropyWithLogitsBackward",
    )


@pytest.mark.parametrize("level", prebuilt.LEVELS)
def test_bits_against_the_jit_build(prebuilt_dir: Path, level: str) -> None:
    """Where the CPU runs the level: -v3, -v4 and -v4-avx512bf16 give the JIT build's bits
    on every standard case; -v2 too, except for the cases that compute a float log or exp."""
    _skip_unless_runs(prebuilt_dir, level)
    jit = native_library()
    if "__FMA__" not in build_macros(toolchain().arch_flags):
        pytest.skip("the JIT build here has no FMA, so its float log and exp are -v2's")
    library = str(prebuilt_dir / prebuilt.library_name(level))
    differing = []
    for op_type in OP_TYPES:
        for dtype in DTYPES:
            cases = standard_cases(op_type, dtype, seed=23, specials=0.1)
            pairs = zip(_outputs(jit, cases), _outputs(library, cases), strict=True)
            for case, (a, b) in zip(cases, pairs, strict=True):
                if _bits(a) != _bits(b):
                    differing.append(case)
    if level == "x86-64-v2":
        assert all(_float_log_or_exp_case(c) for c in differing), [c.label for c in differing]
    else:
        assert not differing, [c.label for c in differing]
    # the float log over 2^16 targets: the forms differ in the last bit for some of them
    logs = make_case("KlDivTargetBackward", {"reduction": "none"}, (1 << 16,), (1 << 16,), ())
    jit_bits, level_bits = (_outputs(lib, [logs])[0] for lib in (jit, library))
    differ = int(np.count_nonzero(jit_bits.view(np.uint32) != level_bits.view(np.uint32)))
    assert (differ > 0) == (level == "x86-64-v2"), differ


# x86-64-v2 computes its float log and exp in another form than the JIT build (no FMA), so
# only the numerics tests can judge it; the other levels' bits are the JIT build's on every
# standard case (test_bits_against_the_jit_build), and their child runs, some minutes each,
# come with LOSSGRAD_FULL_MATRIX=1.
NUMERICS_LEVELS = prebuilt.LEVELS if full_matrix() else ("x86-64-v2",)


@pytest.mark.parametrize("level", NUMERICS_LEVELS)
def test_the_native_numerics_tests_pass_with_the_level(prebuilt_dir: Path, level: str) -> None:
    """tests/ort/test_ort_native.py and the fused-halves tests, in a child pytest whose library
    is this level's (ort_native_support's LOSSGRAD_TEST_ORT_LIBRARY)."""
    _skip_unless_runs(prebuilt_dir, level)
    library = prebuilt_dir / prebuilt.library_name(level)
    env = {**os.environ, ENV_LIBRARY: str(library)}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "tests/ort/test_ort_native.py", "tests/ort/test_ort_fused_halves.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
    loaded = ctypes.CDLL(str(library))  # a whole library: it loads
    assert loaded is not None


# --------------------------------------------------------------------------- the runtime's choice


@pytest.fixture
def choice(monkeypatch: pytest.MonkeyPatch, prebuilt_dir: Path):
    """targets.ort_library with the prebuilt set of `prebuilt_dir` as the installation's, and the
    library_path() cache cleared around each test."""
    from lossgrad_compiler.targets import ort_library as runtime_ort

    monkeypatch.setattr(prebuilt, "PREBUILT_DIR", prebuilt_dir)
    monkeypatch.setattr(
        runtime_ort, "prebuilt_library", lambda: prebuilt.prebuilt_library(prebuilt_dir)
    )
    monkeypatch.setattr(runtime_ort, "prebuilt_present", lambda: True)
    monkeypatch.delenv(ENV_MARCH, raising=False)
    monkeypatch.delenv(runtime_ort.ENV_PREBUILT, raising=False)
    yield runtime_ort
    runtime_ort.library_path.cache_clear()


def _raise(error: Exception):
    def fail(*args, **kwargs):
        raise error

    return fail


def test_without_a_compiler_the_prebuilt_library_silently(choice, monkeypatch) -> None:
    from lossgrad_compiler.backends.ort.build import NoCompilerError

    monkeypatch.setattr(choice, "toolchain", _raise(NoCompilerError("no C++ compiler found")))
    choice.library_path.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = choice.library_path()
    assert Path(path).parent == prebuilt.PREBUILT_DIR and "prebuilt" in Path(path).name


def test_a_failed_build_warns_and_uses_the_prebuilt_library(choice, monkeypatch) -> None:
    monkeypatch.setattr(choice, "toolchain", _raise(NativeUnavailableError("no headers (test)")))
    choice.library_path.cache_clear()
    with pytest.warns(RuntimeWarning, match=r"no headers \(test\).*prebuilt for x86-64-v"):
        path = choice.library_path()
    assert "prebuilt" in Path(path).name


def test_neither_is_one_error_naming_both(choice, monkeypatch) -> None:
    from lossgrad_compiler.backends.ort.build import NoCompilerError

    monkeypatch.setattr(choice, "toolchain", _raise(NoCompilerError("no C++ compiler found")))
    absent = NativeUnavailableError("this installation has no prebuilt kernel library")
    monkeypatch.setattr(choice, "prebuilt_library", _raise(absent))
    choice.library_path.cache_clear()
    with pytest.raises(NativeUnavailableError, match=r"no C\+\+ compiler.*no prebuilt"):
        choice.library_path()


def test_asked_for_the_prebuilt_library_even_with_a_compiler(choice, monkeypatch) -> None:
    monkeypatch.setenv(choice.ENV_PREBUILT, "1")
    monkeypatch.setenv(ENV_MARCH, "x86-64-v3")
    choice.library_path.cache_clear()
    assert Path(choice.library_path()).name == "liblossgrad_ort-prebuilt-x86-64-v3.so"
