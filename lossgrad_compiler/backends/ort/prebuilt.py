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
AVX-512, whether the OS saves their registers), for the highest level this CPU runs."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import shutil
from collections.abc import Sequence
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
# and without it the bfloat16 cells of bench_ort_native.py took 1.09-1.23x the JIT build's
# time on a Zen 4 (same bits either way). Each is built with these -march/-m flags.
LEVEL_FLAGS: dict[str, tuple[str, ...]] = {
    "x86-64-v2": ("-march=x86-64-v2",),
    "x86-64-v3": ("-march=x86-64-v3",),
    "x86-64-v4": ("-march=x86-64-v4",),
    "x86-64-v4-avx512bf16": ("-march=x86-64-v4", "-mavx512bf16"),
}
LEVELS = tuple(LEVEL_FLAGS)
PREBUILT_DIR = Path(__file__).resolve().parent / "prebuilt"
PREFIX = "liblossgrad_ort-prebuilt-"
PROBE_NAME = "liblossgrad_cpu_level.so"
MANIFEST = "manifest.json"

PROBE_SOURCE = """\
// Built for baseline x86-64, so that it loads on every x86-64 CPU.
extern "C" __attribute__((visibility("default"))) int lossgrad_x86_64_level() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4"))
    return __builtin_cpu_supports("avx512bf16") ? 5 : 4;
  if (__builtin_cpu_supports("x86-64-v3")) return 3;
  if (__builtin_cpu_supports("x86-64-v2")) return 2;
  return 1;
}
"""


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
    builds = [
        (library_name(level), source, level_flags(level), OPTIMIZE_FLAGS) for level in levels
    ]
    builds.append((PROBE_NAME, PROBE_SOURCE, ("-march=x86-64",), ("-O2",)))
    for name, text, arch, flags in builds:
        level_tools = dataclasses.replace(tools, arch_flags=arch)
        built = build_shared_library(text, name.removesuffix(".so"), flags, tools=level_tools)
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


def prebuilt_present(directory: Path = PREBUILT_DIR) -> bool:
    return (directory / MANIFEST).is_file()


@cache
def cpu_level(directory: Path = PREBUILT_DIR) -> int:
    """The highest x86-64 level this CPU runs (1: baseline only; 5: v4 with AVX512-BF16),
    by the probe library."""
    probe = ctypes.CDLL(str(directory / PROBE_NAME))
    probe.lossgrad_x86_64_level.restype = ctypes.c_int
    return int(probe.lossgrad_x86_64_level())


def prebuilt_library(directory: Path = PREBUILT_DIR) -> Path:
    """The prebuilt library for this CPU, or the level that $LOSSGRAD_ORT_MARCH names (one
    of LEVELS); NativeUnavailableError when there is none to use."""
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
    if requested is not None:
        if requested.strip() not in LEVELS:
            raise NativeUnavailableError(
                f"${ENV_MARCH}={requested} needs a C++ compiler: the prebuilt kernel libraries "
                f"are for {', '.join(LEVELS)}"
            )
        return directory / library_name(requested.strip())
    level = cpu_level(directory)
    if level < 2:
        raise NativeUnavailableError(
            "this CPU lacks x86-64-v2 (SSE4.2, POPCNT), the oldest level of the prebuilt "
            "kernel libraries"
        )
    return directory / library_name(LEVELS[min(level, len(LEVELS) + 1) - 2])


def describe(library: Path | str) -> str:
    """Which library `library` is, from its name: a prebuilt level or a JIT build."""
    name = Path(library).name
    if name.startswith(PREFIX):
        return f"prebuilt for {name.removeprefix(PREFIX).removesuffix('.so')}"
    return "built here for this machine's CPU"
