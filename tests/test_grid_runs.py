"""grid_runs.py reads the runs bench_ort_native.py saved and judges each cell across them: the
goals in every run (IREE's speed alone for the compute-bound cells), and the native kernel's
spread against the triad's, over all runs and over those without the CPUs far apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import grid_runs
from benchmarks.bench_ort_native import Cell, save_cells

ROOT = Path(__file__).resolve().parents[1]


def cell(
    native: float,
    triad: float,
    iree: float = 1.0,
    op: str = "SmoothL1LossBackward",
    type_name: str = "float32",
    threads: int = 1,
    cpus: str = "",
) -> Cell:
    # 2^22 float32 SmoothL1LossBackward 0-d moves 3 streams, as the triad: x triad = triad / native
    return Cell(op, 22, type_name, "0-d", threads, native=native, function=9.0, torch=9.0,
                iree=iree, triad=triad, prebuilt=2.0, cpus=cpus)  # fmt: skip


def test_saved_runs_load_as_they_were(tmp_path: Path) -> None:
    cells = [cell(1.0, 1.0), cell(0.5, 0.6, threads=2, cpus="far+near")]
    save_cells(cells, tmp_path / "run.jsonl")
    assert grid_runs.load(tmp_path / "run.jsonl") == cells


def test_spread_and_rule_over_all_runs_and_over_the_near_ones() -> None:
    runs = [
        [cell(0.50, 1.00, threads=2, cpus="far")],
        [cell(1.00, 1.90, threads=2, cpus="near")],
        [cell(1.02, 2.00, threads=2, cpus="near+smt")],
    ]
    (c,) = grid_runs.gather(runs).values()
    assert c.spread("native") == pytest.approx(2.04) and c.spread("triad") == pytest.approx(2.0)
    assert not c.spread_rule()
    assert [r.cpus for r in c.never_far()] == ["near", "near+smt"]
    assert c.spread_rule(c.never_far())  # 1.02 against 1.053


def test_an_equal_spread_meets_the_rule() -> None:
    (c,) = grid_runs.gather([[cell(1.0, 2.0)], [cell(1.1, 2.2)]]).values()
    assert c.spread_rule()


def test_goals_must_hold_in_every_run() -> None:
    (c,) = grid_runs.gather([[cell(1.0, 1.0)], [cell(1.0, 1.0, iree=0.99)]]).values()
    assert not c.goals_held()  # IREE faster in the second run


def test_a_compute_bound_cell_is_held_to_irees_speed_alone() -> None:
    kl_target = {"op": "KlDivTargetBackward", "type_name": "float16"}
    (c,) = grid_runs.gather([[cell(3.0, 1.0, iree=3.5, **kl_target)]]).values()
    assert c.compute_bound and c.runs[0].verdicts()[0] == "NO"  # far below the triad
    assert c.goals_held()
    (slower,) = grid_runs.gather([[cell(3.0, 1.0, iree=2.9, **kl_target)]]).values()
    assert not slower.goals_held()


def test_report_counts_each_judgement(capsys: pytest.CaptureFixture[str]) -> None:
    runs = [
        [cell(1.00, 1.0, iree=5.0), cell(0.50, 1.00, iree=5.0, threads=2, cpus="far")],
        [cell(1.20, 1.0, iree=5.0), cell(1.00, 1.90, iree=5.0, threads=2, cpus="near")],
        [cell(1.10, 1.1, iree=5.0), cell(1.02, 2.00, iree=5.0, threads=2, cpus="near")],
    ]
    grid_runs.report(grid_runs.gather(runs))
    out = capsys.readouterr().out
    assert "memory-bound cells meeting every goal: 1 of 2" in out  # 0.83 x triad in run 2
    assert "1 thread, native spread no larger than the triad's: 0 of 1" in out
    assert "2 threads, native spread no larger than the triad's: 0 of 1" in out
    assert "over the runs without the CPUs far apart (cells with two or more): 1 of 1" in out
    assert "far near near" in out


def test_runs_end_to_end(tmp_path: Path) -> None:
    for k, native in enumerate((1.0, 1.1)):
        save_cells([cell(native, 1.0, iree=5.0)], tmp_path / f"run{k}.jsonl")
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/grid_runs.py"), "run0.jsonl", "run1.jsonl"],
        cwd=tmp_path, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert "in all 2 runs:" in result.stdout
    assert "memory-bound cells meeting every goal: 1 of 1" in result.stdout
