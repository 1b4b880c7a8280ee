"""What a second thread brings, interval by interval: the triad and one native kernel, each at
1 and 2 threads, taking turns for --seconds, with each interval's minimum times and speedups.

    .venv/bin/python benchmarks/bench_second_core.py [--seconds 120] [--interval 5]

On a virtual machine the host decides where the guest's CPUs run. bench_ort_native's 2-thread
cells spread more from run to run than its 1-thread cells, for every runner alike; this shows
why, where it happens: if the host's placement of the second CPU changes, the 2-thread speedup
of the triad and of the kernel change together, for seconds to minutes, while their 1-thread
times stay put. A speedup near 2 means the second CPU brings bandwidth of its own; near 1, that
both threads share one CPU's. The runners are pinned as bench_ort_native pins them, and take
turns as there (bursts of calls, the first not counted, a pause after each turn).

Each round also asks benchmarks/core_probe.py where the host has put the two CPUs (SMT
siblings, cores near or far apart, or one hardware thread); the report gives each placement's
speedups, round by round.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_ort_native import (
    FORMS,
    OPS,
    make_inputs,
    ort_runner,
    single_node_model,
    triad_runner,
    turn,
    two_cpu_probe,
    warm_up,
)
from benchmarks.core_probe import Placement
from lossgrad_compiler import spec

FAST = 1.5  # a 2-thread speedup from which the second CPU counts as bringing its own bandwidth


def runners(op: str, type_name: str, form: str, log2n: int) -> dict[str, Callable[[], object]]:
    """The triad and the native kernel at 1 and 2 threads, by name."""
    n = 1 << log2n
    dtype = spec.float_type(type_name).dtype
    inputs = make_inputs(op, n, dtype, form=form)
    model = single_node_model(op, dtype, form)
    return {
        "triad 1": triad_runner(n, 1),
        "triad 2": triad_runner(n, 2),
        "native 1": ort_runner(model, inputs, 1, native=True),
        "native 2": ort_runner(model, inputs, 2, native=True),
    }


@dataclass(frozen=True)
class Round:
    """One round: when it started, each runner's best call in its turn, and where the two
    CPUs sat just before (None without the probe)."""

    at: float
    best: dict[str, float]
    placement: Placement | None = None

    def speedup(self, who: str) -> float:
        return self.best[f"{who} 1"] / self.best[f"{who} 2"]


def sample(
    runs: dict[str, Callable[[], object]],
    seconds: float,
    burst: int = 3,
    pause: float = 0.02,
    probe: Callable[[], Placement] | None = None,
) -> list[Round]:
    """The rounds of turns taken for `seconds`, each after a probe of the CPUs' placement."""
    warm_up(runs)
    rounds = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        at = time.perf_counter() - start
        where = probe() if probe is not None else None
        best = {name: turn(run, burst, pause) for name, run in runs.items()}
        rounds.append(Round(at, best, where))
    return rounds


def intervals(rounds: list[Round], interval: float) -> list[dict[str, float]]:
    """Each interval's minimum time per runner."""
    out: dict[int, dict[str, float]] = {}
    for r in rounds:
        slot = out.setdefault(int(r.at // interval), dict.fromkeys(r.best, float("inf")))
        for name, seconds in r.best.items():
            slot[name] = min(slot[name], seconds)
    return [out[k] for k in sorted(out)]


def by_placement(rounds: list[Round]) -> None:
    """Round by round, the 2-thread speedups where the CPUs sat each way."""
    kinds: dict[str, list[Round]] = {}
    for r in rounds:
        if r.placement is not None:
            kinds.setdefault(r.placement.kind, []).append(r)
    if not kinds:
        return
    print("by placement, round by round (median and range):")
    for kind, group in sorted(kinds.items(), key=lambda k: -len(k[1])):
        trips = np.array([r.placement.round_trip_ns for r in group if r.placement is not None])
        parts = [f"{kind}: {len(group)} of {len(rounds)} rounds, line round trip "
                 f"{np.median(trips):.0f} ns"]  # fmt: skip
        for who in ("triad", "native"):
            s = np.array([r.speedup(who) for r in group])
            parts.append(f"{who} {np.median(s):.2f} ({s.min():.2f}-{s.max():.2f})")
        print("  " + "; ".join(parts))


def report(rows: list[dict[str, float]], interval: float) -> None:
    print(
        f"{'seconds':>9} {'triad 1':>8} {'triad 2':>8} {'speedup':>7} "
        f"{'native 1':>8} {'native 2':>8} {'speedup':>7}   (ms)"
    )
    for k, t in enumerate(rows):
        print(
            f"{k * interval:4.0f}-{(k + 1) * interval:<4.0f} "
            f"{t['triad 1'] * 1e3:8.3f} {t['triad 2'] * 1e3:8.3f} "
            f"{t['triad 1'] / t['triad 2']:7.2f} "
            f"{t['native 1'] * 1e3:8.3f} {t['native 2'] * 1e3:8.3f} "
            f"{t['native 1'] / t['native 2']:7.2f}"
        )
    for who in ("triad", "native"):
        speedups = np.array([t[f"{who} 1"] / t[f"{who} 2"] for t in rows])
        ones = np.array([t[f"{who} 1"] for t in rows])
        print(
            f"{who}: 2-thread speedup {speedups.min():.2f} to {speedups.max():.2f}, "
            f"at least {FAST} in {int((speedups >= FAST).sum())} of {len(rows)} intervals; "
            f"1-thread times {ones.max() / ones.min():.2f}x apart"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--op", default="SmoothL1LossBackward", choices=OPS)
    parser.add_argument("--type", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--form", default="0-d", choices=FORMS)
    args = parser.parse_args()
    print(
        f"{args.op} {args.type} {args.form} and the triad, 2^{args.log2n} elements; "
        f"each figure the minimum over an interval of {args.interval:g} s"
    )
    rounds = sample(
        runners(args.op, args.type, args.form, args.log2n), args.seconds, probe=two_cpu_probe(2)
    )
    report(intervals(rounds, args.interval), args.interval)
    by_placement(rounds)


if __name__ == "__main__":
    main()
