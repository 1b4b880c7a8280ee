"""Where the native benchmark puts an ORT runner's threads: the calling thread on one CPU and
each pool thread on another, so that no two of a session's threads share a CPU; nothing is
pinned where the process has too few CPUs."""

from __future__ import annotations

import pytest

from benchmarks import bench_ort_native as bench


@pytest.mark.parametrize(
    ("cpus", "threads", "main", "pool"),
    [
        ({0, 1}, 1, {0}, None),
        ({0, 1}, 2, {0}, "2"),  # ORT numbers processors from 1
        ({2, 5, 7}, 3, {2}, "6;8"),
        ({0, 1}, 3, {0, 1}, None),  # more threads than CPUs: nothing pinned
    ],
)
def test_ort_cpus(
    monkeypatch: pytest.MonkeyPatch, cpus: set[int], threads: int, main: set[int], pool: str | None
) -> None:
    monkeypatch.setattr(bench, "ALL_CPUS", frozenset(cpus))
    assert bench.ort_cpus(threads) == (frozenset(main), pool)
