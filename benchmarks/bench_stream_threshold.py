"""Where streaming stores start to pay: each cell once with its result written past the cache
and once with ordinary stores, alone and followed by a second node that reads the result.

    .venv/bin/python benchmarks/bench_stream_threshold.py [--rounds 3] [--reps 60]

An ordinary store keeps the result in the cache for the next node but reads each line before
writing it; a streaming store skips that read and the cache. Which one is faster depends on
whether the call's operands and result stay in the last-level cache until the next node reads
them, so each cell is timed both ways, in a two-node chain (the second node is the same
operator with the first one's result as self) as well as alone, with the caches warm (the
same call repeated) and flushed (a 96 MiB buffer written before each call). Each way runs in
a child process with $LOSSGRAD_ORT_STREAM_ABOVE set (0: every call streams; 2^62: none), the
two ways taking turns for --rounds rounds; each figure is the minimum over the rounds of a
child's minimum over --reps calls, at each of --threads (the threads pinned as
bench_ort_native pins them). "moved" counts the bytes of the operands read and of the
result; "s/o" is the streamed time over the ordinary one (below 1: streaming pays).
cxx/stream.h's threshold (calls moving more than half the last-level cache stream) comes
from this table (docs/benchmarks.md, "Streaming threshold").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_ort_native import (
    chain_model,
    make_inputs,
    on_its_cpus,
    ort_runner,
    streams,
)
from lossgrad_compiler import spec

WAYS = {"ordinary": str(1 << 62), "streamed": "0"}  # $LOSSGRAD_ORT_STREAM_ABOVE
# (operator, type, log2 n, form): 12, 16 and 24 MiB moved
CELLS = (
    ("SmoothL1LossBackward", "float32", 20, "0-d"),
    ("SmoothL1LossBackward", "bfloat16", 21, "0-d"),
    ("SmoothL1LossBackward", "float32", 20, "full"),
    ("SmoothL1LossBackward", "bfloat16", 21, "full"),
    ("KlDivBackward", "float32", 21, "0-d"),
    ("KlDivBackward", "float16", 22, "0-d"),
    ("SmoothL1LossBackward", "float32", 21, "0-d"),
    ("SmoothL1LossBackward", "bfloat16", 22, "0-d"),
)
FLUSH_BYTES = 96 << 20


def measure_child(
    op: str, type_name: str, log2n: int, form: str, threads: int, reps: int
) -> list[float]:
    """Minimum seconds per call: alone and chained, caches warm, then flushed."""
    dtype = spec.float_type(type_name).dtype
    inputs = make_inputs(op, 1 << log2n, dtype, form=form)
    runs = [
        ort_runner(chain_model(op, dtype, form, nodes), inputs, threads, native=True)
        for nodes in (1, 2)
    ]
    for run in runs:
        on_its_cpus(run)
        run()  # warm up
    flush = np.ones(FLUSH_BYTES // 4, np.float32)
    best = []
    for flushed in (False, True):
        for run in runs:
            fastest = float("inf")
            for _ in range(reps):
                if flushed:
                    flush += 1.0
                start = time.perf_counter()
                run()
                fastest = min(fastest, time.perf_counter() - start)
            best.append(fastest)
    return best


def bytes_moved(op: str, type_name: str, log2n: int, form: str) -> int:
    """Bytes of the operands the call reads and of its result."""
    return streams(op, form) * (np.dtype(spec.float_type(type_name).dtype).itemsize << log2n)


def measure(
    cell: tuple[str, str, int, str], threads: int, rounds: int, reps: int
) -> dict[str, list[float]]:
    """Each way's minima over `rounds` child processes, the ways taking turns."""
    best: dict[str, list[float]] = {}
    for _ in range(rounds):
        for way, above in WAYS.items():
            env = {**os.environ, "LOSSGRAD_ORT_STREAM_ABOVE": above}
            args = [sys.executable, __file__, "--child", *map(str, cell), str(threads)]
            args += ["--reps", str(reps)]
            out = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
            times = [float(t) for t in out.stdout.split()]
            best[way] = [min(a, b) for a, b in zip(best.get(way, times), times, strict=True)]
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="child processes per way")
    parser.add_argument("--reps", type=int, default=60, help="calls per figure in a child")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        op, type_name, log2n, form, threads = args.child
        print(*measure_child(op, type_name, int(log2n), form, int(threads), args.reps))
        return
    print("ms; chain: the call and a second node reading its result; s/o: streamed over ordinary")
    print(
        f"{'op':22} {'type':8} {'n':>4} {'form':4} {'moved':>6} {'thr':>3} {'caches':7} "
        f"{'alone o':>8} {'alone s':>8} {'s/o':>5} {'chain o':>8} {'chain s':>8} {'s/o':>5}"
    )
    for cell in CELLS:
        for threads in args.threads:
            best = measure(cell, threads, args.rounds, args.reps)
            for k, caches in enumerate(("warm", "flushed")):
                (alone_o, chain_o), (alone_s, chain_s) = (best[w][2 * k : 2 * k + 2] for w in WAYS)
                op, type_name, log2n, form = cell
                print(
                    f"{op:22} {type_name:8} 2^{log2n:<2} {form:4} {bytes_moved(*cell) >> 20:4}Mi "
                    f"{threads:3} {caches:7} {alone_o * 1e3:8.3f} {alone_s * 1e3:8.3f} "
                    f"{alone_s / alone_o:5.2f} {chain_o * 1e3:8.3f} {chain_s * 1e3:8.3f} "
                    f"{chain_s / chain_o:5.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
