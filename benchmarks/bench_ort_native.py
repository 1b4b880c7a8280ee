"""Native ORT kernels against the ONNX function path, PyTorch eager backward, numpy and a
STREAM-like triad, for the three operators.

    .venv/bin/python benchmarks/bench_ort_native.py [--quick]

Each figure is the minimum over repeated runs (other jobs share the machine; minima are
stable where medians are not). Inputs: reduction "mean", a 0-d grad_output, self and target
of n elements. GB/s counts the bytes the operator must move (the tensors it reads and
writes: KlDivBackward never reads self); "x triad" is that rate as a fraction of the triad
a[i] = b[i] + s*c[i] measured here with the same compiler and thread count.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import reference, spec
from lossgrad_compiler.backends.ort.build import build_shared_library
from lossgrad_compiler.runtime.ort import prepare_model, session_options
from lossgrad_compiler.runtime.ort_io import to_ort_value

OPS = ("KlDivBackward", "SmoothL1LossBackward", "KlDivTargetBackward")
ATTRS = {
    "KlDivBackward": {"reduction": "mean", "log_target": 0},
    "KlDivTargetBackward": {"reduction": "mean", "log_target": 0},
    "SmoothL1LossBackward": {"reduction": "mean", "beta": 0.5},
}
STREAMS = {"KlDivBackward": 2, "KlDivTargetBackward": 3, "SmoothL1LossBackward": 3}

TRIAD_SOURCE = r"""
#include <cstdint>
#include <thread>
#include <vector>
extern "C" __attribute__((visibility("default")))
void triad(float* a, const float* b, const float* c, float s, int64_t n, int threads) {
  auto part = [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
  };
  std::vector<std::thread> pool;
  const int64_t step = (n + threads - 1) / threads;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back(part, t * step < n ? t * step : n, (t + 1) * step < n ? (t + 1) * step : n);
  part(0, step < n ? step : n);
  for (auto& th : pool) th.join();
}
"""


def best_time(run: Callable[[], object], budget: float = 1.0, min_runs: int = 3) -> float:
    """Minimum seconds per call over repeated calls within about `budget` seconds."""
    run()  # warm up (allocations, page faults, lazy initialisation)
    best = float("inf")
    start = time.perf_counter()
    runs = 0
    while runs < min_runs or (time.perf_counter() - start < budget and runs < 200):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best


def make_inputs(op: str, n: int, dtype: np.dtype, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    target = rng.uniform(0.05, 3.0, n) if op == "KlDivTargetBackward" else rng.normal(0, 1, n)
    return {
        "grad_output": np.array(1.0, dtype),
        "self": rng.normal(0, 1, n).astype(dtype),
        "target": target.astype(dtype),
    }


def single_node_model(op: str, dtype: np.dtype) -> object:
    node = lo.make_node(op, ["go", "x", "t"], "out", **ATTRS[op])
    graph = lo.make_graph(
        [node],
        [("go", dtype, ()), ("x", dtype, ("n",)), ("t", dtype, ("n",))],
        [("out", dtype, ("n",))],
    )
    return prepare_model(lo.make_model(graph))


def ort_runner(model: object, inputs: dict[str, np.ndarray], threads: int, native: bool):
    so = session_options(native, intra_op_num_threads=threads, inter_op_num_threads=1)
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    for name, key in zip(("go", "x", "t"), spec.INPUT_NAMES, strict=True):
        binding.bind_ortvalue_input(name, to_ort_value(inputs[key]))
    out = to_ort_value(np.empty_like(inputs["self"]))
    binding.bind_ortvalue_output("out", out)
    return lambda: sess.run_with_iobinding(binding)


def torch_runner(op: str, inputs: dict[str, np.ndarray], threads: int):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    dtype = {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16}.get(
        inputs["self"].dtype, torch.bfloat16
    )
    x = torch.tensor(inputs["self"].astype(np.float32), dtype=dtype)
    t = torch.tensor(inputs["target"].astype(np.float32), dtype=dtype)
    go = torch.tensor(1.0, dtype=dtype)
    if op == "SmoothL1LossBackward":
        # aten's mean reduction code is 1
        return lambda: torch.ops.aten.smooth_l1_loss_backward(go, x, t, 1, 0.5)
    wrt = x if op == "KlDivBackward" else t
    wrt.requires_grad_(True)
    with warnings.catch_warnings():  # torch warns that 'mean' will change meaning
        warnings.simplefilter("ignore")
        loss = torch.nn.functional.kl_div(x, t, reduction="mean")
    return lambda: torch.autograd.grad(loss, [wrt], grad_outputs=go, retain_graph=True)


def triad_runner(n: int, threads: int):
    import ctypes

    library = ctypes.CDLL(str(build_shared_library(TRIAD_SOURCE, "bench_triad")))
    library.triad.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_float,
        ctypes.c_int64,
        ctypes.c_int,
    ]
    a, b, c = (np.ones(n, np.float32) for _ in range(3))
    return lambda: library.triad(a.ctypes.data, b.ctypes.data, c.ctypes.data, 3.0, n, threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^16 and 2^20 only, fp32")
    parser.add_argument("--ops", nargs="+", choices=OPS, default=OPS, help="operators to run")
    parser.add_argument(
        "--only", nargs="+", metavar="LOG2N:TYPE", help="cases to run, e.g. 22:float16"
    )
    args = parser.parse_args()
    sizes = [(16, "float32"), (20, "float32")]
    if not args.quick:
        sizes += [(22, "float32"), (24, "float32"), (22, "float16"), (22, "bfloat16")]
    if args.only:
        sizes = [(int(n), t) for n, t in (case.split(":") for case in args.only)]
    print(f"onnxruntime {ort.__version__}; times in ms (minimum of repeated runs)")
    header = (
        f"{'op':22} {'n':>5} {'type':8} {'thr':>3} {'native':>8} {'function':>9} "
        f"{'torch':>8} {'numpy':>8} {'triad':>7} {'GB/s':>6} {'x triad':>7} "
        f"{'vs fn':>6} {'vs torch':>8}"
    )
    print(header)
    print("-" * len(header))
    for log2n, type_name in sizes:
        n = 1 << log2n
        dtype = spec.float_type(type_name).dtype
        for threads in (1, 2):
            triad = best_time(triad_runner(n, threads))
            triad_rate = 3 * n * 4 / triad
            for op in args.ops:
                inputs = make_inputs(op, n, dtype)
                model = single_node_model(op, dtype)
                native = best_time(ort_runner(model, inputs, threads, native=True))
                function = best_time(ort_runner(model, inputs, threads, native=False))
                torch_run = torch_runner(op, inputs, threads)
                torch_time = best_time(torch_run) if torch_run else float("nan")
                numpy_time = float("nan")
                if threads == 1:  # numpy runs on one thread
                    numpy_time = best_time(
                        lambda op=op, inputs=inputs: reference.evaluate(op, inputs, ATTRS[op])
                    )
                rate = STREAMS[op] * n * dtype.itemsize / native
                print(
                    f"{op:22} 2^{log2n:<3} {type_name:8} {threads:>3} {native * 1e3:8.3f} "
                    f"{function * 1e3:9.3f} {torch_time * 1e3:8.3f} {numpy_time * 1e3:8.3f} "
                    f"{triad * 1e3:7.3f} {rate / 1e9:6.1f} {rate / triad_rate:7.2f} "
                    f"{function / native:6.1f} {torch_time / native:8.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
