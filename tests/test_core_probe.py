"""The CPU placement probe names each placement from its timings, and sees two threads that
share one CPU take turns: the timing runs from the first thread's start to the last's end."""

from __future__ import annotations

import time

import pytest

from benchmarks import bench_ort_native as bench
from benchmarks import core_probe
from benchmarks.bench_ort_native import ALL_CPUS
from lossgrad_compiler.runtime.ort import native_library

needs_compiler = pytest.mark.skipif(
    native_library() is None, reason="needs a C++ compiler (the native build)"
)


@pytest.mark.parametrize(
    ("ports", "latency", "trip", "kind"),
    [
        (1.05, 1.0, 100.0, "cores near"),
        (1.49, 1.0, 299.0, "cores near"),
        (1.05, 1.0, 300.0, "cores far apart"),
        (1.1, 0.99, 590.0, "cores far apart"),
        (2.0, 1.0, 100.0, "SMT siblings"),
        (1.5, 1.02, 600.0, "SMT siblings"),
        (2.1, 2.0, 100.0, "one hardware thread"),
        (2.1, 1.5, 9e6, "one hardware thread"),
    ],
)
def test_kind_follows_the_timings(ports: float, latency: float, trip: float, kind: str) -> None:
    assert core_probe.Placement(ports, latency, trip).kind == kind


@needs_compiler
def test_two_threads_on_one_cpu_take_turns() -> None:
    cpu = min(ALL_CPUS) if ALL_CPUS else 0
    lib = core_probe.library()
    start = time.perf_counter()
    where = core_probe.placement(lib, (cpu, cpu))
    assert time.perf_counter() - start < 10  # the ping-pong stops at its budget
    assert where.ports >= core_probe.SHARED and where.latency >= core_probe.SHARED
    assert where.kind == "one hardware thread"
    assert where.round_trip_ns > 1_000  # each pass waits for the scheduler


@needs_compiler
@pytest.mark.skipif(len(ALL_CPUS) < 2, reason="needs two CPUs")
def test_a_line_crosses_between_two_cpus() -> None:
    first, second = sorted(ALL_CPUS)[:2]
    # a budget long enough for the other side to be scheduled on a busy machine (the tests run
    # beside one another): each trip answered, in far less than the budget's share
    trip = core_probe.library().round_trip_seconds(first, second, 200, 5.0)
    assert 0 < trip < 0.025


def test_each_kind_has_its_own_word() -> None:
    words = {
        core_probe.Placement(ports, latency, trip).short
        for ports, latency, trip in [(1, 1, 100), (1, 1, 600), (2, 1, 100), (2, 2, 100)]
    }
    assert words == {"near", "far", "smt", "turns"}


def test_best_times_probes_before_each_round() -> None:
    calls: list[str] = []
    bench.best_times(
        {"a": lambda: calls.append("a")},
        budget=0.0,
        min_rounds=3,
        burst=2,
        pause=0.0,
        each_round=lambda: calls.append("probe"),
    )
    # warm-up, then per round: the probe, a burst of two calls
    assert calls == ["a"] + ["probe", "a", "a"] * 3


def test_only_two_thread_runners_on_two_cpus_are_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert bench.two_cpu_probe(1) is None
    monkeypatch.setattr(bench, "ALL_CPUS", frozenset({0}))
    assert bench.two_cpu_probe(2) is None


@needs_compiler
@pytest.mark.skipif(len(ALL_CPUS) < 2, reason="needs two CPUs")
def test_a_two_thread_runners_cpus_are_named() -> None:
    probe = bench.two_cpu_probe(2)
    assert probe is not None
    assert probe().short in {"near", "far", "smt", "turns"}
