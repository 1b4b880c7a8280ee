"""Compiling C++ source into a shared library, cached on disk by content.

The cache key is the hash of the source, the compiler's identity (`--version`), the flags and
the ONNX Runtime API version of the headers, so a change of any of them builds a new library
and an unchanged one is never rebuilt. Writes are atomic (a temporary file renamed into
place) and serialised by a lock file, so processes that build at the same time all get the
same complete library. A manifest beside the library (size and SHA-256, written after it)
must match before the library is used: a damaged one is rebuilt, never loaded. A cache
directory that cannot hold the library is a NativeUnavailableError naming
$LOSSGRAD_CACHE_DIR, which the runtime turns into one warning and the function path. So is
a compiler or linker that runs out of room (a full disk, a quota): that failure is recorded
beside the entry, and later processes refuse at once instead of compiling again, until the
source, compiler or flags change (another entry) or the file systems involved gain room."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lossgrad_compiler.backends.build_cache import (
    CacheDirError,
    build_notice,
    cache_dir_problem,
    cache_root,
    manifest_problem,
    out_of_space,
    prepare_cache_dir,
    remember_space_failure,
    remembered_space_failure,
    space_problem,
    write_atomically,
    write_manifest,
)
from lossgrad_compiler.backends.ort.errors import OrtBackendError

ENV_CXX = "CXX"
ENV_INCLUDE = "LOSSGRAD_ORT_INCLUDE"
# The headers the package ships (package data of the wheel and sdist, taken when they are
# built from Debian's libonnxruntime-dev, the package and checksum of
# scripts/fetch_ort_headers.sh; never committed), with their license text beside them.
SHIPPED_ORT = Path(__file__).resolve().parent / "onnxruntime"
SHIPPED_INCLUDE = SHIPPED_ORT / "include"
# A source checkout: the same headers, fetched into third_party/ by that script (`make` runs
# it). Only a checkout has the script, so only a checkout looks there or names it.
PROJECT_ROOT = Path(__file__).resolve().parents[3]
VENDORED_INCLUDE = PROJECT_ROOT / "third_party" / "onnxruntime" / "include"
FETCH_SCRIPT = PROJECT_ROOT / "scripts" / "fetch_ort_headers.sh"
SYSTEM_INCLUDE = Path("/usr/include/onnxruntime")
HEADER = "onnxruntime_c_api.h"

ENV_MARCH = "LOSSGRAD_ORT_MARCH"
# -fno-trapping-math lets g++ keep division and selects branch-free (with trapping math it
# may not speculate a division that could raise a flag); -fno-math-errno only drops errno
# writes; -ffp-contract=off keeps a*b+c two roundings, as the level-2 IR and reference.py
# compute. None changes a result; no -ffast-math. -mprefer-vector-width=512 lets g++ use
# 512-bit vectors where -march has them (it keeps 256 by default): with AVX-512 and g++ 12 the
# 16-lane loops run faster with it (docs/benchmarks.md, "The figures behind the kernels'
# choices", has the figures). Without AVX-512 the flag changes nothing.
# -fno-tree-sink keeps a call to the float log where the body has it: sunk into the branch of
# a select that uses it (KlDivTargetBackward's `target == 0 ? 0 : ...`), the call would stop
# the loop from being vectorised with the log's vector variant (cxx/vmath.h; without the flag
# no loop calls it, tests/ort/test_ort_vector_variants.py). -fno-thread-jumps keeps a call to the
# float exp whose argument is a select (the sigmoid's exp(z > 0 ? -z : z)) one call: jump
# threading copies it into both arms of the select, and the loop is then not vectorised
# (SoftMarginLossBackward's body with g++ 12: scalar calls, an order of magnitude slower;
# docs/benchmarks.md, "The figures behind the kernels' choices").
OPTIMIZE_FLAGS: tuple[str, ...] = (
    "-O3",
    "-fno-trapping-math",
    "-fno-math-errno",
    "-ffp-contract=off",
    "-mprefer-vector-width=512",
    "-fno-tree-sink",
    "-fno-thread-jumps",
)
LIBRARY_FLAGS: tuple[str, ...] = ("-std=c++17", "-fPIC", "-shared", "-fvisibility=hidden")


class NativeUnavailableError(OrtBackendError):
    """No C++ compiler, no ONNX Runtime headers or no usable cache directory: the native
    kernels cannot be built."""


class NoCompilerError(NativeUnavailableError):
    """No C++ compiler: none found, or the one found does not run. The prebuilt library
    serves instead, where the installation has one."""


class OutOfSpaceError(NativeUnavailableError):
    """The compiler or linker ran out of room (ENOSPC, a quota, RLIMIT_FSIZE): a fault of the
    environment, remembered beside the cache entry."""


@dataclass(frozen=True)
class Announcement:
    """What a build is and how long it takes, for the one notice a long build prints."""

    what: str  # e.g. "the native ONNX Runtime kernel library"
    duration: str  # e.g. "about a minute, once"


@dataclass(frozen=True)
class Toolchain:
    compiler: tuple[str, ...]  # the command, e.g. ("g++",) or ("ccache", "g++")
    version: str  # the compiler's --version output
    include: Path  # directory holding onnxruntime_c_api.h
    api_version: int  # ORT_API_VERSION of those headers
    arch_flags: tuple[str, ...]  # e.g. ("-march=znver3",): part of the cache key


def arch_flags(compiler: tuple[str, ...]) -> tuple[str, ...]:
    """`-march=native` for this machine, spelled out: the CPU's name plus every instruction
    set switch native sets differently from that name (the library is built where it runs,
    and the flags key the cache, so a cache shared with another CPU never serves it). The
    name alone is not enough: g++ 12 calls an AVX-512 Zen 4 "znver3", and -march=znver3 has
    no AVX-512. $LOSSGRAD_ORT_MARCH overrides it (e.g. x86-64-v2); empty means the compiler
    default."""
    configured = os.environ.get(ENV_MARCH)
    if configured is not None:
        return (f"-march={configured}",) if configured.strip() else ()
    native = target_help(compiler, "native")
    found = re.search(r"^\s*-march=\s+(\S+)", native, re.MULTILINE)
    if not found:
        return ()
    name = found.group(1)
    named = target_switches(target_help(compiler, name))
    extra = [
        f"-m{flag}" if on else f"-mno-{flag}"
        for flag, on in sorted(target_switches(native).items())
        if named.get(flag, not on) != on
    ]
    return (f"-march={name}", *extra)


def target_help(compiler: tuple[str, ...], march: str) -> str:
    """`-Q --help=target` for one -march (empty when the compiler cannot say)."""
    try:
        done = subprocess.run(
            [*compiler, f"-march={march}", "-Q", "--help=target"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout


def target_switches(target_help: str) -> dict[str, bool]:
    """The on/off target switches of a `-Q --help=target` listing, e.g. {"avx512f": True}."""
    listed = re.finditer(r"^\s*-m([\w.-]+)\s+\[(enabled|disabled)\]", target_help, re.MULTILINE)
    return {m.group(1): m.group(2) == "enabled" for m in listed}


def find_compiler() -> tuple[str, ...]:
    """$CXX, else c++, else g++."""
    configured = os.environ.get(ENV_CXX, "").strip()
    candidates = [tuple(shlex.split(configured))] if configured else [("c++",), ("g++",)]
    for command in candidates:
        if command and shutil.which(command[0]):
            return command
    tried = ", ".join(" ".join(c) for c in candidates)
    raise NoCompilerError(f"no C++ compiler found (tried {tried}; set ${ENV_CXX})")


def in_checkout() -> bool:
    """Whether this is the project's source checkout (not an installed package)."""
    return FETCH_SCRIPT.is_file()


def find_headers(fetch: bool = True) -> Path:
    """$LOSSGRAD_ORT_INCLUDE, else the headers the package ships, else (in a source checkout)
    third_party/onnxruntime/include, fetched by scripts/fetch_ort_headers.sh when missing,
    else /usr/include/onnxruntime."""
    configured = os.environ.get(ENV_INCLUDE)
    if configured:
        path = Path(configured)
        if not (path / HEADER).is_file():
            raise NativeUnavailableError(f"${ENV_INCLUDE}={configured} has no {HEADER}")
        return path
    if (SHIPPED_INCLUDE / HEADER).is_file():
        return SHIPPED_INCLUDE
    places = [SYSTEM_INCLUDE]
    if in_checkout():
        if not (VENDORED_INCLUDE / HEADER).is_file() and fetch:
            _fetch_headers()
        places.insert(0, VENDORED_INCLUDE)
    for path in places:
        if (path / HEADER).is_file():
            return path
    if in_checkout():
        missing, remedy = "", f"run {FETCH_SCRIPT.relative_to(PROJECT_ROOT)}, "
    else:
        missing, remedy = f" (the package's own {SHIPPED_INCLUDE} is missing)", "reinstall, "
    raise NativeUnavailableError(
        f"no ONNX Runtime headers{missing}: set ${ENV_INCLUDE} to a folder holding {HEADER}, "
        f"{remedy}or install libonnxruntime-dev"
    )


@cache
def _fetch_headers() -> None:
    """Run the fetch script once per process; a failure leaves the other header sources."""
    subprocess.run(
        ["sh", str(FETCH_SCRIPT), str(VENDORED_INCLUDE.parent)],
        capture_output=True,
        timeout=300,
        check=False,
    )


def api_version(include: Path) -> int:
    text = (include / HEADER).read_text(errors="replace")
    found = re.search(r"^#define ORT_API_VERSION (\d+)", text, re.MULTILINE)
    if not found:
        raise NativeUnavailableError(f"{include / HEADER} defines no ORT_API_VERSION")
    return int(found.group(1))


@cache
def toolchain() -> Toolchain:
    compiler = find_compiler()
    try:
        done = subprocess.run(
            [*compiler, "--version"], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise NoCompilerError(f"'{' '.join(compiler)} --version' failed: {err}") from None
    include = find_headers()
    return Toolchain(
        compiler, done.stdout.strip(), include, api_version(include), arch_flags(compiler)
    )


def cache_dir() -> Path:
    return cache_root() / "ort"


def cache_key(source: str, tools: Toolchain, flags: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for part in (source, tools.version, "\0".join(flags), str(tools.api_version)):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0\0")
    return digest.hexdigest()


def build_shared_library(
    source: str,
    name: str,
    flags: Sequence[str] = OPTIMIZE_FLAGS,
    directory: Path | None = None,
    tools: Toolchain | None = None,
    announce: Announcement | None = None,
) -> Path:
    """The shared library built from `source` with `flags` (cached; built on first use, and
    again when the cached file no longer matches its manifest). With `announce`, a build
    says on stderr what it builds, why and how long it takes; a cache hit prints nothing."""
    tools = tools or toolchain()
    all_flags = (*LIBRARY_FLAGS, *tools.arch_flags, *flags)
    key = cache_key(source, tools, all_flags)
    directory = directory or cache_dir()
    stem = f"{name}-{key[:24]}"
    library = directory / f"{stem}.so"
    manifest = directory / f"{stem}.manifest.json"
    if manifest_problem(manifest) is None:
        return library
    try:
        prepare_cache_dir(directory)
        lock = open(directory / f"{stem}.lock", "w")  # noqa: SIM115 (closed by `with` below)
    except CacheDirError as err:
        raise NativeUnavailableError(str(err)) from None
    except OSError as err:
        raise NativeUnavailableError(cache_dir_problem(err, directory)) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent builder of the same key finishes first
        problem = manifest_problem(manifest)
        if problem is None:
            return library
        no_room = directory / f"{stem}.nospace.json"
        remembered = remembered_space_failure(no_room)
        if remembered is not None:
            raise NativeUnavailableError(
                f"{remembered} (found by an earlier build, which is tried again when the "
                "cache, the compiler or its flags change, or when there is more room)"
            )
        if library.exists():
            why = f"the cached copy cannot be used: {problem}"
        else:
            why = "not in the cache yet: first use, or the kernels, compiler or headers changed"
        notice = (
            build_notice(f"{announce.what} {library}", why, announce.duration)
            if announce
            else nullcontext()
        )
        try:
            with notice:
                _compile(source, library, tools, all_flags)
            write_manifest(manifest, {library.name: library})
        except OutOfSpaceError as err:
            remember_space_failure(no_room, str(err), [directory, tempfile.gettempdir()])
            raise
        except OSError as err:
            raise NativeUnavailableError(cache_dir_problem(err, directory)) from None
    return library


def _compile(source: str, library: Path, tools: Toolchain, flags: Sequence[str]) -> None:
    """Compile into a temporary file renamed over `library` (a process that has the old file
    loaded keeps its copy)."""
    directory = library.parent
    source_path = library.with_suffix(".cc")
    write_atomically(source_path, source.encode("utf-8"))
    fd, temporary = tempfile.mkstemp(prefix=f".{library.stem}.", suffix=".so.tmp", dir=directory)
    os.close(fd)
    command = [*tools.compiler, *flags, "-I", str(tools.include), str(source_path), "-o", temporary]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
        no_room = space_problem(done.stderr) if done.returncode != 0 else None
        if no_room is not None:
            source_path.unlink(missing_ok=True)  # give its room back; rewritten on a retry
            raise OutOfSpaceError(out_of_space(directory, library.name, no_room))
        if done.returncode != 0:
            raise OrtBackendError(
                f"building {library.name} failed ({' '.join(command)}):\n{done.stderr[-4000:]}"
            )
        os.replace(temporary, library)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
