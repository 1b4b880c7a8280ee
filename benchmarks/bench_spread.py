"""Whose run-to-run spread is it: kernels against the plain triad and a streamed triad, each
run a fresh process, with the kernels' results streamed in some runs and not in others.

    .venv/bin/python benchmarks/bench_spread.py [--runs 8] [--log2n 24] [--threads 1]

bench_ort_native's spread rule holds a kernel's run-to-run spread (slowest over fastest) to
the triad's. At 2^24 the kernels write their results past the cache (cxx/stream.h) and the
triad a[i] = b[i] + s*c[i] does not, so the two meet the memory system differently. Here each
run (a child process with pages of its own) times, taking turns as bench_ort_native does, the
plain triad, the same triad with streaming stores, and --cells; $LOSSGRAD_ORT_STREAM_ABOVE
makes the kernels stream ("streamed") or not ("ordinary"), the two ways taking turns run by
run. The report gives each runner's spread within each way, and each runner's time over each
triad's, run by run: a runner whose own time wanders shows there, while the host's drift,
which moves every runner, cancels.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_ort_native import (
    FORMS,
    OPS,
    make_inputs,
    ort_runner,
    single_node_model,
    timed_turns,
    triad_library,
    triad_runner,
)
from benchmarks.bench_stream_threshold import WAYS
from lossgrad_compiler import spec

CELLS = (
    "SmoothL1LossBackward:float32:0-d",
    "KlDivBackward:float16:full",
    "KlDivBackward:float32:full",
)
TRIADS = ("triad", "streamed triad")
SHORT_TYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}  # the grid's types


@dataclass
class Run:
    """One child's minimum seconds per call of each runner, and the CPU placements it met."""

    way: str
    times: dict[str, float]
    cpus: str = ""


def measure_child(
    cells: list[str], log2n: int, threads: int, budget: float
) -> tuple[dict[str, float], str]:
    """The triads and the cells' native kernels, taking turns: each one's minimum seconds per
    call, and the CPU placements met (timed_turns)."""
    n = 1 << log2n
    runners = {
        "triad": triad_runner(n, threads),
        "streamed triad": triad_runner(n, threads, streamed=True),
    }
    for cell in cells:
        op, type_name, form = cell.split(":")
        dtype = spec.float_type(type_name).dtype
        model = single_node_model(op, dtype, form)
        runners[cell] = ort_runner(model, make_inputs(op, n, dtype, form=form), threads, True)
    return timed_turns(runners, budget, threads)


def measure(cells: list[str], log2n: int, threads: int, runs: int, budget: float) -> list[Run]:
    """`runs` children per way, the ways taking turns; prints each run as it ends."""
    done: list[Run] = []
    names = [*TRIADS, *cells]
    print("ms, each runner's minimum in its run; cpus: the placements a 2-thread run met")
    print(f"{'way':8} {'run':>3} " + " ".join(f"{label(k):>14}" for k in names) + "  cpus")
    for index in range(runs):
        for way, above in WAYS.items():
            command = [sys.executable, __file__, "--child", json.dumps(cells), str(log2n)]
            command += [str(threads), str(budget)]
            env = {**os.environ, "LOSSGRAD_ORT_STREAM_ABOVE": above}
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            line = [row for row in out.stdout.splitlines() if row.startswith("{")][-1]
            run = Run(way, **json.loads(line))
            done.append(run)
            cells_ms = " ".join(f"{run.times[k] * 1e3:14.3f}" for k in names)
            print(f"{way:8} {index + 1:3} {cells_ms}  {run.cpus}", flush=True)
    return done


def label(name: str) -> str:
    """A column's short name: the triads as they are, a cell as its operator's first six
    letters (without Backward), type and form."""
    if name in TRIADS:
        return name
    op, type_name, form = name.split(":")
    return f"{op.removesuffix('Backward')[:6]} {SHORT_TYPES[type_name]} {form}"


def is_cell(name: str) -> bool:
    """Whether `name` is op:type:form with an operator, one of the grid's element types (by
    its name) and a grad_output form."""
    parts = name.split(":")
    return len(parts) == 3 and parts[0] in OPS and parts[1] in SHORT_TYPES and parts[2] in FORMS


def spread(values: list[float]) -> float:
    """The slowest over the fastest."""
    return max(values) / min(values)


def ratio_range(runs: list[Run], name: str, over: str) -> tuple[float, float]:
    """The smallest and largest of `name`'s time over `over`'s, run by run."""
    ratios = [run.times[name] / run.times[over] for run in runs]
    return min(ratios), max(ratios)


def report(runs: list[Run]) -> None:
    names = list(runs[0].times)
    print()
    print(f"{'':30} " + " ".join(f"{label(k):>14}" for k in names))
    for way in WAYS:
        mine = [run for run in runs if run.way == way]
        if len(mine) < 2:
            continue
        row = " ".join(f"{spread([r.times[k] for r in mine]):14.3f}" for k in names)
        print(f"{'spread, ' + way:30} {row}")
        for over in TRIADS:
            ranges = (ratio_range(mine, k, over) for k in names)
            row = " ".join(f"{f'{lo:.2f}-{hi:.2f}':>14}" for lo, hi in ranges)
            print(f"{f'{way}, over {over}':30} {row}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8, help="child processes per way")
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--budget", type=float, default=4.0, help="seconds of turns per run")
    parser.add_argument("--cells", nargs="+", default=list(CELLS), help="op:type:form")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        cells, log2n, threads, budget = args.child
        times, cpus = measure_child(json.loads(cells), int(log2n), int(threads), float(budget))
        print(json.dumps({"times": times, "cpus": cpus}), flush=True)
        return
    for cell in args.cells:
        if not is_cell(cell):
            raise SystemExit(f"--cells: {cell!r} is not op:type:form (e.g. {CELLS[0]})")
    if not triad_library().triad_streams():
        print("note: no streaming stores on this CPU; the streamed triad is the plain one")
    report(measure(args.cells, args.log2n, args.threads, args.runs, args.budget))


if __name__ == "__main__":
    main()
