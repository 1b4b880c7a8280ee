"""Median seconds per call of several runners taking turns (round robin, each round starting
one runner later), each call followed by the device's synchronisation, so that every runner
meets the same clocks and the same neighbours, and none is always first after a pause."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_turns(
    runners: dict[str, Callable[[], object]],
    sync: Callable[[], None],
    budget_s: float = 0.5,
    min_rounds: int = 7,
    max_rounds: int = 200,
) -> dict[str, float]:
    """Median seconds of one call (launch to synchronised end) of each runner, after one
    warm-up call each, over rounds until `budget_s` has passed (at least `min_rounds`)."""
    names = list(runners)
    for name in names:
        runners[name]()
        sync()
    samples: dict[str, list[float]] = {name: [] for name in names}
    start = time.perf_counter()
    rounds = 0
    while rounds < min_rounds or (time.perf_counter() - start < budget_s and rounds < max_rounds):
        shift = rounds % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            t0 = time.perf_counter()
            runners[name]()
            sync()
            samples[name].append(time.perf_counter() - t0)
        rounds += 1
    return {name: statistics.median(times) for name, times in samples.items()}
