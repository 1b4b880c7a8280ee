"""reference.py against docs/operators.md and docs/level2.md, without torch: hand-computed values,
the level-2 evaluation order (bit for bit, through a scalar loop nest), the summation
order, the scale, beta rounding, rounding once, special values and the array contract."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lossgrad_compiler import reference, spec
from lossgrad_compiler.errors import BroadcastError
from tests.helpers import cases
from tests.helpers.tolerances import bits

KL = spec.KL_DIV_BACKWARD.name
KLT = spec.KL_DIV_TARGET_BACKWARD.name
SL1 = spec.SMOOTH_L1_LOSS_BACKWARD.name
MSE = spec.MSE_LOSS_BACKWARD.name
L1 = spec.L1_LOSS_BACKWARD.name
HUBER = spec.HUBER_LOSS_BACKWARD.name
SOFT = spec.SOFT_MARGIN_LOSS_BACKWARD.name
BCE = spec.BINARY_CROSS_ENTROPY_BACKWARD.name
BCEL = spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name
F16, BF16, F32, F64 = (
    np.dtype(t) for t in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)
)
INF, NAN = math.inf, math.nan


def run(op: str, go: Any, x: Any, t: Any, dtype: Any = F64, **attrs: Any) -> np.ndarray:
    inputs = {
        "grad_output": np.asarray(go, dtype),
        "self": np.asarray(x, dtype),
        "target": np.asarray(t, dtype),
    }
    return reference.evaluate(op, inputs, attrs)


def same(actual: np.ndarray, expected: Any) -> None:
    """Equal values (NaN == NaN, -0 == +0), same dtype and shape."""
    expected = np.asarray(expected, actual.dtype)
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual.astype(np.float64), expected.astype(np.float64))


# --------------------------------------------------------------------------- formulas


def test_kl_div_backward_values() -> None:
    go, x, t = [[1.0, 2.0, -1.0]], [[9.0, NAN, 3.0]], [[0.5, -2.0, 3.0]]
    same(run(KL, go, x, t, reduction="none"), [[-0.5, 4.0, 3.0]])  # self never read
    same(run(KL, go, x, t, reduction="none", log_target=1), -np.array(go) * np.exp(t))
    same(run(KL, 1.0, x, t, reduction="sum"), [[-0.5, 2.0, -3.0]])
    same(run(KL, 1.0, x, t, reduction="mean"), [[-0.5 / 3, 2.0 / 3, -1.0]])
    same(run(KL, 1.0, x, t, reduction="batchmean"), [[-0.5, 2.0, -3.0]])  # self.shape[0] == 1


def test_kl_div_target_backward_values() -> None:
    go, x, t = [2.0, 2.0, 2.0, 2.0, 2.0], [0.5, 0.5, 0.5, 0.5, NAN], [1.0, math.e, 0.0, -1.0, 1.0]
    same(run(KLT, go, x, t, reduction="none"), [1.0, 3.0, 0.0, NAN, NAN])
    tl = [0.0, 1.0, -INF, 2.0, 0.0]
    e1, e2 = np.exp(1.0), np.exp(2.0)
    # PyTorch's order: (g*(t - x))*e^t + g*e^t
    expected = [(2.0 * -0.5) * 1.0 + 2.0, (2.0 * 0.5) * e1 + 2.0 * e1, NAN]
    expected += [(2.0 * 1.5) * e2 + 2.0 * e2, NAN]
    same(run(KLT, go, x, tl, reduction="none", log_target=1), expected)


def test_kl_div_target_backward_zero_target_is_zero_whatever_else() -> None:
    """the contract: t == 0 (log_target 0) gives 0 even for inf/NaN grad_output or self."""
    out = run(
        KLT, [INF, NAN, 1.0, -INF], [0.0, 1.0, NAN, INF], [0.0, -0.0, 0.0, 0.0], reduction="none"
    )
    assert np.all(bits(out) == bits(np.zeros(4)))  # +0.0: the select's constant


@pytest.mark.parametrize("beta", [0.5, 1.0, 2.5])
def test_smooth_l1_values(beta: float) -> None:
    x = np.array([0.0, 0.1, -0.1, beta, -beta, 10.0, -10.0, NAN, INF, -INF])
    out = run(SL1, 3.0, x, 0.0, reduction="sum", beta=beta)
    expected = 3.0 * np.clip(x / beta, -1.0, 1.0)
    same(out, expected)
    assert out[3] == 3.0 and out[4] == -3.0  # |d| == beta gives +-ge


def test_smooth_l1_beta_zero_is_sign() -> None:
    x = np.array([0.0, -0.0, 1e-300, -5.0, NAN, INF])
    same(run(SL1, 2.0, x, 0.0, reduction="none", beta=0.0), [0.0, 0.0, 2.0, -2.0, 0.0, 2.0])


def test_smooth_l1_mean_divides_by_b_not_by_the_iteration_space() -> None:
    out = run(SL1, np.ones((5, 1, 4)), np.zeros(4), np.full((2, 1), 10.0), reduction="mean")
    assert out.shape == (5, 2, 4)
    same(out, np.full((5, 2, 4), -1.0 / 8))


def test_defaults_are_mean_log_target_0_beta_1() -> None:
    x, t = np.array([0.25, 3.0]), np.array([0.0, 0.0])
    same(run(KL, 1.0, x, [2.0, 4.0]), [-1.0, -2.0])
    same(run(SL1, 1.0, x, t), [0.125, 0.5])


def test_mse_values() -> None:
    go, x, t = [1.0, -2.0, 3.0], [1.0, 0.5, NAN], [0.0, 1.5, 0.0]
    same(run(MSE, go, x, t, reduction="none"), [2.0, 4.0, NAN])
    same(run(MSE, 1.0, [1.0, 3.0], [0.0, 0.0], reduction="mean"), [1.0, 3.0])  # 2/n = 1


@pytest.mark.parametrize("delta", [0.5, 1.0, 2.5])
def test_huber_is_delta_times_smooth_l1_with_beta_delta(delta: float) -> None:
    """huber_loss_backward = delta * smooth_l1_loss_backward(beta = delta) for delta > 0 (a
    fact, not a shared kernel: the two formulas compute differently, so compare values)."""
    x = np.array([0.0, 0.1, -0.1, delta, -delta, 10.0, -10.0, NAN, INF, -INF])
    for reduction in ("none", "sum", "mean"):
        huber = run(HUBER, 3.0, x, 0.0, reduction=reduction, delta=delta)
        smooth = run(SL1, 3.0, x, 0.0, reduction=reduction, beta=delta)
        np.testing.assert_allclose(huber, delta * smooth, rtol=1e-15)


def test_soft_margin_values() -> None:
    go, x, t = [2.0, 2.0, 2.0], [0.0, 1.0, -INF], [1.0, -1.0, 0.5]
    expected = [2.0 * (0.5 - 1.0), -2.0 * (1.0 / (1.0 + math.e) - 1.0), -1.0]
    np.testing.assert_allclose(run(SOFT, go, x, t, reduction="none"), expected, rtol=1e-15)


def test_binary_cross_entropy_clamp_and_weight() -> None:
    x, t = [0.0, 1.0, 0.0, 0.25, 1.5], [0.0, 1.0, 1.0, 1.0, 0.0]
    out = run(BCE, 1.0, x, t, reduction="none")
    eps = spec.BCE_EPSILON
    same(out[:2], [0.0, 0.0])  # x == t at the clamp: 0, as in PyTorch
    assert out[2] == -1.0 / eps and out[4] == 1.5 / eps  # clamped, outside [0, 1] as well
    np.testing.assert_allclose(out[3], -0.75 / (0.25 * 0.75), rtol=1e-15)
    inputs = {"grad_output": np.ones(()), "self": np.array(x), "target": np.array(t)}
    weighted = reference.evaluate(BCE, {**inputs, "weight": np.full(5, 2.0)}, {"reduction": "none"})
    same(weighted, 2.0 * out)
    absent = reference.evaluate(BCE, {**inputs, "weight": None}, {"reduction": "none"})
    same(absent, out)


def test_binary_cross_entropy_with_logits_closed_form() -> None:
    rng = np.random.default_rng(3)
    x, t = rng.normal(size=(4, 3)), rng.uniform(size=(4, 3))
    w, p, go = rng.uniform(0.1, 2, size=(4, 3)), rng.uniform(0.1, 4, size=3), rng.normal(size=())
    inputs = {"grad_output": go, "self": x, "target": t, "weight": w, "pos_weight": p}
    out = reference.evaluate(BCEL, inputs, {"reduction": "mean"})
    sig = 1.0 / (1.0 + np.exp(-x))
    expected = w * (sig * (1 - t + p * t) - p * t) * go / 12
    np.testing.assert_allclose(out, expected, rtol=1e-13)
    plain = reference.evaluate(BCEL, {**inputs, "weight": None, "pos_weight": None}, {})
    np.testing.assert_allclose(plain, (sig - t) * go / 12, rtol=1e-13)


# --------------------------------------------------------------------------- level-2 order


def loop_nest(op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """docs/level2.md executed literally, one scalar at a time: widen, scale C(1)/C(n),
    the body in its fixed order with selects, `acc[proj(idx)] += v` from +0 in row-major
    order when the result is smaller than B, round once."""
    checked = spec.validate(
        op, {n: spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}, attrs
    )
    c = checked.compute.numpy
    go, x, t = (inputs[n] for n in spec.INPUT_NAMES)
    b = np.broadcast_shapes(x.shape, t.shape)
    space = np.broadcast_shapes(go.shape, b)
    a = checked.attrs
    scaling = checked.op.scaling
    scale = None
    with np.errstate(divide="ignore"):
        if a["reduction"] == "mean":
            n = c(math.prod(b))
            scale = n if scaling is spec.Scaling.DIVISOR else c(1) / n
        elif a["reduction"] == "batchmean" and x.ndim > 0:
            scale = c(1) / c(x.shape[0])
    beta = c(a.get("beta", 0.0))
    delta = c(a.get("delta", 1.0))
    one, zero, two, eps = c(1), c(0), c(2), c(spec.BCE_EPSILON)

    def sig(z: Any) -> Any:
        return one / (one + np.exp(-z)) if z > zero else np.exp(z) / (one + np.exp(z))

    def new_body(g: Any, xv: Any, tv: Any, opt: dict[str, Any]) -> Any:
        s = scale
        if op == MSE:
            return ((xv - tv) * (two if s is None else s * two)) * g
        if op == HUBER:
            d = xv - tv
            if d < -delta:
                return (-g) * delta if s is None else (g * (-s)) * delta
            if d > delta:
                return g * delta if s is None else (g * s) * delta
            return d * g if s is None else (d * s) * g
        if op == L1:  # (g/n) times PyTorch's sgn: 0 for a zero or NaN difference
            d = xv - tv
            return (g if s is None else g / s) * (one if d > zero else (-one if d < zero else zero))
        if op == SOFT:  # -t*sigmoid(-t*x): PyTorch's kernel where t*x >= 0
            tx = tv * xv
            e = np.exp(tx) if tx < zero else np.exp(-tx)
            numerator = tv * (one if tx < zero else e)
            scaled = -numerator if s is None else numerator * (-s)
            return (scaled / (one + e)) * g
        if op == BCE:
            p = xv * (one - xv)
            v = (g * (xv - tv)) / (eps if p < eps else p)
        else:
            if "pos_weight" in opt:
                pt = opt["pos_weight"] * tv
                v = (((pt + one) - tv) * sig(xv) - pt) * g
            else:
                v = (sig(xv) - tv) * g
        if "weight" in opt:
            v = v * opt["weight"]
        return v if s is None else v / s

    def body(g: Any, xv: Any, tv: Any, opt: dict[str, Any]) -> Any:
        if op not in (KL, KLT, SL1):
            return new_body(g, xv, tv, opt)
        ge = g * scale if scale is not None else g
        if op == KL:
            return -(ge * (np.exp(tv) if a["log_target"] else tv))
        if op == KLT:
            if a["log_target"]:
                e = np.exp(tv)
                return (ge * (tv - xv)) * e + ge * e
            v = ge * ((np.log(tv) + one) - xv)
            return zero if tv == zero else v
        if beta > zero:
            q = (xv - tv) / beta
            return ge * (one if q > one else (-one if q < -one else q))
        d = xv - tv
        return ge * (one if d > zero else (-one if d < zero else zero))

    result_shape = checked.result_shape
    summed = False
    if checked.op.differentiates:
        b_tail = b[len(b) - len(result_shape) :]
        stretched = any(r == 1 and bd != 1 for r, bd in zip(result_shape, b_tail, strict=True))
        summed = len(result_shape) < len(b) or stretched
    out = np.zeros(result_shape if checked.op.differentiates else space, c)
    gob, xb, tb = (np.broadcast_to(v.astype(c), space) for v in (go, x, t))
    optional = {
        n: np.broadcast_to(inputs[n].astype(c), space)
        for n in checked.op.optional_inputs
        if inputs.get(n) is not None
    }
    with np.errstate(all="ignore"):
        for idx in itertools.product(*(range(n) for n in space)):
            v = body(gob[idx], xb[idx], tb[idx], {n: o[idx] for n, o in optional.items()})
            if checked.op.differentiates:
                tail = idx[len(idx) - len(result_shape) :]
                proj = tuple(0 if r == 1 else i for r, i in zip(result_shape, tail, strict=True))
                out[proj] = out[proj] + v if summed else v
            else:
                out[idx] = v
    return reference.round_to(out, checked.result_type.dtype)


LOOP_DTYPES = [F64, F32, F16, BF16, (F16, BF16, F32), (BF16, F64, F16), (F32, F16, F64)]


@pytest.mark.parametrize("op", cases.OP_TYPES)
@pytest.mark.parametrize("dtype", LOOP_DTYPES, ids=str)
def test_bit_identical_to_the_level2_loop_nest(op: str, dtype: Any) -> None:
    for specials in (0.0, 0.25):
        for case in cases.standard_cases(op, dtype, seed=11, specials=specials):
            actual = reference.evaluate(op, case.inputs, case.attrs)
            expected = loop_nest(op, case.inputs, case.attrs)
            assert actual.dtype == expected.dtype and actual.shape == expected.shape, case.label
            assert np.array_equal(bits(actual), bits(expected)), case.label


def test_scale_is_one_over_n_in_the_compute_type() -> None:
    """C(1)/C(n): for n = 2**24 + 1, C(n) rounds to 2**24 in float32, so the float32 scale
    is exactly 2**-24 while the float64 one is 1/(2**24 + 1)."""
    n = 2**24 + 1
    for dtype, expected in [(F32, np.float32(2.0**-24)), (F64, 1.0 / n)]:
        infos = {
            "grad_output": spec.TensorInfo(dtype, ()),
            "self": spec.TensorInfo(dtype, (n,)),
            "target": spec.TensorInfo(dtype, (n,)),
        }
        checked = spec.validate(KL, infos, {"reduction": "mean"})
        scale = reference.scale_value(checked)
        assert scale.dtype == dtype and scale == expected
    third = reference.scale_value(spec.validate(KL, _infos(F32, (), (3,), (3,)), {}))
    assert third == np.float32(1) / np.float32(3)


@pytest.mark.parametrize(
    ("reduction", "self_shape", "target_shape", "expected"),
    [
        ("none", (4, 3), (4, 3), None),
        ("sum", (4, 3), (4, 3), None),
        ("mean", (4, 3), (3,), 1 / 12),
        ("mean", (1,), (1,), None),  # divisor 1: multiplying by 1 changes no bit
        ("batchmean", (4, 3), (4, 3), 1 / 4),
        ("batchmean", (1, 3), (4, 3), None),  # self's dim 0 is 1
        ("batchmean", (), (4, 3), None),  # 0-d self: no division
        ("mean", (0, 3), (0, 3), math.inf),  # C(1)/C(0); the space is empty anyway
    ],
)
def test_scale_value(reduction: str, self_shape: Any, target_shape: Any, expected: Any) -> None:
    checked = spec.validate(KL, _infos(F64, (), self_shape, target_shape), {"reduction": reduction})
    assert reference.scale_value(checked) == expected


def test_batchmean_uses_self_dim0() -> None:
    out = run(KL, 1.0, np.zeros((1, 3)), np.ones((4, 3)), reduction="batchmean")
    same(out, np.full((1, 3), -4.0))  # summed over 4 rows, not divided by 4
    out = run(KL, 1.0, np.zeros(()), np.ones((4, 3)), reduction="batchmean")
    same(out, -12.0)


def test_ge_is_scaled_before_the_body() -> None:
    """-(ge*t) with ge = go*s rounds differently from -(go*t)*s: pick float32 values where
    the two orders differ and check the level-2 one."""
    rng = np.random.default_rng(3)
    go = rng.normal(size=64).astype(np.float32)
    t = rng.normal(size=(3, 64)).astype(np.float32)
    s = np.float32(1) / np.float32(192)
    level2 = -((go * s) * t)
    other = -((go * t) * s)
    assert not np.array_equal(level2, other)  # the orders are distinguishable here
    out = reference.evaluate(KL, {"grad_output": go, "self": t, "target": t}, {"reduction": "mean"})
    assert np.array_equal(bits(out), bits(level2))


# --------------------------------------------------------------------------- beta


def test_beta_is_judged_after_rounding_to_the_compute_type() -> None:
    """1e-50 is 0 in float32: the sign form (d == 0 gives 0, NaN d gives 0); in float64 it is
    positive: the divide form (NaN d gives NaN, tiny d saturates)."""
    x = [0.0, NAN, 1e-60, -1.0]
    f32 = run(SL1, 1.0, x, 0.0, F32, reduction="sum", beta=1e-50)
    same(f32, [0.0, 0.0, 0.0, -1.0])  # 1e-60 is 0 in float32 as well
    f64 = run(SL1, 1.0, x, 0.0, F64, reduction="sum", beta=1e-50)
    same(f64, [0.0, NAN, 1e-60 / 1e-50, -1.0])
    half = run(SL1, 1.0, x, 0.0, F16, reduction="sum", beta=1e-50)  # computed in float32
    same(half, [0.0, 0.0, 0.0, -1.0])


def test_beta_is_rounded_to_float32_before_dividing() -> None:
    """beta = 3e-45 rounds to the float32 subnormal 2 * 2**-149, so d = 2 * 2**-149 gives
    q = 1 exactly; dividing by the double 3e-45 would give 0.934."""
    d = np.float32(2 * 2.0**-149)
    same(run(SL1, 1.0, d, 0.0, F32, reduction="sum", beta=3e-45), 1.0)
    same(run(SL1, 1.0, float(d), 0.0, F64, reduction="sum", beta=3e-45), float(d) / 3e-45)


def test_infinite_beta_gives_plus_minus_ge_at_infinite_d() -> None:
    """beta = inf: finite d gives ge*(d/inf) = ge*(+-0); |d| == beta == inf gives +-ge, as
    the contract says for |d| == beta (the clamp compares d with +-beta, so no inf/inf NaN)."""
    same(
        run(SL1, 1.0, [3.0, -2.0, INF, -INF, NAN], 0.0, reduction="none", beta=INF),
        [0.0, -0.0, 1.0, -1.0, NAN],
    )


# --------------------------------------------------------------------------- summation


def _loop_sum(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    acc = np.zeros(shape, values.dtype)
    lead = values.ndim - len(shape)
    for idx in itertools.product(*(range(n) for n in values.shape)):
        proj = tuple(0 if d == 1 else i for d, i in zip(shape, idx[lead:], strict=True))
        acc[proj] = acc[proj] + values[idx]
    return acc


@pytest.mark.parametrize(
    ("b", "shape"),
    [
        ((40,), ()),
        ((3, 40), (3, 1)),
        ((40, 3), (3,)),
        ((2, 5, 3, 4), (5, 1, 4)),
        ((2, 5, 3, 4), (1, 1, 3, 1)),
        ((4, 0, 3), (1, 3)),
        ((4, 0, 3), (0, 1)),
        ((3, 1, 2), (1, 2)),
    ],
)
@pytest.mark.parametrize("dtype", [F32, F64])
def test_sum_to_shape_is_the_row_major_loop_nest(b: Any, shape: Any, dtype: np.dtype) -> None:
    rng = np.random.default_rng(5)
    values = (rng.normal(size=b) * 10.0 ** rng.integers(-8, 9, size=b)).astype(dtype)
    actual = reference.sum_to_shape(values, shape)
    assert actual.shape == tuple(shape) and actual.dtype == dtype
    assert np.array_equal(bits(actual), bits(_loop_sum(values, shape)))


def test_sum_order_is_not_numpy_pairwise() -> None:
    """np.sum uses pairwise blocks; the reference must not (this input tells them apart)."""
    values = np.array([1e8] + [1.0] * 31 + [-1e8], np.float32)
    assert reference.sum_to_shape(values, ())[()] == 0.0  # sequential: every +1 is lost
    assert np.sum(values) != 0.0


def test_sum_of_negative_zeros_is_positive_zero() -> None:
    """A summed result starts at +0, so -0 terms give +0; without summing -0 stays -0."""
    summed = run(KL, 1.0, np.zeros(()), np.zeros(3), reduction="none")  # self 0-d: summed
    assert bits(summed) == bits(np.zeros(()))
    kept = run(KL, 1.0, np.zeros(3), np.zeros(3), reduction="none")
    assert np.all(np.signbit(kept))
    size_one_axis = run(KL, 1.0, np.zeros((1, 3)), np.zeros((1, 3)), reduction="none")
    assert np.all(np.signbit(size_one_axis))  # a 1 against a 1 is not broadcast


def test_empty_tensors() -> None:
    # empty B and an empty result
    assert run(KL, 1.0, np.zeros((0, 3)), np.zeros(3)).shape == (0, 3)
    assert run(SL1, np.ones((4, 1, 1)), np.zeros((0, 3)), np.zeros(3)).shape == (4, 0, 3)
    # empty B summed into a non-empty result: zeros
    same(
        run(KLT, 1.0, np.zeros((0, 3)), np.full((2, 1, 3), NAN), reduction="sum"),
        np.zeros((2, 1, 3)),
    )
    same(run(KL, 1.0, np.ones((1, 3)), np.ones((0, 3)), reduction="mean"), np.zeros((1, 3)))
    same(run(KL, 1.0, np.ones((1, 3)), np.ones((0, 3)), reduction="batchmean"), np.zeros((1, 3)))


# --------------------------------------------------------------------------- rounding once


def _exact_round(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Nearest `dtype` value to each float64 value, ties to even, by trying the neighbours of
    a first guess (the differences are exact in float64 by Sterbenz's lemma)."""
    guess = values.astype(np.float32).astype(dtype)
    raw = guess.view(np.uint16).astype(np.int64)
    out = guess.copy()
    for i, v in np.ndenumerate(values):
        if not np.isfinite(v):
            continue
        candidates = []
        for delta in (-1, 0, 1):
            cand = np.array([(raw[i] + delta) & 0xFFFF], np.uint16).view(dtype)[0]
            cv = float(cand)
            if np.isfinite(cv):
                candidates.append((abs(cv - v), int(np.array([cand]).view(np.uint16)[0]) & 1, cand))
        out[i] = min(candidates, key=lambda c: (c[0], c[1]))[2]
    return out


def test_round_to_bfloat16_from_float64_rounds_once() -> None:
    tricky = np.array([1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-40), 3 * (1 + 2**-8 + 2**-35)])
    assert list(tricky.astype(BF16).astype(np.float64)) != list(
        reference.round_to(tricky, BF16).astype(np.float64)
    )
    rng = np.random.default_rng(9)
    # values on and next to bfloat16 rounding ties, plus random ones, with large exponent range
    base = rng.normal(size=500) * 2.0 ** rng.integers(-140, 120, size=500)  # subnormals too
    grid = base.astype(np.float32).astype(BF16)
    ties = grid.astype(np.float64) + np.spacing(grid).astype(np.float64) / 2
    near_ties = ties * (1 + rng.choice([-1.0, 1.0], size=500) * 2.0**-40)
    values = np.concatenate([base, ties, near_ties, tricky])
    assert np.array_equal(bits(reference.round_to(values, BF16)), bits(_exact_round(values, BF16)))


@pytest.mark.parametrize(("source", "target"), [(F64, F16), (F32, F16), (F32, BF16), (F64, F32)])
def test_round_to_other_pairs_is_numpy_cast(source: np.dtype, target: np.dtype) -> None:
    values = (np.random.default_rng(2).normal(size=300) * 1e3).astype(source)
    assert np.array_equal(bits(reference.round_to(values, target)), bits(values.astype(target)))


def test_round_to_keeps_specials() -> None:
    values = np.array([INF, -INF, NAN, -0.0, 1e300, -1e300, 1e-300])
    out = reference.round_to(values, BF16).astype(np.float64)
    same(out, [INF, -INF, NAN, -0.0, INF, -INF, 0.0])
    assert np.signbit(out[3])


@pytest.mark.parametrize("half", [F16, BF16])
@pytest.mark.parametrize("op", cases.OP_TYPES)
def test_half_inputs_compute_in_float32_and_round_once(op: str, half: np.dtype) -> None:
    """A half-type call equals the same call on float32 copies of the inputs, rounded once."""
    for case in cases.standard_cases(op, half, seed=4, specials=0.1):
        wide = {n: a.astype(F32) for n, a in case.inputs.items()}
        expected = reference.round_to(reference.evaluate(op, wide, case.attrs), half)
        assert np.array_equal(bits(reference.evaluate(op, case.inputs, case.attrs)), bits(expected))


def test_float16_overflow_inside_is_not_an_overflow() -> None:
    """exp(12) = 162755 does not fit in float16, but 0.25*exp(12) does: computed in float32
    and rounded once the result is finite (torch, rounding per step, gives -inf)."""
    out = run(KL, 0.25, 0.0, 12.0, F16, reduction="none", log_target=1)
    expected = np.float16(-(np.float32(0.25) * np.exp(np.float32(12.0))))
    assert out.dtype == F16 and np.isfinite(out) and out == expected
    assert bits(out) == bits(np.asarray(expected))


def test_mixed_types_compute_in_the_promoted_type() -> None:
    """self bfloat16, target float64: computed in float64, result bfloat16 (self's type)."""
    go = np.array(1.0, F32)
    x = np.zeros(3, BF16)
    t = np.array([1 + 2**-8 + 2**-30, 0.1, 3.0])
    out = reference.evaluate(KL, {"grad_output": go, "self": x, "target": t}, {"reduction": "sum"})
    assert out.dtype == BF16
    assert np.array_equal(bits(out), bits(reference.round_to(-t, BF16)))
    sl1 = reference.evaluate(
        SL1, {"grad_output": np.ones(3, F16), "self": x, "target": t.astype(F16)}, {}
    )
    assert sl1.dtype == F32  # float16 with bfloat16 promotes to float32


# --------------------------------------------------------------------------- special values


@pytest.mark.parametrize(
    ("op", "attrs", "go", "x", "t", "expected"),
    [
        (KL, {}, INF, 1.0, 0.0, NAN),  # inf * 0
        (KL, {}, 1.0, NAN, 2.0, -2.0),  # self not read
        (KL, {}, 1.0, 0.0, -INF, INF),
        (KL, {}, 1.0, 0.0, NAN, NAN),
        (KL, {"log_target": 1}, 1.0, 0.0, -INF, -0.0),
        (KL, {"log_target": 1}, 1.0, 0.0, INF, -INF),
        (KL, {"log_target": 1}, 0.0, 0.0, INF, NAN),
        (KLT, {}, 1.0, 0.0, INF, INF),  # ln(inf) + 1 - x
        (KLT, {}, 1.0, INF, 1.0, -INF),
        (KLT, {}, 1.0, INF, INF, NAN),
        (KLT, {}, INF, 0.0, 1.0, INF),
        (KLT, {}, 1.0, 0.0, -INF, NAN),
        (KLT, {}, 1.0, 0.0, NAN, NAN),
        (KLT, {"log_target": 1}, 1.0, 0.0, -INF, NAN),  # exp(-inf) * -inf
        (KLT, {"log_target": 1}, 1.0, 0.0, INF, INF),
        (KLT, {"log_target": 1}, 1.0, INF, 0.0, -INF),
        (SL1, {"beta": 1.0}, 1.0, INF, INF, NAN),  # d = NaN
        (SL1, {"beta": 1.0}, 1.0, INF, 0.0, 1.0),
        (SL1, {"beta": 1.0}, 0.0, INF, 0.0, 0.0),
        (SL1, {"beta": 1.0}, INF, 0.0, 0.0, NAN),  # inf * 0
        (SL1, {"beta": 0.0}, 1.0, INF, INF, 0.0),  # sgn(NaN) = 0
        (SL1, {"beta": 0.0}, NAN, 1.0, 0.0, NAN),
        (SL1, {"beta": 0.0}, INF, 1.0, 1.0, NAN),  # inf * sgn(0)
    ],
)
@pytest.mark.parametrize("dtype", [F64, F32, BF16])
def test_special_values(
    op: str, attrs: dict[str, Any], go: float, x: float, t: float, expected: float, dtype: np.dtype
) -> None:
    out = run(op, go, x, t, dtype, reduction="none", **attrs)
    same(out, expected)
    assert np.signbit(out) == np.signbit(expected) or np.isnan(expected)


def test_minus_zero_kept_where_nothing_is_summed() -> None:
    out = run(KL, [1.0, -1.0], [0.0, 0.0], [0.0, 0.0], reduction="none")
    assert list(np.signbit(out)) == [True, False]  # -(1*0) = -0, -(-1*0) = +0


# --------------------------------------------------------------------------- array contract


@pytest.mark.parametrize("rank", range(9))
@pytest.mark.parametrize("op", cases.OP_TYPES)
def test_ranks_0_to_8(op: str, rank: int) -> None:
    shape = (2, 1, 3, 1, 2, 1, 2, 1)[:rank]
    sizes = (2, 2, 3, 3, 2, 2, 2, 2)
    target_shape = tuple(sizes[i] if d == 1 else 1 for i, d in enumerate(shape))  # both ways
    if cases.fits(op, "target"):  # the binary cross entropies: target fits into self
        target_shape = shape[1:]
    x = np.linspace(-1, 1, math.prod(shape)).reshape(shape)
    t = np.linspace(0.1, 2, math.prod(target_shape)).reshape(target_shape)
    out = reference.evaluate(
        op, {"grad_output": np.ones(()), "self": x, "target": t}, {"reduction": "sum"}
    )
    b = np.broadcast_shapes(shape, target_shape)
    expected_shape = {KL: shape, KLT: target_shape, BCE: shape, BCEL: shape}.get(op, b)
    assert out.shape == expected_shape
    assert np.isfinite(out).all()


def test_inputs_are_not_mutated_and_may_be_read_only_views() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(size=(4, 6)).astype(np.float32)
    x = base.T[::2]  # a non-contiguous view
    t = np.abs(rng.normal(size=(3, 4))).astype(np.float16)
    go = np.float32(0.5) * np.ones((3, 1), np.float32)
    for a in (x, t, go):
        a.flags.writeable = False
    snapshot = [a.copy() for a in (go, x, t)]
    inputs = {"grad_output": go, "self": x, "target": t}
    for op in cases.OP_TYPES:
        out = reference.evaluate(op, inputs, {"reduction": "none"})
        assert out.flags.writeable and out.flags.c_contiguous
        assert not any(np.shares_memory(out, a) for a in (base, t, go))
        expected = reference.evaluate(
            op, {n: np.ascontiguousarray(a) for n, a in inputs.items()}, {"reduction": "none"}
        )
        assert np.array_equal(bits(out), bits(expected))
    for a, s in zip((go, x, t), snapshot, strict=True):
        assert np.array_equal(bits(a), bits(s))


def test_no_floating_point_warnings_escape() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for op in cases.OP_TYPES:
            for dtype in (F16, BF16, F32, F64):
                for case in cases.standard_cases(op, dtype, seed=8, specials=0.4):
                    reference.evaluate(op, case.inputs, case.attrs)
        huge = np.array([1e30, -1e30], F32)
        reference.evaluate(
            KLT,
            {"grad_output": huge, "self": huge, "target": np.array([100.0, 0.0], F32)},
            {"log_target": 1},
        )
        reference.evaluate(
            SL1, {"grad_output": huge, "self": huge, "target": -huge}, {"beta": 1e39}
        )


def test_scalar_results_are_0d_arrays() -> None:
    out = run(KL, 1.0, 0.0, 2.0, reduction="sum")
    assert isinstance(out, np.ndarray) and out.shape == () and out == -2.0


def test_python_scalars_and_lists_are_accepted() -> None:
    out = reference.evaluate(
        SL1, {"grad_output": 1.0, "self": [0.0, 2.0], "target": 0.0}, {"reduction": "sum"}
    )
    assert out.dtype == F64
    same(out, [0.0, 1.0])


def test_evaluate_checked() -> None:
    case = cases.make_case(KLT, {"reduction": "mean"}, (4, 1), (4, 3), (), np.float32, seed=3)
    expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
    same_call = reference.evaluate_checked(case.checked, case.inputs)
    assert np.array_equal(bits(same_call), bits(expected))
    # a signature (symbolic shapes) validated once, evaluated for concrete arrays
    signature = spec.validate(KLT, _infos(F32, (), ("n", 1), ("n", 3)), {"reduction": "mean"})
    assert np.array_equal(bits(reference.evaluate_checked(signature, case.inputs)), bits(expected))
    bigger = {**case.inputs, "target": np.ones((5, 3), np.float32)}
    with pytest.raises(BroadcastError):
        reference.evaluate_checked(signature, bigger)


def test_symbolic_shapes_cannot_be_evaluated_without_arrays() -> None:
    signature = spec.validate(KL, _infos(F32, (), ("n", 3), ("n", 3)), {"reduction": "mean"})
    with pytest.raises(ValueError, match="static shapes"):
        reference.scale_value(signature)


def _infos(dtype: Any, go: Any, x: Any, t: Any) -> dict[str, spec.TensorInfo]:
    return {n: spec.TensorInfo(dtype, s) for n, s in zip(spec.INPUT_NAMES, (go, x, t), strict=True)}
