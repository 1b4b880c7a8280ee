"""bench_classes.py's goal lines on made-up figures whose answer is known: a triad goal
missed is compute-bound exactly when the in-cache cost per element reaches what the goal
allows (the triad's time per element over 0.8)."""

from __future__ import annotations

from benchmarks.bench_classes import triad_reason, verdicts


def test_each_goal_is_met_at_its_bound_and_missed_below() -> None:
    lines = verdicts({"torch": 2.0, "iree": 0.99, "triad": 0.8})
    assert lines == ["x torch 2.00 >= 2.0 ok", "x iree 0.99 < 1.0 NO", "x triad 0.80 >= 0.8 ok"]
    assert verdicts({"triad": 0.5}) == ["x triad 0.50 < 0.8 NO"]  # no PyTorch, no IREE


def test_a_kernel_slower_in_cache_than_the_goal_allows_is_compute_bound() -> None:
    # native 1.0 ns/element at 0.2 of the triad: the triad takes 0.2, the goal allows 0.25
    assert triad_reason(1.0, 0.2, 0.6).startswith("compute-bound: 0.60 ns/element")
    assert "the goal allows 0.25" in triad_reason(1.0, 0.2, 0.6)
    assert triad_reason(1.0, 0.2, 0.25).startswith("compute-bound")


def test_a_kernel_fast_in_cache_loses_its_time_moving_the_data() -> None:
    reason = triad_reason(1.0, 0.2, 0.1)
    assert reason.startswith("memory: 1.00 ns/element here against 0.10")
