"""The HFusion form as AscendNPU IR schedules it, run on this CPU: a shared library built by
the compiler's own CPU-runner lowering, so that the numbers of the vendor's fused, tiled
kernels can be checked against reference.py without Ascend hardware.

    HFusion form (+ a host entry for the runner, + C interfaces)
      → bishengir-opt --lower-hfusion-pipeline=block-dim=N --lower-for-cpu-runner-pipeline
        (fusion, auto-schedule, tiling, kernel outlining, then the LLVM dialect for a CPU)
      → mlir-translate --mlir-to-llvmir            (Debian's mlir-22-tools)
      → llvmlite: an object file                    (the extra `ascend`)
      → gcc -shared                                 → ctypes (runtime/ascendnpu_ir.py)

What runs is the HFusion stage's output: the same fusion, tile sizes and loops as on the
device, with the tile operations (still linalg on memrefs there) lowered for the CPU. The
HIVM stage after it cannot run here: the runner's HIVM-to-upstream conversion in 1.2.0 has
no pattern for `hivm.hir.vcast` or `vcmp` ("failed to legalize operation 'hivm.hir.vcast'").

The runner's pipeline starts from exactly one `host_entry` function whose arguments are all
tensors, and writes a `wrapper` that reads inputs from files; the scheduled kernels take a
tiling key pointer and a tiling struct instead. So each module gets a trivial host entry of
its own, the kernels are called through their C interfaces (`llvm.emit_c_interface`), and
the generated wrapper is cut from the LLVM IR before it is compiled. Libraries are cached
like the ORT kernel library."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, UnitAttr, f32
from xdsl.ir import Block, Region

from lossgrad_compiler.backends.ascendnpu_ir.hfusion import hfusion_module
from lossgrad_compiler.backends.ascendnpu_ir.hivm import AscendNpuIrSoc
from lossgrad_compiler.backends.ascendnpu_ir.split import split_results
from lossgrad_compiler.backends.ascendnpu_ir.toolchain import (
    EXTRA_HINT,
    AscendNpuIrUnavailableError,
    run_opt,
    version,
)
from lossgrad_compiler.backends.build_cache import cache_root, cached_build, write_atomically
from lossgrad_compiler.dialects import hfusion as hf

RUNNER_ENTRY = "lossgrad_cpu_runner_entry"
RUNNER_WRAPPER = "lossgrad_cpu_runner_wrapper"
LIBRARY_FILE = "kernels.so"
BUILD_RECIPE = "cpu-runner, mlir-translate, llvmlite O0 + truncsfbf2, gcc + poisoned malloc"
"""Part of a library's cache key: a change in how it is built invalidates the cache."""
MLIR_TRANSLATE_NAMES = (
    "mlir-translate-22",  # what .ci/run installs (Debian's mlir-22-tools)
    "mlir-translate",
    "mlir-translate-21",
    "mlir-translate-20",
    "mlir-translate-19",
)


class CpuRunnerUnavailableError(AscendNpuIrUnavailableError):
    """A tool the CPU runner needs besides AscendNPU IR is missing."""


@cache
def mlir_translate() -> str:
    """Upstream MLIR's mlir-translate (Debian's mlir-NN-tools install it with a suffix)."""
    for name in MLIR_TRANSLATE_NAMES:
        found = shutil.which(name)
        if found:
            return found
    for folder in sorted(Path("/usr/lib").glob("llvm-*/bin"), reverse=True):
        if os.access(folder / "mlir-translate", os.X_OK):
            return os.fspath(folder / "mlir-translate")
    raise CpuRunnerUnavailableError(
        "the AscendNPU IR CPU runner needs upstream MLIR's mlir-translate (Debian: "
        "apt-get install mlir-22-tools)"
    )


def llvmlite_binding() -> Any:
    try:  # deferred: llvmlite (LLVM itself) is loaded only to build a runner
        import llvmlite.binding as llvm
    except ImportError:
        raise CpuRunnerUnavailableError(
            f"the AscendNPU IR CPU runner needs llvmlite; {EXTRA_HINT}"
        ) from None
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def runner_module(level2: ModuleOp, result: int = 0) -> ModuleOp:
    """The HFusion form of a level-2 module of one signature with C interfaces on the
    kernels and the runner's host entry: the function of its `result`-th result (the
    gradient, or a check's count: split.py, one kernel per function)."""
    functions = list(split_results(hfusion_module(level2)).ops)
    return with_runner_entry(ModuleOp([functions[result].clone()]))


def with_runner_entry(module: ModuleOp) -> ModuleOp:
    """`module` (functions in the HFusion form) with C interfaces on its functions and the
    runner's host entry added."""
    for function in module.ops:
        function.attributes["llvm.emit_c_interface"] = UnitAttr()
    one = TensorType(f32, [1])
    block = Block(arg_types=[one])
    block.add_op(func.ReturnOp(block.args[0]))
    entry = func.FuncOp(RUNNER_ENTRY, ([one], [one]), Region(block))
    entry.attributes[hf.HACC_FUNCTION_KIND] = hf.FunctionKindAttr(hf.FunctionKind.HOST)
    entry.attributes[hf.HACC_HOST_FUNC_TYPE] = hf.HostFuncTypeAttr(hf.HostFuncType.HOST_ENTRY)
    module.body.block.add_op(entry)
    return module


def llvm_ir(hfusion: str, soc: AscendNpuIrSoc, *, schedule: bool = True) -> str:
    """LLVM IR of the kernels, without the runner's file-reading wrapper; `schedule=False`
    lowers the HFusion form as it is, without HFusion's fusion and auto-schedule (the form's
    own numbers, through the same CPU lowering)."""
    hfusion_stage = soc.hfusion_options if schedule else []
    llvm_dialect = run_opt(
        hfusion, [*hfusion_stage, f"--lower-for-cpu-runner-pipeline=wrapper-name={RUNNER_WRAPPER}"]
    )
    command = [mlir_translate(), "--allow-unregistered-dialect", "--mlir-to-llvmir"]
    done = subprocess.run(command, input=llvm_dialect, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"mlir-translate failed: {done.stderr.strip()}")
    wrapper = re.compile(rf"(?ms)^define [^\n]*@{RUNNER_WRAPPER}\(.*?^\}}\n")
    return wrapper.sub("", done.stdout)


TRUNC_F32_TO_BF16 = """
define weak bfloat @__truncsfbf2(float %x) {
  %bits = bitcast float %x to i32
  %magnitude = and i32 %bits, 2147483647
  %nan = icmp ugt i32 %magnitude, 2139095040
  %high = lshr i32 %bits, 16
  %odd = and i32 %high, 1
  %bias = add i32 %odd, 32767
  %rounded = add i32 %bits, %bias
  %quiet = or i32 %bits, 4194304
  %chosen = select i1 %nan, i32 %quiet, i32 %rounded
  %top = lshr i32 %chosen, 16
  %short = trunc i32 %top to i16
  %result = bitcast i16 %short to bfloat
  ret bfloat %result
}
"""
"""The compiler-runtime routine LLVM calls to round f32 to bf16 on an x86 without AVX512-BF16
(GCC 12's libgcc has none): round to nearest even, NaN kept and quieted, as `arith.truncf`
and ml_dtypes round."""


POISONED_MALLOC = """
#include <stddef.h>
#include <string.h>
void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size) {
    void *memory = __real_malloc(size);
    if (memory != NULL) memset(memory, 0xFF, size);
    return memory;
}
"""
"""The kernels' allocations, filled with 0xFF bytes (NaN in every float type): a read of a
buffer nothing wrote gives NaN, every time, instead of whatever malloc returned."""


def build_library(ir: str, path: Path) -> None:
    """LLVM IR → an object (llvmlite) → a shared library (gcc)."""
    llvm = llvmlite_binding()
    module = llvm.parse_assembly(ir + TRUNC_F32_TO_BF16)
    module.verify()
    # Unoptimised code: the checks are of numbers, and LLVM's O2 takes longer than the run.
    machine = llvm.Target.from_default_triple().create_target_machine(opt=0, reloc="pic")
    passes = llvm.create_new_module_pass_manager()
    passes.add_global_dead_code_eliminate_pass()  # the wrapper's file-reading helpers
    passes.run(module, llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options()))
    with tempfile.TemporaryDirectory(prefix="lossgrad-runner-") as scratch:
        obj = Path(scratch) / "kernels.o"
        obj.write_bytes(machine.emit_object(module))
        poison = Path(scratch) / "poison.c"
        poison.write_text(POISONED_MALLOC)
        linked = Path(scratch) / LIBRARY_FILE
        done = subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-O1",
                "-Wl,--wrap=malloc",
                "-o",
                os.fspath(linked),
                os.fspath(obj),
                os.fspath(poison),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"linking the CPU runner failed: {done.stderr.strip()}")
        write_atomically(path, linked.read_bytes())


def runner_library(
    level2: ModuleOp, soc: AscendNpuIrSoc, *, schedule: bool = True, result: int = 0
) -> Path:
    """The cached shared library of one signature's scheduled kernel (of its `result`-th
    result: 0 the gradient, k > 0 a check's count), from a level-2 module of that one
    signature (built now if the cache has no valid one). One signature per module, as the
    target compiles them: AscendNPU IR 1.2.0 crashes on, or silently miscompiles, some
    modules that hold several."""
    (function,) = level2.ops
    assert isinstance(function, func.FuncOp)
    text = str(runner_module(level2, result))
    parts = [text, version(), BUILD_RECIPE, *soc.opt_options, f"schedule={schedule}"]
    key = hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()

    def build(folder: Path) -> dict[str, Path]:
        build_library(llvm_ir(text, soc, schedule=schedule), folder / LIBRARY_FILE)
        write_atomically(folder / "kernel.hfusion.mlir", text.encode("utf-8"))
        return {LIBRARY_FILE: folder / LIBRARY_FILE}

    notice = ("a CPU runner of an AscendNPU IR kernel", function.sym_name.data, "about a second")
    return cached_build(cache_root() / "ascendnpu-ir" / key[:32], LIBRARY_FILE, notice, build)
