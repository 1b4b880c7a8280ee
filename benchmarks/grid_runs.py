"""Several runs of bench_ort_native.py's grid, cell by cell: each runner's fastest and slowest
time across the runs, whether every goal held in all of them, and whether the native kernel's
run-to-run spread was no larger than the triad's in the same runs.

    .venv/bin/python benchmarks/bench_ort_native.py --sizes 22 24 --save run1.jsonl
    (three times, to run1, run2 and run3)
    .venv/bin/python benchmarks/grid_runs.py run1.jsonl run2.jsonl run3.jsonl

One run says little on a shared machine: a cell's figures move with the host from minute to
minute. A spread is a cell's slowest time over its fastest. The spread rule is judged on the
memory-bound cells; KlDivTargetBackward's half types are compute-bound, and their goal is
IREE's speed (COMPUTE_BOUND). For 2-thread cells it is judged a second time over the runs in
which the host never had the two CPUs far apart (the `cpus` column, core_probe.py): a cell
that met a far placement in one run and not in another spreads by the host's doing.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_ort_native import COMPUTE_BOUND, OP_WIDTH, Cell

Key = tuple[str, int, str, str, int]  # op, log2 n, type, form, threads


def load(path: Path) -> list[Cell]:
    """The cells one run saved (one JSON object a line)."""
    return [Cell.from_json(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class CellRuns:
    """One cell's results across the runs."""

    runs: list[Cell]

    @property
    def compute_bound(self) -> bool:
        first = self.runs[0]
        return first.type_name in COMPUTE_BOUND.get(first.op, ())

    def spread(self, runner: str, runs: list[Cell] | None = None) -> float:
        times = [getattr(c, runner) for c in (self.runs if runs is None else runs)]
        return max(times) / min(times)

    def goals_held(self) -> bool:
        """Every goal in every run; for a compute-bound cell, IREE's speed."""
        if self.compute_bound:
            return all(c.verdicts()[2] != "NO" for c in self.runs)
        return all("NO" not in c.verdicts() for c in self.runs)

    def spread_rule(self, runs: list[Cell] | None = None) -> bool:
        return self.spread("native", runs) <= self.spread("triad", runs)

    def never_far(self) -> list[Cell]:
        return [c for c in self.runs if "far" not in c.cpus.split("+")]


def gather(runs: list[list[Cell]]) -> dict[Key, CellRuns]:
    """Each cell's results, in the order the first run measured them."""
    cells: dict[Key, CellRuns] = {}
    for run in runs:
        for c in run:
            key = (c.op, c.log2n, c.type_name, c.form, c.threads)
            cells.setdefault(key, CellRuns([])).runs.append(c)
    return cells


def span(values: list[float], scale: float = 1e3, digits: int = 3) -> str:
    return f"{min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f}"


def report(cells: dict[Key, CellRuns]) -> None:
    print(
        f"{'op':{OP_WIDTH}} {'n':>5} {'type':8} {'form':4} {'thr':>3} {'native ms':>13} "
        f"{'iree ms':>13} {'triad ms':>13} {'x triad':>9} {'spread n/t':>11} goals rule  cpus"
    )
    for (op, log2n, type_name, form, threads), c in cells.items():
        ratios = [r.triad_ratio for r in c.runs]
        print(
            f"{op:{OP_WIDTH}} 2^{log2n:<3} {type_name:8} {form:4} {threads:>3} "
            f"{span([r.native for r in c.runs]):>13} {span([r.iree for r in c.runs]):>13} "
            f"{span([r.triad for r in c.runs]):>13} {span(ratios, 1, 2):>9} "
            f"{c.spread('native'):5.2f}/{c.spread('triad'):<5.2f} "
            f"{'ok' if c.goals_held() else 'NO':>5} {'ok' if c.spread_rule() else 'NO':>4}  "
            f"{' '.join(r.cpus or '-' for r in c.runs)}"
        )
    memory = [c for c in cells.values() if not c.compute_bound]
    compute = [c for c in cells.values() if c.compute_bound]
    runs = max(len(c.runs) for c in cells.values())
    print(f"\nin all {runs} runs:")
    print(f"  memory-bound cells meeting every goal: {sum(c.goals_held() for c in memory)} of "
          f"{len(memory)}")  # fmt: skip
    if compute:
        print(
            f"  compute-bound cells at least as fast as IREE: "
            f"{sum(c.goals_held() for c in compute)} of {len(compute)}"
        )
    for threads in sorted({c.runs[0].threads for c in memory}):
        group = [c for c in memory if c.runs[0].threads == threads]
        print(
            f"  {threads} thread{'s' if threads > 1 else ''}, native spread no larger than the "
            "triad's: "
            f"{sum(c.spread_rule() for c in group)} of {len(group)}"
        )
    judged = [c for c in memory if c.runs[0].threads == 2 and len(c.never_far()) >= 2]
    if judged:
        print(
            "  2 threads, over the runs without the CPUs far apart (cells with two or more): "
            f"{sum(c.spread_rule(c.never_far()) for c in judged)} of {len(judged)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="files bench_ort_native --save wrote")
    args = parser.parse_args()
    report(gather([load(path) for path in args.runs]))


if __name__ == "__main__":
    main()
