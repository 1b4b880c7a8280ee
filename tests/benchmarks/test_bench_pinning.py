"""Where the native benchmark puts an ORT runner's threads: the calling thread on one CPU and
each pool thread on another, so that no two of a session's threads share a CPU; nothing is
pinned where the process has too few CPUs. The triad's threads go where an ORT runner's go."""

from __future__ import annotations

import ctypes
import os

import pytest

from benchmarks import bench_ort_native as bench
from lossgrad_compiler.backends.ort.build import NativeUnavailableError, toolchain


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


def test_triad_threads_run_where_an_ort_runners_would() -> None:
    try:
        toolchain()  # the triad is built, not the kernel library (not at collection either)
    except NativeUnavailableError as err:
        pytest.skip(f"needs a C++ compiler: {err}")
    # unpinned, the spawned thread would inherit the calling thread's CPU
    threads = 2
    affinity = (ctypes.c_uint64 * threads)()
    run = bench.triad_runner(1 << 12, threads, affinity)
    before = os.sched_getaffinity(0)
    try:
        bench.on_its_cpus(run)
        run()
    finally:
        os.sched_setaffinity(0, before)
    placed = bench.thread_cpus(threads)
    expected = [{cpu} for cpu in placed] if placed else [set(bench.ALL_CPUS)] * threads
    assert [{cpu for cpu in range(64) if mask >> cpu & 1} for mask in affinity] == expected
