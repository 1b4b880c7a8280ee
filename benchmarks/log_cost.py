"""The float log of the native kernels (cxx/vmath.h) against IREE's math.log: accuracy and
cost per element, on this machine. KlDivTargetBackward (log_target 0) is bound by its log in
the half types; this shows what each log pays for.

    .venv/bin/python benchmarks/log_cost.py

Accuracy: every 7th positive float, against float64's log, in units of the float spacing at
the rounded result; normal and subnormal inputs apart. Cost: nanoseconds per element a call
adds between 2^16 and 2^20 inputs (the difference cancels the fixed cost of a call), one
thread, the minimum of interleaved repeats. The native log writes into a buffer allocated
once; an IREE call returns a new result buffer, so its figure includes whatever its allocator
does per element (an upper bound on its arithmetic). IREE needs the extra `iree`.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_ort_native import IN_CACHE, best_times, per_element_between
from lossgrad_compiler.backends.ort.build import build_shared_library
from lossgrad_compiler.backends.ort.library import runtime_header

HARNESS = """
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <immintrin.h>
%s
%s
extern "C" __attribute__((visibility("default")))
void log_f(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = lossgrad::log(x[i]);
}
"""

IREE_LOG = """
#map = affine_map<(d0) -> (d0)>
func.func @log(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %l = math.log %a : f32
    linalg.yield %l : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""

Log = Callable[[np.ndarray], np.ndarray]


def native_log() -> Log:
    source = HARNESS % (runtime_header("half.h"), runtime_header("vmath.h"))
    library = ctypes.CDLL(str(build_shared_library(source, "log_cost")))

    def apply(x: np.ndarray) -> np.ndarray:
        out = np.empty_like(x)
        library.log_f(
            ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(x.size)
        )
        return out

    return apply


def iree_log() -> Log | None:
    try:
        import iree.runtime as rt
    except ImportError:
        return None
    from lossgrad_compiler.backends.iree.compiler import compile_text

    context = rt.SystemContext(config=rt.Config("local-sync"))
    context.add_vm_module(rt.VmModule.copy_buffer(context.instance, compile_text(IREE_LOG)))
    function = context.modules.module["log"]
    return lambda x: np.asarray(function(x))


def ulps(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    exact = np.log(x.astype(np.float64))
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.abs(got.astype(np.float64) - exact) / spacing


def accuracy(log: Log) -> tuple[float, int, float]:
    """Largest error on normal inputs, how many exceed 0.5 ulp, largest on subnormals."""
    x = np.arange(1, 0x7F800000, 7, dtype=np.uint32).view(np.float32)
    got = np.concatenate([log(x[i : i + (1 << 24)]) for i in range(0, x.size, 1 << 24)])
    err = ulps(got, x)
    normal = x >= np.finfo(np.float32).tiny
    return float(err[normal].max()), int((err[normal] > 0.5).sum()), float(err[~normal].max())


def cost(logs: dict[str, Log]) -> dict[str, float]:
    rng = np.random.default_rng(0)
    inputs = {k: rng.uniform(0.05, 3.0, 1 << k).astype(np.float32) for k in IN_CACHE}
    runners = {
        f"{name} {k}": (lambda f=f, x=x: f(x))
        for name, f in logs.items()
        for k, x in inputs.items()
    }
    times = best_times(runners)
    small, large = IN_CACHE
    return {
        name: per_element_between(times[f"{name} {small}"], times[f"{name} {large}"])
        for name in logs
    }


def main() -> None:
    logs = {"native (vmath.h)": native_log()}
    if (iree := iree_log()) is not None:
        logs["IREE math.log"] = iree
    else:
        print("IREE is not installed (pip install 'lossgrad_compiler[iree]'): native only")
    per_element = cost(logs)
    print(
        f"{'log':18} {'max ulp':>8} {'> 0.5 ulp':>10} {'max ulp':>10} {'log(1e-40)':>11} "
        f"{'ns/elem':>8}\n{'':18} {'(normal inputs)':>19} {'(subnormal inputs)':>22}"
    )
    for name, log in logs.items():
        worst, above_half, subnormal = accuracy(log)
        tiny = log(np.array([1e-40], np.float32))[0]
        print(
            f"{name:18} {worst:8.3f} {above_half:10d} {subnormal:10.3f} {tiny:11.2f} "
            f"{per_element[name]:8.3f}"
        )
    print(f"(float64: log(1e-40) = {np.log(1e-40):.2f})")


if __name__ == "__main__":
    main()
