"""How long parsing, lowering and printing modules of many lossgrad ops takes, against the
goal of 1,000 ops in under 1 s end to end and against lossgrad-opt's own start-up.

    .venv/bin/python benchmarks/bench_lowering.py            # 1,000 and 10,000 ops
    .venv/bin/python benchmarks/bench_lowering.py --sizes 1000 --repeat 7

In-process, each phase is timed separately (parse, verify the input, lower-lossgrad,
verify the output, print) with the cyclic GC off as lossgrad-opt runs it. End to end,
`lossgrad-opt FILE -p lower-lossgrad -o OUT` is timed as a subprocess, next to the start-up
of the same command on an empty module. Every figure is the median of --repeat runs of
wall-clock time, with the CPU time of the same runs in brackets (on a shared machine the CPU
time is the steadier figure). The module is one function whose ops cycle through six
variants: the three ops, static and dynamic shapes, broadcasting with summed results, f32
and f16.
"""

from __future__ import annotations

import argparse
import gc
import io
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from xdsl.printer import Printer

from lossgrad_compiler.context import make_context, parse_module
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass

SIGNATURE = (
    "%dy: tensor<f32>, %x: tensor<16x16xf32>, %t: tensor<16x16xf32>, "
    "%xd: tensor<?x16xf16>, %td: tensor<?x16xf16>, %row: tensor<16xf32>"
)
VARIANTS = (
    "lossgrad.kl_div_backward %dy, %x, %t reduction = mean log_target = true"
    " : tensor<f32>, tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>",
    "lossgrad.kl_div_target_backward %dy, %x, %row reduction = sum"
    " : tensor<f32>, tensor<16x16xf32>, tensor<16xf32> -> tensor<16xf32>",
    "lossgrad.smooth_l1_loss_backward %dy, %x, %t beta = 5.000000e-01"
    " : tensor<f32>, tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>",
    "lossgrad.kl_div_backward %dy, %xd, %td reduction = batchmean"
    " : tensor<f32>, tensor<?x16xf16>, tensor<?x16xf16> -> tensor<?x16xf16>",
    "lossgrad.kl_div_target_backward %dy, %xd, %td reduction = mean log_target = true"
    " : tensor<f32>, tensor<?x16xf16>, tensor<?x16xf16> -> tensor<?x16xf16>",
    "lossgrad.smooth_l1_loss_backward %dy, %xd, %td reduction = mean beta = 0.000000e+00"
    " : tensor<f32>, tensor<?x16xf16>, tensor<?x16xf16> -> tensor<?x16xf32>",
)


def module_text(n: int) -> str:
    """One function with n lossgrad ops (results unused: the pass lowers them anyway)."""
    lines = [f"func.func @grads({SIGNATURE}) {{"]
    lines += [f"  %r{i} = {VARIANTS[i % len(VARIANTS)]}" for i in range(n)]
    lines += ["  func.return", "}", ""]
    return "\n".join(lines)


Timing = tuple[float, float]  # (wall, cpu) seconds


def timed(action: Callable[[], object]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def in_process_run(text: str) -> dict[str, Timing]:
    """One parse → verify → lower → verify → print, each phase timed, GC off."""
    ctx = make_context()
    times: dict[str, Timing] = {}
    module = None

    def parse() -> None:
        nonlocal module
        module = parse_module(text, ctx, verify=False)

    gc.collect()
    gc.disable()
    try:
        times["parse"] = timed(parse)
        assert module is not None
        times["verify input"] = timed(module.verify)
        times["lower-lossgrad"] = timed(lambda: LowerLossgradPass().apply(ctx, module))
        times["verify output"] = timed(module.verify)
        times["print"] = timed(lambda: Printer(stream=io.StringIO()).print_op(module))
    finally:
        gc.enable()
    times["total"] = (sum(t[0] for t in times.values()), sum(t[1] for t in times.values()))
    return times


def cli_run(path: Path, output: Path) -> Timing:
    """lossgrad-opt as a subprocess: wall time, and the child's user + system CPU time."""
    opt = str(Path(sys.executable).parent / "lossgrad-opt")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([opt, str(path), "-p", "lower-lossgrad", "-o", str(output)], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def summary(samples: list[Timing]) -> str:
    wall = statistics.median(t[0] for t in samples)
    cpu = statistics.median(t[1] for t in samples)
    return f"{wall:.3f} s ({cpu:.3f} s)"


def lowered_op_count(text: str) -> int:
    ctx = make_context()
    module = parse_module(text, ctx)
    LowerLossgradPass().apply(ctx, module)
    return sum(1 for _ in module.walk())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5, help="runs per size (median)")
    args = parser.parse_args()

    phases = ["parse", "verify input", "lower-lossgrad", "verify output", "print", "total"]
    rows: dict[str, list[str]] = {p: [] for p in [*phases, "ops out", "cli", "cli start-up"]}
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.mlir"
        empty.write_text("builtin.module {\n}\n")
        startup = summary([cli_run(empty, Path(tmp) / "out.mlir") for _ in range(args.repeat)])
        for n in args.sizes:
            text = module_text(n)
            runs = [in_process_run(text) for _ in range(args.repeat)]
            for phase in phases:
                rows[phase].append(summary([r[phase] for r in runs]))
            rows["ops out"].append(f"{lowered_op_count(text):,}")
            path = Path(tmp) / f"lossgrad{n}.mlir"
            path.write_text(text)
            out = Path(tmp) / "out.mlir"
            rows["cli"].append(summary([cli_run(path, out) for _ in range(args.repeat)]))
            rows["cli start-up"].append(startup)

    print(f"lower-lossgrad benchmark: median of {args.repeat} runs, wall clock (CPU time)\n")
    print("| phase | " + " | ".join(f"{n:,} ops" for n in args.sizes) + " |")
    print("| --- | " + " | ".join("---" for _ in args.sizes) + " |")
    labels = {
        "ops out": "ops after lowering",
        "total": "**in-process total**",
        "cli": "**lossgrad-opt -p lower-lossgrad (end to end)**",
        "cli start-up": "lossgrad-opt on an empty module (start-up)",
    }
    for key, cells in rows.items():
        print(f"| {labels.get(key, key)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
