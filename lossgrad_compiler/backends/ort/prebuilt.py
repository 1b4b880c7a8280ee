"""The prebuilt kernel libraries of the platform wheel: one per x86-64 microarchitecture
level, and the choice among them on the machine that loads one.

Why one library per level, picked at load time, rather than function multiversioning: the
kernels' fast paths are chosen by the preprocessor and the auto-vectoriser, not by
per-function target attributes. cxx/vmath.h picks the float log's FMA form and its AVX-512
vector variant (the x86 vector function ABI) by __FMA__/__AVX512F__, cxx/half.h the F16C and
AVX-512 conversions by their macros, and g++ vectorises every printed loop for the -march it
is given. target_clones would clone only the annotated functions, with the macros of the
baseline build, so every one of those paths would be lost or need rewriting. Built whole for
x86-64-v2, -v3 (AVX2, FMA, F16C), -v4 (AVX-512) and -v4 with AVX512-BF16, each library is
what the JIT builds with those -march/-m flags (same source, same flags), and ORT's
register_custom_ops_library takes each as it is.

The choice: a small library built for baseline x86-64 asks libgcc's __builtin_cpu_supports,
the check GCC's own function multiversioning dispatches on (it reads CPUID and, for AVX and
AVX-512, whether the OS saves their registers), which of FEATURES this CPU has, and
`level_for` (a pure function, tested with made-up feature sets) picks the highest level
they cover. $LOSSGRAD_ORT_MARCH names a level instead; one this CPU cannot run is refused
(its library would end the process with an illegal instruction) unless
$LOSSGRAD_ORT_MARCH_FORCE=1 says to load it anyway."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import shutil
from collections.abc import Sequence, Set
from functools import cache
from pathlib import Path

from lossgrad_compiler.backends.build_cache import (
    file_digest,
    manifest_problem,
    write_atomically,
    write_manifest,
)
from lossgrad_compiler.backends.ort.build import (
    ENV_MARCH,
    OPTIMIZE_FLAGS,
    NativeUnavailableError,
    Toolchain,
    build_shared_library,
)

# The x86-64 levels, and above v4 the AVX512-BF16 CPUs (Cooper Lake, Sapphire Rapids and
# later, Zen 4 and later): cxx/half.h narrows bfloat16 with their one-instruction conversion,
# and without it the bfloat16 cells of bench_ort_native.py run slower than the JIT build's
# (same bits either way; docs/benchmarks.md, "The figures behind the kernels' choices", has
# the figures). Each is built with these -march/-m flags.
LEVEL_FLAGS: dict[str, tuple[str, ...]] = {
    "x86-64-v2": ("-march=x86-64-v2",),
    "x86-64-v3": ("-march=x86-64-v3",),
    "x86-64-v4": ("-march=x86-64-v4",),
    "x86-64-v4-avx512bf16": ("-march=x86-64-v4", "-mavx512bf16"),
}
LEVELS = tuple(LEVEL_FLAGS)
FEATURES = ("x86-64-v2", "x86-64-v3", "x86-64-v4", "avx512bf16")
"""What the probe asks __builtin_cpu_supports, bit i of its answer for FEATURES[i]."""
LEVEL_FEATURES: dict[str, frozenset[str]] = {
    "x86-64-v2": frozenset({"x86-64-v2"}),
    "x86-64-v3": frozenset({"x86-64-v2", "x86-64-v3"}),
    "x86-64-v4": frozenset({"x86-64-v2", "x86-64-v3", "x86-64-v4"}),
    "x86-64-v4-avx512bf16": frozenset({"x86-64-v2", "x86-64-v3", "x86-64-v4", "avx512bf16"}),
}
"""The features a CPU needs to run each level's library."""
ENV_FORCE = "LOSSGRAD_ORT_MARCH_FORCE"
PREBUILT_DIR = Path(__file__).resolve().parent / "prebuilt"
PREFIX = "liblossgrad_ort-prebuilt-"
PROBE_NAME = "liblossgrad_cpu_level.so"
MANIFEST = "manifest.json"

PROBE_SOURCE = (
    "// Built for baseline x86-64, so that it loads on every x86-64 CPU.\n"
    'extern "C" __attribute__((visibility("default"))) unsigned lossgrad_cpu_features() {\n'
    "  __builtin_cpu_init();\n"
    "  unsigned found = 0;\n"
    + "".join(
        f'  if (__builtin_cpu_supports("{name}")) found |= 1u << {bit};\n'
        for bit, name in enumerate(FEATURES)
    )
    + "  return found;\n}\n"
)


def library_name(level: str) -> str:
    return f"{PREFIX}{level}.so"


def level_flags(level: str) -> tuple[str, ...]:
    return LEVEL_FLAGS[level]


def build_prebuilt(
    source: str, destination: Path, tools: Toolchain, levels: Sequence[str] = LEVELS
) -> list[Path]:
    """Build the library of each level (through the build cache, so an unchanged source,
    compiler and flags is a copy) and the CPU probe into `destination`, with a manifest of
    their sizes and checksums; the files written."""
    destination.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    builds = {
        library_name(level): _build(library_name(level), source, level_flags(level), tools)
        for level in levels
    }
    builds[PROBE_NAME] = build_probe(tools)
    for name, built in builds.items():
        target = destination / name
        shutil.copyfile(built, target)
        target.chmod(0o755)
        written[name] = target
    write_manifest(destination / MANIFEST, written)
    info = "\n".join(
        [
            f"compiler: {tools.version.splitlines()[0]}",
            f"ORT API: {tools.api_version}",
            *(f"{name}: sha256 {file_digest(path)}" for name, path in written.items()),
        ]
    )
    write_atomically(destination / "BUILD_INFO", (info + "\n").encode("utf-8"))
    return [*written.values(), destination / MANIFEST, destination / "BUILD_INFO"]


def build_probe(tools: Toolchain) -> Path:
    """The CPU probe, built (through the build cache) for baseline x86-64."""
    return _build(PROBE_NAME, PROBE_SOURCE, ("-march=x86-64",), tools, ("-O2",))


def _build(
    name: str,
    source: str,
    arch: tuple[str, ...],
    tools: Toolchain,
    flags: tuple[str, ...] = OPTIMIZE_FLAGS,
) -> Path:
    arch_tools = dataclasses.replace(tools, arch_flags=arch)
    return build_shared_library(source, name.removesuffix(".so"), flags, tools=arch_tools)


def prebuilt_present(directory: Path = PREBUILT_DIR) -> bool:
    return (directory / MANIFEST).is_file()


def level_for(features: Set[str]) -> str | None:
    """The highest level whose features are all in `features` (None: below x86-64-v2)."""
    runnable = [level for level in LEVELS if LEVEL_FEATURES[level] <= features]
    return runnable[-1] if runnable else None


def features_of(bits: int) -> frozenset[str]:
    """The probe's answer as feature names."""
    return frozenset(name for bit, name in enumerate(FEATURES) if bits >> bit & 1)


@cache
def cpu_features(directory: Path = PREBUILT_DIR) -> frozenset[str]:
    """Which of FEATURES this CPU has, by the probe library."""
    probe = ctypes.CDLL(str(directory / PROBE_NAME))
    probe.lossgrad_cpu_features.restype = ctypes.c_uint
    return features_of(int(probe.lossgrad_cpu_features()))


def prebuilt_library(directory: Path = PREBUILT_DIR) -> Path:
    """The prebuilt library for this CPU, or the level that $LOSSGRAD_ORT_MARCH names (one
    of LEVELS, and one this CPU runs unless $LOSSGRAD_ORT_MARCH_FORCE=1);
    NativeUnavailableError when there is none to use."""
    if not prebuilt_present(directory):
        raise NativeUnavailableError(
            "this installation has no prebuilt kernel library (the platform wheel for "
            "Linux x86-64 ships one)"
        )
    problem = manifest_problem(directory / MANIFEST)
    if problem is not None:
        raise NativeUnavailableError(
            f"the prebuilt kernel library in {directory} is damaged ({problem}); reinstall "
            "lossgrad_compiler"
        )
    requested = os.environ.get(ENV_MARCH)
    if requested is None:
        level = level_for(cpu_features(directory))
        if level is None:
            raise NativeUnavailableError(
                "this CPU lacks x86-64-v2 (SSE4.2, POPCNT), the oldest level of the prebuilt "
                "kernel libraries"
            )
    else:
        level = requested.strip()
        if level not in LEVELS:
            raise NativeUnavailableError(
                f"${ENV_MARCH}={requested} needs a C++ compiler: the prebuilt kernel libraries "
                f"are for {', '.join(LEVELS)}"
            )
        if os.environ.get(ENV_FORCE, "") in ("", "0"):
            _refuse_unrunnable(level, cpu_features(directory))
    library = directory / library_name(level)
    if not library.is_file():
        raise NativeUnavailableError(
            f"the prebuilt kernel library for {level} ({library.name}) is missing from "
            f"{directory}; reinstall lossgrad_compiler"
        )
    return library


def _refuse_unrunnable(level: str, features: frozenset[str]) -> None:
    """NativeUnavailableError when this CPU lacks a feature `level` needs."""
    missing = sorted(LEVEL_FEATURES[level] - features)
    if not missing:
        return
    own = level_for(features) or "below x86-64-v2"
    raise NativeUnavailableError(
        f"${ENV_MARCH}={level} names a level this CPU cannot run (it lacks "
        f"{', '.join(missing)}; its level is {own}), whose library would stop the process "
        f"with an illegal instruction; unset ${ENV_MARCH} to use this CPU's level, or set "
        f"${ENV_FORCE}=1 to load it anyway"
    )


def describe(library: Path | str) -> str:
    """Which library `library` is, from its name: a prebuilt level or a JIT build."""
    name = Path(library).name
    if name.startswith(PREFIX):
        return f"prebuilt for {name.removeprefix(PREFIX).removesuffix('.so')}"
    return "built here for this machine's CPU"
