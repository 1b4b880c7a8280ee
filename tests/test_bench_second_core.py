"""The second-core benchmark reports each interval's minima and speedups from the rounds it
timed, and runs end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bench_second_core as bench
from benchmarks.core_probe import Placement
from lossgrad_compiler.runtime.ort import native_library

ROOT = Path(__file__).resolve().parents[1]


def test_intervals_keep_each_runners_minimum() -> None:
    rounds = [
        bench.Round(0.1, {"a": 3.0, "b": 1.0}),
        bench.Round(0.9, {"a": 2.0, "b": 4.0}),
        bench.Round(1.2, {"a": 5.0, "b": 6.0}),
        bench.Round(2.7, {"a": 7.0, "b": 0.5}),
    ]
    assert bench.intervals(rounds, 1.0) == [
        {"a": 2.0, "b": 1.0},
        {"a": 5.0, "b": 6.0},
        {"a": 7.0, "b": 0.5},
    ]


def test_report_gives_each_speedup(capsys: pytest.CaptureFixture[str]) -> None:
    row = {"triad 1": 4e-3, "triad 2": 2e-3, "native 1": 3e-3, "native 2": 2.5e-3}
    bench.report([row], 5.0)
    out = capsys.readouterr().out
    assert "2.00" in out.splitlines()[1] and "1.20" in out.splitlines()[1]
    assert "triad: 2-thread speedup 2.00 to 2.00, at least 1.5 in 1 of 1" in out
    assert "native: 2-thread speedup 1.20 to 1.20, at least 1.5 in 0 of 1" in out


def test_by_placement_gives_each_placements_speedups(capsys: pytest.CaptureFixture[str]) -> None:
    def round_at(ports: float, trip: float, triad: float, native: float) -> bench.Round:
        best = {"triad 1": triad, "triad 2": 1.0, "native 1": native, "native 2": 1.0}
        return bench.Round(0.0, best, Placement(ports, 1.0, trip))

    bench.by_placement(
        [
            round_at(1.1, 100.0, 1.8, 1.6),
            round_at(1.0, 120.0, 2.0, 1.2),
            round_at(1.2, 110.0, 1.9, 1.4),
            round_at(2.0, 20.0, 1.1, 1.05),
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "  cores near: 3 of 4 rounds, line round trip 110 ns; "
        "triad 1.90 (1.80-2.00); native 1.40 (1.20-1.60)"
    )
    assert out[2] == (
        "  SMT siblings: 1 of 4 rounds, line round trip 20 ns; "
        "triad 1.10 (1.10-1.10); native 1.05 (1.05-1.05)"
    )


def test_by_placement_says_nothing_without_the_probe(capsys: pytest.CaptureFixture[str]) -> None:
    bench.by_placement([bench.Round(0.0, {"triad 1": 1.0, "triad 2": 1.0})])
    assert capsys.readouterr().out == ""


@pytest.mark.skipif(native_library() is None, reason="needs the native ORT kernel library")
def test_runs_end_to_end() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/bench_second_core.py", "--seconds", "1", "--interval",
         "0.5", "--log2n", "12"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    assert "triad: 2-thread speedup" in result.stdout
    assert "native: 2-thread speedup" in result.stdout
    assert "by placement, round by round" in result.stdout
