"""The native benchmark's reasons for a goal not met, on made-up cells whose answer is known:
the reason must follow the in-cache cost per element, not the size of the call."""

from __future__ import annotations

from benchmarks.bench_ort_native import Cell, in_cache_cost, reasons

OP = "KlDivTargetBackward"
NAN = float("nan")


def cell(log2n: int, native_ns: float, iree_ns: float, triad_ns: float = 0.32) -> Cell:
    """A float32 0-d cell whose runners take the given nanoseconds per element, plus a fixed
    20 us per call for IREE (its dispatch) and 3 us for the native kernel."""
    n = 1 << log2n
    return Cell(
        OP, log2n, "float32", "0-d", 1,
        native=native_ns * n * 1e-9 + 3e-6,
        function=NAN,
        torch=NAN,
        iree=iree_ns * n * 1e-9 + 20e-6,
        triad=triad_ns * n * 1e-9,
    )  # fmt: skip


def test_in_cache_cost_cancels_the_fixed_cost_of_a_call() -> None:
    cells = [cell(16, 0.6, 0.45), cell(20, 0.6, 0.45)]
    assert abs(in_cache_cost(cells[0], cells, "native") - 0.6) < 1e-9
    assert abs(in_cache_cost(cells[0], cells, "iree") - 0.45) < 1e-9
    assert in_cache_cost(cells[0], cells, "torch") is None  # no PyTorch in these cells


def test_a_kernel_whose_arithmetic_exceeds_the_goal_is_compute_bound() -> None:
    cells = [cell(16, 0.6, 0.45), cell(20, 0.6, 0.45), cell(22, 0.6, 0.45)]
    # 12 bytes per element at a triad of 12 bytes per 0.32 ns: the 0.8 goal allows 0.4 ns
    found = reasons(cells[2], cells)
    assert found[0].startswith("triad 0.53 < 0.8: compute-bound, 0.60 ns/element")
    assert "the goal allows 0.40" in found[0]
    assert found[1].startswith("IREE 1.32x faster: 0.45 against our 0.60")
    assert found[1].endswith("it costs less per element even in cache")


def test_a_kernel_cheap_in_cache_but_slow_at_size_is_memory_bound() -> None:
    cells = [cell(16, 0.2, 0.5), cell(20, 0.2, 0.5), cell(24, 0.6, 0.5)]
    found = reasons(cells[2], cells)
    assert found[0].startswith("triad 0.53 < 0.8: memory, 0.60 ns/element here against 0.20")
    assert found[1].endswith("it moves the data faster at this size")


def test_goals_met_give_no_reason_and_missing_twins_say_so() -> None:
    fast = [cell(16, 0.2, 0.5), cell(20, 0.2, 0.5), cell(22, 0.3, 0.5)]
    assert reasons(fast[2], fast) == []
    alone = cell(22, 0.6, 0.45)
    assert all("no 2^16 and 2^20 cells" in why for why in reasons(alone, [alone]))
