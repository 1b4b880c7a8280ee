"""bench_spread.py: the streamed triad computes what the plain one does, wherever its arrays
start and however many threads share it; the report's spreads and ratios are the runs' own;
a cell that is not op:type:form is refused; the grid's --seconds sets how long a cell's
runners take turns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_spread
from benchmarks.bench_ort_native import triad_library
from lossgrad_compiler.runtime.ort import native_library

needs_compiler = pytest.mark.skipif(
    native_library() is None, reason="needs a C++ compiler (the native build)"
)


@needs_compiler
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("stream", [0, 1])
@pytest.mark.parametrize("offset", [0, 1, 7])  # floats past a 64-byte line
def test_the_streamed_triad_computes_the_plain_one(threads: int, stream: int, offset: int) -> None:
    n = 1000 + 13  # a partial vector at the end, and halves that are not on lines
    rng = np.random.default_rng(offset)
    raw = np.zeros(n + 32, np.float32)
    start = (-raw.ctypes.data // 4) % 16 + offset
    a = raw[start : start + n]
    b, c = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    library = triad_library()
    library.triad(a.ctypes.data, b.ctypes.data, c.ctypes.data, 3.0, n, threads, None, None, stream)
    np.testing.assert_allclose(a, b + np.float32(3.0) * c, rtol=1e-6, atol=1e-6)
    assert not raw[:start].any() and not raw[start + n :].any()  # nothing written outside a


@needs_compiler
def test_the_triad_library_says_whether_it_streams() -> None:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if " avx" in cpuinfo:
        assert triad_library().triad_streams() == 1


def test_cells_are_op_type_form() -> None:
    assert all(bench_spread.is_cell(cell) for cell in bench_spread.CELLS)
    for bad in (
        "KlDivBackward:float16",
        "KlDiv:float16:full",
        "KlDivBackward:int8:full",
        "KlDivBackward:half:full",  # numpy's name, not the grid's
        "KlDivBackward:float16:half",
        "KlDivBackward:float16:full:x",
    ):
        assert not bench_spread.is_cell(bad), bad


def test_a_bad_cell_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["bench_spread.py", "--cells", "KlDivBackward:half:0-d"])
    with pytest.raises(SystemExit, match="is not op:type:form"):
        bench_spread.main()


def runs() -> list[bench_spread.Run]:
    """Two runs a way: the host 1.5x slower in the second, the kernel 1.2x in its second."""
    cell = "KlDivBackward:float16:full"
    return [
        bench_spread.Run("ordinary", {"triad": 4.0, "streamed triad": 3.0, cell: 2.0}),
        bench_spread.Run("streamed", {"triad": 4.0, "streamed triad": 3.0, cell: 1.5}),
        bench_spread.Run("ordinary", {"triad": 6.0, "streamed triad": 4.5, cell: 3.0}),
        bench_spread.Run("streamed", {"triad": 6.0, "streamed triad": 4.5, cell: 2.7}),
    ]


def test_spreads_and_ratios_are_the_runs_own() -> None:
    streamed = [run for run in runs() if run.way == "streamed"]
    cell = "KlDivBackward:float16:full"
    assert bench_spread.spread([r.times["triad"] for r in streamed]) == 1.5
    assert bench_spread.spread([r.times[cell] for r in streamed]) == pytest.approx(1.8)
    assert bench_spread.ratio_range(streamed, cell, "streamed triad") == pytest.approx((0.5, 0.6))


def test_the_report_gives_each_ways_spread(capsys: pytest.CaptureFixture[str]) -> None:
    bench_spread.report(runs())
    lines = {line[:30].strip(): line[30:].split() for line in capsys.readouterr().out.splitlines()}
    assert lines["spread, ordinary"] == ["1.500", "1.500", "1.500"]
    assert lines["spread, streamed"] == ["1.500", "1.500", "1.800"]
    assert lines["streamed, over streamed triad"] == ["1.33-1.33", "1.00-1.00", "0.50-0.60"]
    assert lines["ordinary, over triad"] == ["1.00-1.00", "0.75-0.75", "0.50-0.50"]


@needs_compiler
def test_a_short_run_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    done = bench_spread.measure(["KlDivBackward:float32:0-d"], 12, 1, 1, 0.05)
    assert [run.way for run in done] == ["ordinary", "streamed"]
    assert all(0 < t < 1 for run in done for t in run.times.values())
    assert "KlDiv f32 0-d" in capsys.readouterr().out


def test_the_grids_seconds_reach_each_cells_turns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import bench_ort_native as bench

    budgets: list[float] = []

    def best_times(runners: dict, budget: float = 3.0, **_: object) -> dict[str, float]:
        budgets.append(budget)
        return dict.fromkeys(runners, 1e-3)

    monkeypatch.setattr(bench, "best_times", best_times)
    monkeypatch.setattr(bench, "iree_config", lambda threads: None)
    bench.measure_child([("KlDivBackward", 6, "float32", "0-d")], 1, None, 0.5)
    assert budgets == [0.5]
    assert bench.Cell.from_json(capsys.readouterr().out.splitlines()[-1]).native == 1e-3
