"""L1LossBackward's sign against PyTorch 2.13's eager autograd of `F.l1_loss`, on every path.

PyTorch's gradient is (g/n)*sgn(x - t) with sgn(0) = sgn(NaN) = 0: a zero difference, a NaN
in self or target and inf - inf all give 0, a difference that overflows keeps its sign, and
a non-finite g still gives NaN where the sign is 0 (0*inf). The cases hold each of those,
in every float type and for each reduction, and are compared bit for bit with torch run in
the inputs' own type (not widened first): for the half types PyTorch divides in float32 and
rounds once, which is the operator's g/n rounded once, and the product by -1, 0 or 1 is exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lossgrad_compiler import spec
from tests.operators.test_large_argument_gradients import DTYPES, PATHS, TORCH, Call

L1 = spec.L1_LOSS_BACKWARD.name


def _pairs(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(x, t) with every kind of difference; `big` is the type's largest finite value, so
    that big - (-big) overflows."""
    big = float(ml_dtypes.finfo(dtype).max)
    tiny = float(np.array(np.finfo(np.float16).smallest_subnormal, dtype))
    pairs = [
        (1.0, 0.0), (-1.0, 0.0), (0.0, 0.0), (2.5, 2.5), (-0.0, 0.0),  # signs and zeros
        (math.nan, 0.0), (0.0, math.nan), (math.nan, math.nan),  # NaN in either
        (math.inf, math.inf), (-math.inf, -math.inf),  # inf - inf is NaN
        (math.inf, 0.0), (-math.inf, 5.0), (3.0, math.inf),  # infinite differences
        (big, -big), (-big, big),  # x - t overflows
        (tiny, 0.0), (0.0, tiny),  # the smallest float16 subnormal
    ]  # fmt: skip
    x = np.array([p[0] for p in pairs], np.float64).astype(dtype)
    t = np.array([p[1] for p in pairs], np.float64).astype(dtype)
    return x, t


def l1_calls(dtype: np.dtype) -> list[Call]:
    """Every pair under none (a grad_output per element, +-inf at a zero and a nonzero sign)
    and under mean and sum (a 0-d grad_output, finite and infinite)."""
    x, t = _pairs(dtype)
    rng = np.random.default_rng(46)
    go = rng.uniform(-3, 3, x.shape)
    go[2], go[0] = math.inf, -math.inf  # 0*inf = NaN at a zero difference; -inf*1
    calls: list[Call] = [
        (L1, {"grad_output": go.astype(dtype), "self": x, "target": t}, {"reduction": "none"})
    ]
    for reduction in ("mean", "sum"):
        for g in (1.5, math.inf):
            inputs = {"grad_output": np.array(g, dtype), "self": x, "target": t}
            calls.append((L1, inputs, {"reduction": reduction}))
    return calls


def torch_eager(call: Call) -> np.ndarray:
    """autograd of F.l1_loss in the inputs' own type."""
    _op, inputs, attrs = call
    dtype = inputs["self"].dtype
    as_torch = {
        n: torch.from_numpy(a.astype(np.float64)).to(TORCH[dtype]) for n, a in inputs.items()
    }
    x = as_torch["self"].requires_grad_(True)
    loss = F.l1_loss(x, as_torch["target"], reduction=attrs["reduction"])
    (grad,) = torch.autograd.grad(loss, x, as_torch["grad_output"])
    return grad.to(torch.float64).numpy().astype(dtype)


def assert_same_bits(got: np.ndarray, expected: np.ndarray, context: str) -> None:
    """Equal values (NaN where NaN, the sign of a zero included)."""
    wide, want = np.asarray(got).astype(np.float64), expected.astype(np.float64)
    same = (wide == want) & (np.signbit(wide) == np.signbit(want))
    same |= np.isnan(wide) & np.isnan(want)
    assert same.all(), (
        f"{context}: got {wide[~same]}, PyTorch {want[~same]} at {np.flatnonzero(~same)}"
    )


def _ascendc(calls: list[Call]) -> list[np.ndarray]:
    from lossgrad_compiler.evaluation.ascendc import Call as AscendCCall
    from lossgrad_compiler.evaluation.ascendc import emulate_calls

    return emulate_calls([AscendCCall(op, i, a) for op, i, a in calls])


def _ascendnpu_ir(calls: list[Call]) -> list[np.ndarray]:
    pytest.importorskip("ascendnpuir", reason="needs AscendNPU IR: pip install -e '.[ascend]'")
    pytest.importorskip("llvmlite", reason="needs llvmlite: pip install -e '.[ascend]'")
    from lossgrad_compiler.calls import Call as NpuCall
    from lossgrad_compiler.evaluation import ascendnpu_ir

    return ascendnpu_ir.evaluate_calls([NpuCall(op, i, a) for op, i, a in calls])


ALL_PATHS: dict[str, Callable[[list[Call]], list[np.ndarray]]] = {
    **PATHS,
    "ascendc": _ascendc,
    "ascendnpu_ir": _ascendnpu_ir,
}


FLOAT64_REFUSED = ("ascendc", "ascendnpu_ir")
"""Ascend's vector units have no float64 arithmetic (UnsupportedByBackendError, tested in
tests/ascendc and tests/hfusion)."""
RUNS = [
    pytest.param(path, dtype, id=f"{path}-{dtype.name}")
    for path in ALL_PATHS
    for dtype in DTYPES
    if not (path in FLOAT64_REFUSED and dtype == np.float64)
]


@pytest.mark.parametrize(("path", "dtype"), RUNS)
def test_l1_sign_matches_pytorch_eager_bit_for_bit(path: str, dtype: np.dtype) -> None:
    calls = l1_calls(dtype)
    for call, got in zip(calls, ALL_PATHS[path](calls), strict=True):
        _op, inputs, attrs = call
        context = f"{path}, {dtype.name}, {attrs['reduction']}, g = {inputs['grad_output'].flat[0]}"
        assert_same_bits(got, torch_eager(call), context)


def test_the_cases_hold_every_kind_of_sign() -> None:
    """The zeros of the gradient come from a zero and from a NaN difference, the NaNs from
    an infinite grad_output at a zero sign, and x - t overflows to +-inf yet keeps its sign."""
    x, t = _pairs(np.dtype(np.float32))
    with np.errstate(all="ignore"):
        d = x - t
    assert np.isnan(d).sum() == 5 and (d == 0).sum() == 3 and np.isinf(d).sum() == 5
    expected = torch_eager(l1_calls(np.dtype(np.float32))[0])
    assert np.isnan(expected[2]) and expected[0] == -np.inf
    assert (expected[5:10] == 0).all() and (expected[13:15] != 0).all()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_a_broadcast_target_gives_aclnns_broadcast_shape(reduction: str) -> None:
    """target [C] against self [N, 1]: the result has broadcast(self, target)'s shape (aclnn's
    gradInput); summed over the broadcast axis it is PyTorch's gradient of self."""
    from lossgrad_compiler import reference

    rng = np.random.default_rng(7)
    x = rng.normal(size=(4, 1)).astype(np.float32)
    t = rng.normal(size=(5,)).astype(np.float32)
    go = (
        np.array(0.75, np.float32)
        if reduction != "none"
        else rng.normal(size=(4, 5)).astype(np.float32)
    )
    got = reference.evaluate(
        L1, {"grad_output": go, "self": x, "target": t}, {"reduction": reduction}
    )
    assert got.shape == (4, 5)
    xt = torch.from_numpy(x).requires_grad_(True)
    loss = F.l1_loss(xt.expand(4, 5), torch.from_numpy(t).expand(4, 5), reduction=reduction)
    (grad,) = torch.autograd.grad(loss, xt, torch.from_numpy(go))
    np.testing.assert_allclose(got.sum(axis=1, keepdims=True), grad.numpy(), rtol=1e-6)
