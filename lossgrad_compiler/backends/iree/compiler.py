"""Level 2 → MLIR text → an IREE module (.vmfb), cached like the ORT library.

The text is what `lossgrad-opt -p lower-lossgrad` prints (IREE's input is linalg on tensors
with arith/math bodies, which level 2 is), with each function behind the size check of
guards.py. The level-2 module comes from the pipeline (evaluation.iree asks it for the signatures
of its calls). One module holds one exported function per signature, named by the signature's
id. Modules are cached by the text, the compiler's version and revision, the flags and (for
`cpu="host"`) this machine's CPU, and validated against the manifest recorded when they
were built."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from functools import cache
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler import level2
from lossgrad_compiler.backends.build_cache import cache_root, cached_build, write_atomically
from lossgrad_compiler.backends.iree.guards import guard_exports
from lossgrad_compiler.backends.iree.options import IreeOptions, iree_module
from lossgrad_compiler.backends.iree.rounding import keep_bf16_roundings

MODULE_FILE = "module.vmfb"


class IreeCompileError(RuntimeError):
    """iree-compile rejected the module: its diagnostics, and the command line."""


def module_text(module: ModuleOp, options: IreeOptions | None = None) -> str:
    """The text of a level-2 module, checked against docs/level2.md and the element types the
    device of `options` runs, each function exported behind its run-time size check
    (guards.py), with its bfloat16 roundings kept (rounding.py); `module` itself is left as
    it is."""
    level2.verify_level2(module)
    for function in level2.signature_functions(module):
        types = tuple(o.storage for o in function.operands)
        (options or IreeOptions()).check_types(function.op.name, types)
    guarded = module.clone()
    guard_exports(guarded)
    keep_bf16_roundings(guarded)
    return str(guarded)


@cache
def compiler_identity() -> str:
    """IREE's version and source revision (pip's version alone names no build)."""
    version = iree_module("iree.compiler.version")
    revisions = getattr(version, "REVISIONS", {})
    return f"{version.VERSION} {json.dumps(revisions, sort_keys=True)}"


@cache
def host_cpu_identity() -> str:
    """What `--iree-llvmcpu-target-cpu=host` compiles for: the CPU model and its features."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = ("model name", "flags", "Features", "CPU part")
    first: dict[str, str] = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() in wanted:
            first.setdefault(key.strip(), value.strip())
    return f"{platform.machine()} {json.dumps(first, sort_keys=True)}"


def compile_text(text: str, options: IreeOptions | None = None) -> bytes:
    """The vmfb of a module's text, compiled by iree-compile (run as a tool so that its
    diagnostics can be reported)."""
    options = options or IreeOptions()
    binaries = iree_module("iree.compiler.tools.binaries")
    command = [binaries.find_tool("iree-compile"), "-", *options.flags, "-o", "-"]
    done = subprocess.run(command, input=text.encode("utf-8"), capture_output=True, check=False)
    if done.returncode != 0 or not done.stdout:
        diagnostics = done.stderr.decode("utf-8", "replace").strip()
        raise IreeCompileError(
            f"iree-compile failed (exit {done.returncode}): {diagnostics}\n"
            f"command: {' '.join(command)}"
        )
    return done.stdout


def cache_key(text: str, options: IreeOptions) -> str:
    parts = [text, compiler_identity(), *options.flags]
    if options.backend == "llvm-cpu" and options.cpu == "host":
        parts.append(host_cpu_identity())
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def compile_module(module: ModuleOp, options: IreeOptions | None = None) -> Path:
    """The cached IREE module of a level-2 module (compiled now if the cache has no valid
    one)."""
    options = options or IreeOptions()
    text = module_text(module, options)
    folder = cache_root() / "iree" / cache_key(text, options)[:32]

    def build(folder: Path) -> dict[str, Path]:
        write_atomically(folder / MODULE_FILE, compile_text(text, options))
        write_atomically(folder / "module.mlir", text.encode("utf-8"))
        return {MODULE_FILE: folder / MODULE_FILE, "module.mlir": folder / "module.mlir"}

    why = f"{options.backend}, {len(module.ops)} signature(s)"
    return cached_build(
        folder, MODULE_FILE, ("an IREE module", why, "about a second per signature"), build
    )
