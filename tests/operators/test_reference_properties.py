"""Properties of reference.py over random shapes, broadcast patterns (size-0 axes included),
element types (mixed included) and attributes (hypothesis)."""

from __future__ import annotations

import itertools
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lossgrad_compiler import reference, spec
from tests.helpers import torch_oracle
from tests.helpers.cases import Case
from tests.helpers.strategies import broadcast_shapes, calls, shape_broadcasting_to
from tests.helpers.tolerances import assert_close, assert_matches, bits

KL = spec.KL_DIV_BACKWARD.name
KLT = spec.KL_DIV_TARGET_BACKWARD.name
SL1 = spec.SMOOTH_L1_LOSS_BACKWARD.name
BCE = spec.BINARY_CROSS_ENTROPY_BACKWARD.name
BCEL = spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def evaluate(case: Case, **replace: np.ndarray) -> np.ndarray:
    return reference.evaluate(case.op_type, {**case.inputs, **replace}, case.attrs)


def equal_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Same values (NaN == NaN, -0 == +0)."""
    return a.shape == b.shape and np.array_equal(
        a.astype(np.float64), b.astype(np.float64), equal_nan=True
    )


@settings(max_examples=150)
@given(calls(dtypes=[F64]))
def test_float64_agrees_with_torch(case: Case) -> None:
    torch_oracle.assert_matches_torch(case.op_type, case.inputs, case.attrs, context=case.label)


@settings(max_examples=100)
@given(calls())
def test_any_types_agree_with_torch(case: Case) -> None:
    torch_oracle.assert_matches_torch(case.op_type, case.inputs, case.attrs, context=case.label)


@settings(max_examples=150)
@given(calls())
def test_shape_and_type_rules(case: Case) -> None:
    """KL ops and the binary cross entropies: the differentiated input's shape and type
    (autograd's gradient of self has self's type); the others: broadcast of all three and
    the promoted type (torch.promote_types as the independent rule)."""
    out = evaluate(case)
    go, x, t = (case.inputs[n] for n in spec.INPUT_NAMES)
    if case.op_type in (KL, BCE, BCEL):
        assert (out.shape, out.dtype) == (x.shape, x.dtype)
    elif case.op_type == KLT:
        assert (out.shape, out.dtype) == (t.shape, t.dtype)
    else:
        assert out.shape == np.broadcast_shapes(go.shape, x.shape, t.shape)
        to_torch = {ft.dtype: getattr(torch, ft.name) for ft in spec.FLOAT_TYPES}
        promoted = torch.promote_types(
            torch.promote_types(to_torch[go.dtype], to_torch[x.dtype]), to_torch[t.dtype]
        )
        assert to_torch[out.dtype] == promoted


@settings(max_examples=100)
@given(calls())
def test_odd_in_grad_output(case: Case) -> None:
    go = case.inputs["grad_output"]
    assert equal_values(evaluate(case, grad_output=-go), -evaluate(case))


@settings(max_examples=100)
@given(calls(dtypes=[F32, F64], specials=[0.0]))
def test_linear_in_grad_output(case: Case) -> None:
    """Doubling grad_output doubles the result exactly (scaling by 2 commutes with every
    rounding; values stay far from overflow and from subnormals, so Huber's delta*g must
    not be subnormal)."""
    assume(case.attrs.get("delta", 1.0) >= 2.0**-60)
    go = case.inputs["grad_output"]
    doubled = evaluate(case, grad_output=go * go.dtype.type(2))
    assert equal_values(doubled, evaluate(case) * doubled.dtype.type(2))


@settings(max_examples=100)
@given(calls(ops=[SL1]))
def test_smooth_l1_odd_in_the_difference(case: Case) -> None:
    x, t = case.inputs["self"], case.inputs["target"]
    assert equal_values(evaluate(case, self=-x, target=-t), -evaluate(case))


@settings(max_examples=60)
@given(calls())
def test_deterministic_across_runs_and_threads(case: Case) -> None:
    first = bits(evaluate(case), raw=True)
    assert np.array_equal(bits(evaluate(case), raw=True), first)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: evaluate(case), range(8)))
    for r in results:
        assert np.array_equal(bits(r, raw=True), first)


@settings(max_examples=100)
@given(calls(dtypes=[F64], specials=[0.0], reductions=["mean", "batchmean"]))
def test_mean_and_batchmean_are_sum_times_scale(case: Case) -> None:
    b = case.checked.broadcast_shape
    x = case.inputs["self"]
    batch = x.shape[0] if x.ndim else 1
    divisor = math.prod(b) if case.attrs["reduction"] == "mean" else batch
    summed = reference.evaluate(case.op_type, case.inputs, {**case.attrs, "reduction": "sum"})
    with np.errstate(all="ignore"):
        expected = summed / divisor if divisor else summed
    assert_matches(evaluate(case), expected, case.op_type, case.inputs, case.attrs)


@settings(max_examples=100)
@given(calls(reductions=["none"]))
def test_none_and_sum_are_the_same_computation(case: Case) -> None:
    summed = reference.evaluate(case.op_type, case.inputs, {**case.attrs, "reduction": "sum"})
    assert np.array_equal(bits(evaluate(case)), bits(summed))


@settings(max_examples=100)
@given(calls())
def test_expanding_grad_output_changes_nothing(case: Case) -> None:
    space = case.checked.iteration_shape
    go = np.broadcast_to(case.inputs["grad_output"], space)
    assert np.array_equal(bits(evaluate(case, grad_output=go)), bits(evaluate(case)))


@settings(max_examples=100)
@given(calls(ops=[KL, KLT], dtypes=[F32, F64], reductions=["none", "sum", "mean"]))
def test_summing_is_sum_to_shape_of_the_expanded_call(case: Case) -> None:
    """Expanding the differentiated input to B and summing the result with sum_to_shape
    gives the same bits as the call itself (the sum is the one documented order)."""
    assume(case.result_dtype == case.compute_dtype)  # summed before rounding
    name = case.checked.op.differentiates
    original = case.inputs[name]
    b = case.checked.broadcast_shape
    expanded = evaluate(case, **{name: np.broadcast_to(original, b)})
    expected = reference.sum_to_shape(expanded, original.shape)
    assert np.array_equal(bits(evaluate(case)), bits(expected))


@settings(max_examples=100)
@given(calls())
def test_half_types_round_once_from_float32(case: Case) -> None:
    """Whenever the compute type is float32, the call equals the call on float32 copies of
    the inputs, rounded once to the result type."""
    assume(case.compute_dtype == F32)
    wide = {n: a.astype(F32) for n, a in case.inputs.items()}
    expected = reference.round_to(
        reference.evaluate(case.op_type, wide, case.attrs), case.result_dtype
    )
    assert np.array_equal(bits(evaluate(case)), bits(expected))


@st.composite
def sums(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...]]:
    b = draw(broadcast_shapes(max_rank=4, max_dim=3))
    shape = draw(shape_broadcasting_to(b))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    magnitudes = 10.0 ** rng.integers(-6, 7, size=b)
    dtype = draw(st.sampled_from([F32, F64]))
    return (rng.normal(size=b) * magnitudes).astype(dtype), shape


@settings(max_examples=100)
@given(sums())
def test_sum_to_shape_is_the_row_major_loop_nest(drawn: tuple[np.ndarray, tuple[int, ...]]) -> None:
    values, shape = drawn
    acc = np.zeros(shape, values.dtype)
    lead = values.ndim - len(shape)
    for idx in itertools.product(*(range(n) for n in values.shape)):
        proj = tuple(0 if d == 1 else i for d, i in zip(shape, idx[lead:], strict=True))
        acc[proj] = acc[proj] + values[idx]
    actual = reference.sum_to_shape(values, shape)
    if actual is values:  # nothing to sum: the values themselves
        assert shape == values.shape
        return
    assert np.array_equal(bits(actual, raw=True), bits(acc, raw=True))


def test_assert_close_is_not_vacuous_for_mean() -> None:
    """The tolerance used above rejects a wrong divisor."""
    x = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    inputs = {"grad_output": np.ones(()), "self": x, "target": x}
    ours = reference.evaluate(KL, inputs, {"reduction": "mean"})
    with pytest.raises(AssertionError):  # a 9% error must not pass the tolerance
        assert_close(ours, ours * (12 / 11), compute=F64, magnitude=np.abs(ours))
