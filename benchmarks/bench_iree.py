"""IREE (level 2 compiled by iree-compile) against the native ORT kernels, the ONNX function
path, PyTorch eager backward and a STREAM-like triad, per operator, element type, size and
thread count, in one run; then IREE's compile time.

    .venv/bin/python benchmarks/bench_iree.py [--sizes 16 20 22 24] [--types float32 float16]

Inputs as in bench_ort_native.py (reduction "mean", a 0-d grad_output, n elements); each
figure is the minimum over repeated calls. IREE's local-task thread count is fixed when its
first device starts, so each thread count's IREE figures come from a child process;
local-sync runs on the calling thread (one thread). Inputs are uploaded once
(`asdevicearray`), like the IOBinding of the ORT rows. Ratios are IREE's time over native's:
above 1, the native kernel is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_ort_native import (
    ATTRS,
    OPS,
    best_time,
    make_inputs,
    ort_runner,
    single_node_model,
    torch_runner,
    triad_runner,
)
from lossgrad_compiler import spec
from lossgrad_compiler.backends.iree import compile_module, compile_text, module_text
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import signature_of


def signature(op: str, inputs: dict[str, np.ndarray]):
    infos = {k: spec.TensorInfo(v.dtype, v.shape) for k, v in inputs.items()}
    return signature_of(spec.validate(op, infos, ATTRS[op]))


def iree_times(sizes: list[int], types: list[str], threads: int) -> dict[str, dict[str, float]]:
    """Child process: IREE's minimum seconds per call, local-sync and local-task."""
    import iree.runtime as rt

    rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    found: dict[str, dict[str, float]] = {}
    for log2n in sizes:
        for type_name in types:
            dtype = spec.float_type(type_name).dtype
            for op in OPS:
                inputs = make_inputs(op, 1 << log2n, dtype)
                sig = signature(op, inputs)
                path = compile_module(lower_signatures([sig]))
                row: dict[str, float] = {}
                for device in ("local-sync", "local-task"):
                    config = rt.Config(device)
                    context = rt.SystemContext(config=config)
                    context.add_vm_module(rt.VmModule.mmap(config.vm_instance, str(path)))
                    function = context.modules.module[sig.id]
                    args = [rt.asdevicearray(config.device, inputs[n]) for n in spec.INPUT_NAMES]
                    row[device] = best_time(lambda f=function, a=args: f(*a).to_host())
                found[f"{op}/{log2n}/{type_name}"] = row
    return found


def child_times(sizes: list[int], types: list[str], threads: int) -> dict[str, dict[str, float]]:
    command = [sys.executable, __file__, "--child", str(threads), "--sizes", *map(str, sizes)]
    command += ["--types", *types]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def compile_times() -> None:
    """Compile time of one signature (cold, no cache) and of 10,000 identical nodes' worth of
    signatures (deduplicated to one; the second call is a cache hit)."""
    inputs = make_inputs("SmoothL1LossBackward", 1024, np.dtype(np.float32))
    one = signature("SmoothL1LossBackward", inputs)
    start = time.perf_counter()
    compile_text(module_text(lower_signatures([one])))
    cold = time.perf_counter() - start
    sigs = [signature("SmoothL1LossBackward", inputs) for _ in range(10_000)]
    with tempfile.TemporaryDirectory() as empty_cache:
        os.environ["LOSSGRAD_CACHE_DIR"] = empty_cache
        start = time.perf_counter()
        compile_module(lower_signatures(sigs))
        first = time.perf_counter() - start
        start = time.perf_counter()
        compile_module(lower_signatures(sigs))
        hit = time.perf_counter() - start
    print(
        f"\ncompile: one signature {cold:.2f} s (iree-compile, no cache); 10,000 identical "
        f"nodes (signatures computed, deduplicated, compiled into an empty cache): {first:.2f} s, "
        f"then {hit:.2f} s (cache hit)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[16, 20, 22], help="log2 n")
    parser.add_argument("--types", nargs="+", default=["float32", "float16"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(iree_times(args.sizes, args.types, args.child)))
        return
    header = (
        f"{'op':22} {'n':>5} {'type':8} {'thr':>3} {'sync':>8} {'task':>8} {'native':>8} "
        f"{'function':>9} {'torch':>8} {'triad':>7} {'task/native':>11} {'sync/native':>11}"
    )
    print("times in ms (minimum of repeated calls)")
    print(header)
    print("-" * len(header))
    for threads in args.threads:
        iree = child_times(args.sizes, args.types, threads)
        for log2n in args.sizes:
            triad = best_time(triad_runner(1 << log2n, threads))
            for type_name in args.types:
                dtype = spec.float_type(type_name).dtype
                for op in OPS:
                    inputs = make_inputs(op, 1 << log2n, dtype)
                    model = single_node_model(op, dtype)
                    native = best_time(ort_runner(model, inputs, threads, native=True))
                    function = best_time(ort_runner(model, inputs, threads, native=False))
                    torch_run = torch_runner(op, inputs, threads)
                    torch_time = best_time(torch_run) if torch_run else float("nan")
                    row = iree[f"{op}/{log2n}/{type_name}"]
                    sync = row["local-sync"] if threads == 1 else float("nan")
                    task = row["local-task"]
                    print(
                        f"{op:22} 2^{log2n:<3} {type_name:8} {threads:>3} {sync * 1e3:8.3f} "
                        f"{task * 1e3:8.3f} {native * 1e3:8.3f} {function * 1e3:9.3f} "
                        f"{torch_time * 1e3:8.3f} {triad * 1e3:7.3f} {task / native:11.2f} "
                        f"{sync / native:11.2f}",
                        flush=True,
                    )
    compile_times()


if __name__ == "__main__":
    main()
