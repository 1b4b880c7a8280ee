"""reference.py against PyTorch 2.13 autograd, the oracle where docs/operators.md is silent.

The oracle (helpers/torch_oracle.py) differentiates F.kl_div and F.smooth_l1_loss in the
compute type and rounds once, as the contract says for half types. Where torch and it
differ on purpose (torch_oracle.DEVIATIONS) the random comparisons replace the triggering
values, and each deviation has its own test below that shows torch's value and asserts
the contract's."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lossgrad_compiler import reference, spec
from tests.helpers import cases, torch_oracle
from tests.helpers.magnitude import term_magnitude
from tests.helpers.tolerances import ORACLE, assert_close, assert_matches, bits, ulp

KL = spec.KL_DIV_BACKWARD.name
KLT = spec.KL_DIV_TARGET_BACKWARD.name
SL1 = spec.SMOOTH_L1_LOSS_BACKWARD.name
F16, BF16, F32, F64 = (
    np.dtype(t) for t in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)
)
INF, NAN = math.inf, math.nan

DTYPES: list[Any] = [F64, F32, F16, BF16, *cases.mixed_dtype_combinations()]


def _dtype_id(d: Any) -> str:
    if isinstance(d, tuple):
        return "-".join(np.dtype(x).name for x in d)
    return np.dtype(d).name


def check_against_torch(case: cases.Case) -> None:
    torch_oracle.assert_matches_torch(case.op_type, case.inputs, case.attrs, context=case.label)


@pytest.mark.parametrize("specials", [0.0, 0.2], ids=["finite", "specials"])
@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("op", cases.OP_TYPES)
def test_standard_cases_match_torch(op: str, dtype: Any, specials: float) -> None:
    """Every reduction, log_target / beta (0, 1e-6, 0.5, 1, 2.5), broadcast pattern
    (ranks 0-8, empty), grad_output shape (0-d, [1], partial, full, enlarging) and element
    type (incl. mixed), with and without 0, -0, +-inf and NaN in every input."""
    for case in cases.standard_cases(op, dtype, seed=21, specials=specials):
        check_against_torch(case)


@pytest.mark.parametrize("rank", range(9))
@pytest.mark.parametrize("op", cases.OP_TYPES)
def test_every_rank_matches_torch(op: str, rank: int) -> None:
    self_shape = (2, 1, 3, 1, 2, 1, 2, 1)[:rank]
    target_shape = (1, 2, 3, 2, 1, 2, 1, 1)[:rank]
    if cases.fits(op, "target"):  # the binary cross entropies: target fits into self
        target_shape = self_shape[1:]
    b = np.broadcast_shapes(self_shape, target_shape)
    for attrs in cases.attribute_grid(op):
        go_shape = b if attrs["reduction"] == "none" else ()
        case = cases.make_case(op, attrs, self_shape, target_shape, go_shape, F64, seed=rank)
        check_against_torch(case)


@pytest.mark.parametrize("op", cases.OP_TYPES)
def test_grad_output_shapes_match_torch(op: str) -> None:
    """grad_output 0-d, [1], partial [1, 3] and full [4, 3] under every reduction."""
    for attrs in cases.attribute_grid(op):
        for go_shape in cases.grad_output_shapes(op, (4, 3)).values():
            for dtype in (F64, F32):
                case = cases.make_case(op, attrs, (4, 3), (3,), go_shape, dtype, seed=5)
                check_against_torch(case)


# --------------------------------------------------------------------------- SmoothL1 op level


@pytest.mark.parametrize("dtype", [F64, F32, F16, BF16], ids=_dtype_id)
def test_smooth_l1_matches_aten_op(dtype: np.dtype) -> None:
    """The op-level contract: shape broadcast(grad_output, self, target), promoted type, as
    aten.smooth_l1_loss_backward with self and target expanded to B (beta > 0; for beta 0
    aten differs, see test_deviation_aten_beta_zero)."""
    for case in cases.standard_cases(SL1, dtype, seed=31, specials=0.1):
        if case.attrs["beta"] == 0.0:
            continue
        ours = reference.evaluate(SL1, case.inputs, case.attrs)
        aten = torch_oracle.smooth_l1_aten(case.inputs, case.attrs).astype(case.result_dtype)
        assert ours.shape == aten.shape == case.result_shape
        assert_matches(ours, aten, SL1, case.inputs, case.attrs, context=case.label)


@pytest.mark.parametrize("dtype", [F64, F32], ids=_dtype_id)
def test_smooth_l1_summed_to_self_is_the_autograd_gradient(dtype: np.dtype) -> None:
    """A graph that needs self's shape adds a ReduceSum: our result summed over the
    broadcast dimensions is d F.smooth_l1_loss / d self."""
    for case in cases.standard_cases(SL1, dtype, seed=41, specials=0.1):
        if case.checked.iteration_shape != case.checked.broadcast_shape:
            continue  # grad_output enlarges B: no autograd counterpart
        self_shape = case.inputs["self"].shape
        ours = reference.sum_to_shape(reference.evaluate(SL1, case.inputs, case.attrs), self_shape)
        expected = torch_oracle.smooth_l1_autograd_wrt_self(case.inputs, case.attrs).astype(dtype)
        magnitude, _ = term_magnitude(SL1, case.inputs, case.attrs)
        n_terms = max(1, magnitude.size // max(1, math.prod(self_shape)))
        assert_close(
            ours,
            expected,
            compute=dtype,
            magnitude=reference.sum_to_shape(magnitude, self_shape),
            n_terms=n_terms,
            context=case.label,
        )


# --------------------------------------------------------------------------- contract == torch


def _call(
    op: str, go: Any, x: Any, t: Any, dtype: Any = F64, **attrs: Any
) -> tuple[np.ndarray, np.ndarray]:
    inputs = {
        "grad_output": np.asarray(go, dtype),
        "self": np.asarray(x, dtype),
        "target": np.asarray(t, dtype),
    }
    return reference.evaluate(op, inputs, attrs), torch_oracle.oracle(op, inputs, attrs)


def _same(a: np.ndarray, b: Any) -> None:
    np.testing.assert_array_equal(np.asarray(a, np.float64), np.asarray(b, np.float64))


def test_smooth_l1_beta_zero_sign_agrees_with_torch() -> None:
    """sgn(0) = 0 and sgn(NaN) = 0 of the contract are what F.smooth_l1_loss(beta=0) gives."""
    x = [0.0, -0.0, 2.0, -2.0, NAN, INF]
    ours, torch_value = _call(SL1, 1.0, x, 0.0, reduction="sum", beta=0.0)
    _same(ours, [0.0, 0.0, 1.0, -1.0, 0.0, 1.0])
    _same(torch_value, ours)


def test_smooth_l1_boundary_and_nan_agree_with_torch() -> None:
    ours, torch_value = _call(
        SL1, 2.0, [0.5, -0.5, 0.25, NAN, INF], 0.0, reduction="none", beta=0.5
    )
    _same(ours, [2.0, -2.0, 1.0, NAN, 2.0])
    _same(torch_value, ours)


def test_kl_negative_targets_agree_with_torch() -> None:
    """No masking of t <= 0: KlDivBackward gives -ge*t; KlDivTargetBackward gives NaN for
    t < 0 (ln); self's NaN does not reach KlDivBackward."""
    ours, torch_value = _call(KL, 1.0, [NAN, 0.0, 0.0], [-2.0, 0.0, 3.0], reduction="none")
    _same(ours, [2.0, -0.0, -3.0])
    _same(torch_value, ours)
    assert list(np.signbit(ours)) == list(np.signbit(torch_value)) == [False, True, True]
    ours, torch_value = _call(KLT, 1.0, 0.0, [-2.0, -INF, 1.0], reduction="none")
    _same(ours, [NAN, NAN, 1.0])
    _same(torch_value, ours)


def test_batchmean_divisor_agrees_with_torch() -> None:
    """batchmean divides by self.shape[0] (not B's dim 0) and not at all for 0-d self."""
    for self_shape in [(1, 3), (3,), (), (4, 3)]:
        for op in (KL, KLT):
            case = cases.make_case(
                op, {"reduction": "batchmean"}, self_shape, (4, 3), (), F64, seed=2
            )
            check_against_torch(case)


def test_empty_b_summed_into_a_non_empty_result_agrees_with_torch() -> None:
    ours, torch_value = _call(KL, 1.0, np.ones((1, 3)), np.ones((0, 3)), reduction="mean")
    _same(ours, np.zeros((1, 3)))
    _same(torch_value, ours)


# --------------------------------------------------------------------------- deviations


def test_deviations_are_all_tested() -> None:
    tested = {
        name.removeprefix("test_deviation_")
        for name in globals()
        if name.startswith("test_deviation_")
    }
    assert set(torch_oracle.DEVIATIONS) <= tested


def test_deviation_half_per_step() -> None:
    """torch rounds float16 after every op: exp(12) overflows and 0.25*exp(12) becomes -inf.
    the contract computes in float32 and rounds once: the finite float16(-(0.25f*exp(12f)))."""
    inputs = {
        "grad_output": np.array([0.25, 0.25], F16),
        "self": np.zeros(2, F16),
        "target": np.array([12.0, 1.0], F16),
    }
    attrs = {"reduction": "none", "log_target": 1}
    torch_half = torch_oracle.torch_native(KL, inputs, attrs)
    assert torch_half[0] == -np.inf
    ours = reference.evaluate(KL, inputs, attrs)
    once = (-(np.float32(0.25) * np.exp(np.array([12.0, 1.0], np.float32)))).astype(F16)
    assert np.array_equal(bits(ours), bits(once)) and np.isfinite(ours).all()


@pytest.mark.parametrize("log_target", [0, 1])
@pytest.mark.parametrize("half", [F16, BF16], ids=_dtype_id)
@pytest.mark.parametrize("op", [KL, KLT])
def test_deviation_half_per_step_in_random_data(op: str, half: np.dtype, log_target: int) -> None:
    """On ordinary data torch's composite kl_div in half types rounds every step, the
    per-element terms before it sums the gradient back to a broadcast operand: somewhere the
    result lands more than 1 ulp away from the round-once value, while the reference stays
    within 1 ulp of torch computing in float32 and rounding once. The differentiated operand
    is broadcast along 256 elements, so the gap shows on any draw, not on a lucky one.
    (SmoothL1's gradient is one fused torch kernel that widens per element: no such gap.)"""
    wide, summed = (64, 256), (64, 1)
    self_shape, target_shape = (summed, wide) if op == KL else (wide, summed)
    attrs = {"reduction": "none", "log_target": log_target}
    case = cases.make_case(op, attrs, self_shape, target_shape, wide, half, seed=51)
    inputs, _ = torch_oracle.without_deviations(op, case.inputs, case.attrs)
    torch_oracle.assert_matches_torch(op, inputs, attrs, context=case.label)
    ours = reference.evaluate(op, inputs, attrs).astype(np.float64)
    native = torch_oracle.torch_native(op, inputs, attrs).astype(np.float64)
    finite = np.isfinite(ours) & np.isfinite(native)
    assert np.any(np.abs(native[finite] - ours[finite]) > ulp(ours[finite], half))


def test_deviation_soft_margin_infinite_product() -> None:
    """t*self = -inf: torch's kernel gives -t*e/(1+e) with e = exp(inf), inf/inf = NaN; the
    contract computes from exp(t*self) = 0 and gives the limit -t*g. t*self = +inf agrees
    (e = 0)."""
    soft = spec.SOFT_MARGIN_LOSS_BACKWARD.name
    x, t = [-INF, INF, 1.0], [0.5, 0.5, 0.5]
    ours, torch_value = _call(soft, [2.0, 2.0, 2.0], x, t, reduction="none")
    assert np.isnan(torch_value[0]) and ours[0] == -1.0
    assert ours[1] == torch_value[1] == 0.0
    np.testing.assert_allclose(ours[2], torch_value[2], rtol=1e-15)


def test_deviation_soft_margin_overflowing_exp() -> None:
    """Finite t*self in float32 where torch's exp(-t*self) overflows (t*self = -100: NaN) or
    t*exp(-t*self) does (t = 3, x = -29.5: -inf): the contract gives the gradient's value,
    -t*g (sigmoid(100) and sigmoid(88.5) are 1 in float32)."""
    soft = spec.SOFT_MARGIN_LOSS_BACKWARD.name
    ours, torch_value = _call(soft, [2.0, 2.0], [-100.0, -29.5], [1.0, 3.0], F32, reduction="none")
    assert np.isnan(torch_value[0]) and torch_value[1] == -INF
    _same(ours, [-2.0, -6.0])


def test_deviation_kl_target_zero() -> None:
    ours, torch_value = _call(KLT, [1.0, 2.0], [0.5, 0.5], [0.0, 1.0], reduction="none")
    assert np.isnan(torch_value[0]) and ours[0] == 0.0
    _same(ours[1:], torch_value[1:])


def test_deviation_kl_target_inf() -> None:
    ours, torch_value = _call(KLT, [1.0, -1.0], [0.5, 0.5], [INF, INF], reduction="none")
    assert np.isnan(torch_value).all()
    _same(ours, [INF, -INF])


def test_deviation_kl_target_inf_grad_output() -> None:
    """log_target 0, torch: inf*ln(t) + inf*t/t - inf*x = inf - inf; the contract:
    inf * (ln t + 1 - x), an infinity of that factor's sign. log_target 1 is no deviation:
    the operator computes PyTorch's (g*(t - x))*e^t + g*e^t, NaN as torch (issue 44)."""
    ours, torch_value = _call(KLT, [INF, -INF], [0.0, 0.0], [0.5, 0.5], reduction="none")
    assert np.isnan(torch_value).all()
    _same(ours, [INF, -INF])
    ours, torch_value = _call(
        KLT, [INF, -INF], [0.0, 0.0], [-2.0, -2.0], reduction="none", log_target=1
    )
    assert np.isnan(torch_value).all() and np.isnan(ours).all()


def test_kl_target_log_target_follows_pytorch_order() -> None:
    """t = 88.72, x = 0.5, grad_output = 1e-5 in float32: PyTorch's (g*(t - x))*e^t + g*e^t
    stays finite (3.0e35) where exp(t)*((t + 1) - x) first overflows (inf) (issue 44)."""
    inputs = {
        "grad_output": np.array([1e-5], F32),
        "self": np.array([0.5], F32),
        "target": np.array([88.72], F32),
    }
    attrs = {"reduction": "none", "log_target": 1}
    ours = reference.evaluate(KLT, inputs, attrs)
    expected = torch_oracle.oracle(KLT, inputs, attrs)
    assert np.isfinite(expected).all() and expected[0] > 1e35
    np.testing.assert_allclose(ours, expected, rtol=4 * np.finfo(np.float32).eps)


def test_deviation_kl_target_empty_b() -> None:
    target = np.array([[[NAN, -1.0, 0.0]], [[INF, 1.0, 2.0]]])
    inputs = {"grad_output": np.ones(()), "self": np.zeros((0, 3)), "target": target}
    for log_target in (0, 1):
        attrs = {"reduction": "sum", "log_target": log_target}
        torch_value = torch_oracle.oracle(KLT, inputs, attrs)
        assert np.isnan(torch_value).any()
        _same(reference.evaluate(KLT, inputs, attrs), np.zeros((2, 1, 3)))


def test_deviation_beta_rounds_to_zero() -> None:
    """beta = 1e-50 is 0 in float32: torch keeps the smooth path and gives NaN for NaN d; the
    reference takes the sign form, sgn(NaN) = 0."""
    inputs = {"grad_output": np.ones((), F32), "self": np.array([0.0, NAN, 3.0], F32)}
    inputs["target"] = np.zeros(3, F32)
    attrs = {"reduction": "sum", "beta": 1e-50}
    _same(torch_oracle.smooth_l1_autograd(inputs, attrs), [0.0, NAN, 1.0])
    _same(reference.evaluate(SL1, inputs, attrs), [0.0, 0.0, 1.0])
    _, torch_attrs = torch_oracle.without_deviations(SL1, inputs, attrs)
    assert torch_attrs["beta"] == 0.0
    as_float64 = {n: a.astype(F64) for n, a in inputs.items()}  # 1e-50 > 0 in float64
    assert torch_oracle.without_deviations(SL1, as_float64, attrs)[1]["beta"] == 1e-50


def test_deviation_aten_beta_zero() -> None:
    """aten.smooth_l1_loss_backward(beta=0): x <= -0 picks -1 at d == 0 and x/0 gives NaN
    for NaN d. the contract follows F.smooth_l1_loss (l1_loss): 0 at both."""
    inputs = {"grad_output": np.ones(()), "self": np.array([0.0, NAN, 3.0]), "target": np.zeros(3)}
    attrs = {"reduction": "sum", "beta": 0.0}
    aten = torch_oracle.smooth_l1_aten(inputs, attrs)
    _same(aten, [-1.0, NAN, 1.0])
    autograd = torch_oracle.smooth_l1_autograd(inputs, attrs)
    _same(autograd, [0.0, 0.0, 1.0])
    _same(reference.evaluate(SL1, inputs, attrs), autograd)


def test_torch_is_the_pinned_version() -> None:
    """The oracle's behaviour (deviations included) is that of torch 2.13."""
    assert torch.__version__.startswith("2.13.")
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    t = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    (gt,) = torch.autograd.grad(F.kl_div(x, t, reduction="sum"), t)
    assert torch.isnan(gt).all()


def test_oracle_tolerance_is_not_vacuous() -> None:
    """An error of a few ulps of the terms passes; a wrong scale does not."""
    case = cases.make_case(KL, {"reduction": "mean"}, (4, 3), (4, 3), (), F32, seed=1)
    ours = reference.evaluate(KL, case.inputs, case.attrs)
    nudged = np.nextafter(ours, np.float32(np.inf))
    assert_matches(nudged, ours, KL, case.inputs, case.attrs)
    with pytest.raises(AssertionError):
        assert_matches(
            ours * np.float32(1.001), ours, KL, case.inputs, case.attrs, tolerance=ORACLE
        )
