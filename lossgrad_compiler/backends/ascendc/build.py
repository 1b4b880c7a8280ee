"""Compile projects against the CPU emulation into a runner executable.

A runner is one translation unit: a generated glue file includes each project's op_kernel,
op_host and op_api sources (unchanged; every name in them is unique to its OpType, so
several signatures can share one build), registers the kernel entries, and runs batches
of aclnn calls (lossgrad_emu/runner.h). The kernel-independent part of the emulation
(runtime.cpp) is compiled once, beside a precompiled header of the emulation headers.

Everything is cached by the hash of the sources, the emulation, the compiler's identity
and the flags. Builds happen in private directories, are renamed into place, and are
serialised by a lock file per key, so parallel test workers never build the same thing
twice. Each entry has a manifest (size and SHA-256 of its files, written last) that must
match before the entry is used: a truncated or damaged runner, object or precompiled header
is rebuilt. A cache directory that cannot hold the builds raises CacheDirError naming
$LOSSGRAD_CACHE_DIR (the emulation has no fallback).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from lossgrad_compiler.backends.ascendc.aclnn_printer import AclnnAttribute, attribute_params
from lossgrad_compiler.backends.ascendc.project import Project
from lossgrad_compiler.backends.build_cache import (
    CacheDirError,
    build_notice,
    cache_dir_problem,
    cache_root,
    manifest_problem,
    prepare_cache_dir,
    write_atomically,
    write_manifest,
)
from lossgrad_compiler.errors import UnsupportedByBackendError

EMULATOR_DIR = Path(__file__).parent / "emulator"
ENV_CXX = "CXX"
MANIFEST = "manifest.json"
RUNTIME_FILES = ("runtime.o", *(f"{kind}/{name}" for kind in ("kernel", "host")
                                for name in ("pch.h", "pch.h.gch")))  # fmt: skip
# IEEE float arithmetic as written: no contraction into FMA, no fast-math reassociation.
COMMON = ("-std=c++17", "-ffp-contract=off", "-fno-fast-math", "-w")
# Kernels run every element through the emulation: optimised. The host side (tiling,
# wrapper, glue) runs once per call and is mostly string handling: compiled fast instead.
FLAGS = {"kernel": (*COMMON, "-O1"), "host": (*COMMON, "-O0")}


def cache_dir() -> Path:
    return cache_root() / "ascendc"


@cache
def compiler() -> tuple[str, str]:
    """(the C++ compiler command, its --version text)."""
    cxx = os.environ.get(ENV_CXX) or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise UnsupportedByBackendError(
            "ascendc", "emulation", "needs a C++17 compiler (g++ or $CXX) on PATH"
        )
    try:
        version = subprocess.run(
            [cxx, "--version"], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UnsupportedByBackendError(
            "ascendc", "emulation", f"needs a C++17 compiler; {cxx} --version did not run: {err}"
        ) from None
    if version.returncode != 0:
        said = (version.stderr.strip().splitlines() or ["no message"])[0]
        raise UnsupportedByBackendError(
            "ascendc", "emulation",
            f"needs a C++17 compiler; {cxx} --version failed ({said})",
        )  # fmt: skip
    return cxx, version.stdout


def _call_function(index: int, project: Project) -> str:
    """The runner's call of one signature's aclnn API: the case's inputs, then its attribute
    values in the order of the operator's attribute table (aclnn_printer.attribute_params)."""
    info = project.info
    inputs = [f"c.input({k})" for k in range(len(info.op.inputs))]
    attributes = [_attribute_argument(k, p) for k, p in enumerate(attribute_params(info.op))]
    arguments = ", ".join([*inputs, *attributes, "c.output()"])
    return f"""static aclnnStatus Call{index}(lossgrad_emu::Case& c)
{{
    uint64_t workspaceSize = 0;
    aclOpExecutor* executor = nullptr;
    aclnnStatus status = aclnn{info.op_type}GetWorkspaceSize(
        {arguments},
        c.workspace_size(&workspaceSize), c.executor(&executor));
    if (status != ACLNN_SUCCESS) {{
        return status;
    }}
    void* workspace = nullptr;
    if (workspaceSize > 0) {{
        aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
    }}
    status = aclnn{info.op_type}(workspace, workspaceSize, executor, nullptr);
    aclrtFree(workspace);
    return status;
}}
"""


def _attribute_argument(k: int, param: AclnnAttribute) -> str:
    if param.cxx_type == "double":
        return f"c.float_attribute({k})"
    if param.cxx_type == "bool":
        return f"c.int_attribute({k}) != 0"
    return f"c.int_attribute({k})"


def kernels_source(projects: Sequence[Project]) -> str:
    """The translation unit of every project's op_kernel source."""
    includes = [
        f'#include "p{k}/op_kernel/{p.info.kernel_name}.cpp"' for k, p in enumerate(projects)
    ]
    return "\n".join(["// Generated by lossgrad_compiler: the kernels of one runner.",
                      '#include "kernel_operator.h"', *includes, ""])  # fmt: skip


def glue_source(projects: Sequence[Project]) -> str:
    """The runner's main file: each project's op_host and op_api, one call per signature."""
    includes, declarations, calls, cases, registrations = [], [], [], [], []
    for k, project in enumerate(projects):
        # the kernel entry: a GM address per input given, the output, workspace, tiling
        count = len(project.info.inputs) + 3
        params = ", ".join(["GM_ADDR"] * count)
        args = ", ".join(f"a[{j}]" for j in range(count))
        name = project.info.kernel_name
        includes += [
            f'#include "p{k}/op_host/{name}.cpp"',
            f'#include "p{k}/op_api/aclnn_{name}.cpp"',
        ]
        declarations.append(f'extern "C" void {name}({params});')
        calls.append(_call_function(k, project))
        cases.append(f"        case {k}: return Call{k}(c);")
        registrations.append(
            f'    lossgrad_emu::RegisterKernel("{project.info.op_type}", "{name}", '
            f"[](GM_ADDR* a) {{ {name}({args}); }});"
        )
    return "\n".join(
        [
            "// Generated by lossgrad_compiler: runs Ascend C projects on the CPU emulation.",
            '#include "lossgrad_emu/runner.h"',
            "",
            *includes,
            "",
            *declarations,
            "",
            *calls,
            "static aclnnStatus Call(lossgrad_emu::Case& c)",
            "{",
            "    switch (c.signature) {",
            *cases,
            "        default: return ACLNN_ERR_PARAM_INVALID;",
            "    }",
            "}",
            "",
            "int main(int argc, char** argv)",
            "{",
            *registrations,
            "    return lossgrad_emu::RunCaseFile(argc, argv, Call);",
            "}",
            "",
        ]
    )


def _emulator_files() -> dict[str, str]:
    return {
        str(p.relative_to(EMULATOR_DIR)): p.read_text()
        for p in sorted([*EMULATOR_DIR.rglob("*.h"), *EMULATOR_DIR.rglob("*.cpp")])
    }


def _digest(parts: dict[str, str]) -> str:
    digest = hashlib.sha256()
    _, version = compiler()
    for part in (version, repr(FLAGS)):
        digest.update(part.encode() + b"\0")
    for path in sorted(parts):
        digest.update(path.encode() + b"\0" + parts[path].encode() + b"\0")
    return digest.hexdigest()[:32]


def _compile(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"compiling {what} failed:\n" + done.stderr[-6000:])


@contextmanager
def _locked(target: Path) -> Iterator[None]:
    """Serialise builds of one key across processes (CacheDirError when the cache directory
    cannot hold the lock file)."""
    prepare_cache_dir(target.parent)
    try:
        lock = open(target.parent / f"{target.name}.lock", "w")  # noqa: SIM115 (closed below)
    except OSError as err:
        raise CacheDirError(cache_dir_problem(err, target.parent)) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        except OSError as err:
            if isinstance(err, CacheDirError) or not _inside(err.filename, target.parent):
                raise
            raise CacheDirError(cache_dir_problem(err, target.parent)) from None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _inside(filename: object, directory: Path) -> bool:
    """Whether an OSError's file is in the cache (a full disk, say), not the compiler's."""
    return isinstance(filename, str | os.PathLike) and Path(filename).is_relative_to(directory)


def _why(target: Path, problem: str, primary: str) -> str:
    if (target / primary).exists():
        return f"the cached copy in {target} cannot be used: {problem}"
    return "not in the cache yet: first use, or the emulation or the compiler changed"


@cache
def emulator_runtime() -> Path:
    """The emulation's kernel-independent object (runtime.o) and precompiled headers of its
    headers for both flag sets, built once per emulator version, compiler and flags."""
    target = cache_dir() / f"emulator-{_digest(_emulator_files())}"
    if manifest_problem(target / MANIFEST) is None:
        return target
    with _locked(target):
        problem = manifest_problem(target / MANIFEST)
        if problem is None:
            return target
        cxx, _ = compiler()
        target.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=target, prefix=".build-"))
        what = "the Ascend C CPU emulation's runtime and precompiled headers"
        duration = "3 compiler runs, about 15 s, once"
        try:
            with build_notice(what, _why(target, problem, "runtime.o"), duration):
                include = f"-I{EMULATOR_DIR}"
                for kind, flags in FLAGS.items():
                    (work / kind).mkdir()
                    (work / kind / "pch.h").write_text('#include "lossgrad_emu/pch.h"\n')
                    header = [cxx, *flags, include, "-x", "c++-header", str(work / kind / "pch.h")]
                    _compile([*header, "-o", str(work / kind / "pch.h.gch")],
                             "the emulation's header")  # fmt: skip
                runtime = EMULATOR_DIR / "lossgrad_emu" / "runtime.cpp"
                _compile([cxx, *FLAGS["kernel"], include, "-c", str(runtime), "-o",
                          str(work / "runtime.o")], "the emulation runtime")  # fmt: skip
            for name in RUNTIME_FILES:  # file by file: a compiler reading the old copy keeps it
                (target / name).parent.mkdir(exist_ok=True)
                os.replace(work / name, target / name)
            write_manifest(target / MANIFEST, {name: target / name for name in RUNTIME_FILES})
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def runner_sources(projects: Sequence[Project]) -> dict[str, str]:
    sources = {"glue.cpp": glue_source(projects), "kernels.cpp": kernels_source(projects)}
    for k, project in enumerate(projects):
        sources.update({f"p{k}/{path}": text for path, text in project.files.items()})
    return sources


def build_runner(projects: Sequence[Project], replace: dict[str, str] | None = None) -> Path:
    """The runner executable of the projects (compiled on first use, then cached).

    `replace` overrides source files by their runner-relative path, e.g.
    `p0/op_kernel/<name>.cpp` (tests build deliberately broken kernels this way)."""
    names = ", ".join(p.info.op_type for p in projects)
    sources = {**runner_sources(projects), **(replace or {})}
    units = {"kernels.cpp": "kernel", "glue.cpp": "host"}
    return build_executable(sources, units, f"the Ascend C emulation of {names}")


def build_executable(
    sources: dict[str, str], units: dict[str, str], what: str = "a program"
) -> Path:
    """Compile the translation units `units` (source file → "kernel" or "host" flags) of
    `sources` with the emulation headers and runtime into one cached executable."""
    runtime = emulator_runtime()
    target = cache_dir() / _digest({**sources, "units": repr(units), "runtime": str(runtime)})
    executable = target / "runner"
    if manifest_problem(target / MANIFEST) is None:
        return executable
    with _locked(target):
        problem = manifest_problem(target / MANIFEST)
        if problem is None:
            return executable
        cxx, _ = compiler()
        target.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=target, prefix=".build-"))
        duration = f"{len(units)} translation unit{'s' if len(units) > 1 else ''}, about 5 s"
        try:
            with build_notice(what, _why(target, problem, "runner"), duration):
                for relative, text in sources.items():
                    write_atomically(work / relative, text.encode("utf-8"))
                jobs = []
                for unit, kind in units.items():
                    command = [cxx, *FLAGS[kind], f"-I{EMULATOR_DIR}", f"-I{work}", "-include",
                               str(runtime / kind / "pch.h"), "-c", str(work / unit), "-o",
                               str(work / f"{unit}.o")]  # fmt: skip
                    jobs.append(subprocess.Popen(command, stderr=subprocess.PIPE, text=True))
                messages = [job.communicate()[1] for job in jobs]
                errors = [m for job, m in zip(jobs, messages, strict=True) if job.returncode != 0]
                if errors:
                    raise RuntimeError(f"compiling {what} failed:\n" + errors[0][-6000:])
                objects = [str(work / f"{unit}.o") for unit in units]
                # -pthread: the runtime runs a multi-core launch's cores as threads (SyncAll)
                _compile([cxx, *objects, str(runtime / "runtime.o"), "-pthread", "-o",
                          str(work / "runner")], what)  # fmt: skip
            shutil.rmtree(target / "src", ignore_errors=True)
            os.replace(work, target / "src")  # keep the sources beside the executable
            os.replace(target / "src" / "runner", executable)
            write_manifest(target / MANIFEST, {"runner": executable})
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return executable
