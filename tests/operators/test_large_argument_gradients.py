"""Gradients whose sigmoid meets large arguments, against PyTorch 2.13's eager autograd, on
every path: reference.py, compile_model's standard-ONNX functions (ONNX Runtime without the
library), the native kernels and IREE (issue 44, items 6 and 9).

SoftMarginLossBackward is -t*sigmoid(-t*x)*norm*g: PyTorch's decomposition writes it as
t*g*(sigmoid(t*x) - 1), which cancels (off by 9 % in float32 near t*x = 16, 0 past 17, wrong
from the 8th digit in float64); its eager kernel does not. The samples are PyTorch's own
OpInfo samples (sample_inputs_loss: make_tensor in [-9, 9]) and a grid of large t*x, in
every float type, compared element by element in ulps of each value, not of the largest
one (a tolerance relative to the largest value would hide the cancellation).
BinaryCrossEntropyWithLogitsBackward at |x| = 90, 1e4 and inf, where exp(-x) overflows, and
KlDivTargetBackward (log_target 1) near exp's overflow, where the order of its operations
decides whether the result overflows (item 2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch
from torch.testing import make_tensor

from lossgrad_compiler import reference, spec
from lossgrad_compiler.evaluation.ort import session
from lossgrad_compiler.runtime.ort_io import run_session
from tests.helpers import torch_oracle
from tests.helpers.cases import Case
from tests.helpers.tolerances import ORACLE, assert_matches, ulp
from tests.ort.support import case_model, native_library, native_session, run

SOFT = spec.SOFT_MARGIN_LOSS_BACKWARD.name
BCE_LOGITS = spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name
KL_TARGET = spec.KL_DIV_TARGET_BACKWARD.name
F16, BF16, F32, F64 = (
    np.dtype(t) for t in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)
)
DTYPES = [F16, BF16, F32, F64]
TORCH = {F16: torch.float16, BF16: torch.bfloat16, F32: torch.float32, F64: torch.float64}
Call = tuple[str, dict[str, np.ndarray], dict[str, Any]]


def _numpy(a: torch.Tensor, dtype: np.dtype) -> np.ndarray:
    return a.detach().to(torch.float64).numpy().astype(dtype)


def opinfo_samples(dtype: np.dtype) -> list[Call]:
    """PyTorch's OpInfo samples of nn.functional.soft_margin_loss (sample_inputs_loss, S = 5),
    drawn as its make_tensor draws them, with a grad_output of the loss's shape."""
    shapes = [((), "mean"), ((5,), "mean"), ((5,), "sum"), ((5,), "none")]
    shapes += [((5, 5), "mean"), ((5, 5, 5), "mean")]
    samples: list[Call] = []
    with torch.random.fork_rng():
        torch.manual_seed(1)
        for shape, reduction in shapes:
            x, t = (make_tensor(shape, dtype=TORCH[dtype], device="cpu") for _ in range(2))
            go_shape = shape if reduction == "none" else ()
            go = make_tensor(go_shape, dtype=TORCH[dtype], device="cpu", low=-3, high=3)
            inputs = {"grad_output": go, "self": x, "target": t}
            arrays = {n: _numpy(a, dtype) for n, a in inputs.items()}
            samples.append((SOFT, arrays, {"reduction": reduction}))
    return samples


# t*x from where the decomposition starts to cancel to far past where it gives 0, on both
# sides; PyTorch's own kernel gives inf/inf = NaN below t*x = -88.7 in float32 (-709 in
# float64), which docs/operators.md lists as a difference: the grid stays above it
PRODUCTS = [10.0, 14.0, 15.5, 16.0, 16.5, 17.0, 17.5, 18.0, 20.0, 25.0, 40.0, 60.0, 80.0]
PRODUCTS += [-p for p in PRODUCTS] + [0.0, 1.0, -1.0]
TARGETS = [1.0, -1.0, 0.5, 3.0]


def large_products(dtype: np.dtype) -> list[Call]:
    """Every t*x of PRODUCTS for each target, reductions none (grad_output per element) and
    mean."""
    t = np.array([tv for tv in TARGETS for _ in PRODUCTS], np.float64)
    x = np.array([p / tv for tv in TARGETS for p in PRODUCTS], np.float64)
    rng = np.random.default_rng(44)
    go = rng.uniform(-3, 3, t.shape)
    inputs = {"grad_output": go, "self": x, "target": t}
    none = {n: a.astype(dtype) for n, a in inputs.items()}
    mean = {**none, "grad_output": np.array(1.5, dtype)}
    return [(SOFT, none, {"reduction": "none"}), (SOFT, mean, {"reduction": "mean"})]


def soft_margin_calls(dtype: np.dtype) -> list[Call]:
    return opinfo_samples(dtype) + large_products(dtype)


def bce_logits_calls(dtype: np.dtype) -> list[Call]:
    """x at +-90, +-1e4 and +-inf (and small values beside them), target in [0, 1], with and
    without weight and pos_weight, for each reduction."""
    x = np.array([90.0, -90.0, 1e4, -1e4, np.inf, -np.inf, 0.5, -3.0])
    t = np.array([0.0, 1.0, 0.25, 0.75, 0.5, 0.5, 1.0, 0.0])
    rng = np.random.default_rng(9)
    go = rng.uniform(-2, 2, x.shape)
    w, p = rng.uniform(0.5, 2, x.shape), rng.uniform(0.5, 3, x.shape)
    calls: list[Call] = []
    for reduction in ("none", "mean", "sum"):
        g = go if reduction == "none" else np.array(0.75)
        for extra in ({}, {"weight": w}, {"weight": w, "pos_weight": p}):
            arrays = {"grad_output": g, "self": x, "target": t, **extra}
            inputs = {n: a.astype(dtype) for n, a in arrays.items()}
            calls.append((BCE_LOGITS, inputs, {"reduction": reduction}))
    return calls


def assert_soft_margin_accurate(got: np.ndarray, call: Call, context: str) -> None:
    """Element by element within 4 ulp of the compute type of PyTorch's eager value (and 1
    ulp of a half result type, which both round to once), 0 only where PyTorch gives 0."""
    op_type, inputs, attrs = call
    expected = torch_oracle.oracle(op_type, inputs, attrs).astype(np.float64)
    checked = spec.validate(
        op_type, {n: spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}, attrs
    )
    compute, result = checked.compute.dtype, checked.result_type.dtype
    wide = np.asarray(got).astype(np.float64)
    allowed = 4 * ulp(expected, compute)
    if result.itemsize < compute.itemsize:
        allowed = allowed + ulp(expected, result)
    close = np.abs(wide - expected) <= allowed
    bad = ~close | (np.isnan(wide) != np.isnan(expected))
    assert not bad.any(), (
        f"{context}: {op_type} {attrs} at t*x = "
        f"{(inputs['target'].astype(np.float64) * inputs['self'].astype(np.float64))[bad]}: "
        f"got {wide[bad]}, PyTorch {expected[bad]}"
    )


# --------------------------------------------------------------------------- the paths


def _reference(calls: list[Call]) -> list[np.ndarray]:
    return [reference.evaluate(op, inputs, attrs) for op, inputs, attrs in calls]


def _models(calls: list[Call]) -> list[Any]:
    return [case_model(Case(op, inputs, attrs)) for op, inputs, attrs in calls]


def _onnx_functions(calls: list[Call]) -> list[np.ndarray]:
    """compile_model's standard-ONNX function bodies: ONNX Runtime without the library."""
    results = []
    for (_op, inputs, _attrs), model in zip(calls, _models(calls), strict=True):
        feeds = {i.name: a for i, a in zip(model.graph.input, inputs.values(), strict=True)}
        results.append(run_session(session(model, native=False), feeds)[0])
    return results


def _native(calls: list[Call]) -> list[np.ndarray]:
    native_library()
    return [
        run(native_session(model), inputs)
        for (_op, inputs, _attrs), model in zip(calls, _models(calls), strict=True)
    ]


def _iree(calls: list[Call]) -> list[np.ndarray]:
    pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
    from lossgrad_compiler.calls import Call as IreeCall
    from lossgrad_compiler.evaluation import iree

    return iree.evaluate_calls([IreeCall(op, i, a) for op, i, a in calls])


PATHS: dict[str, Callable[[list[Call]], list[np.ndarray]]] = {
    "reference": _reference,
    "onnx": _onnx_functions,
    "native": _native,
    "iree": _iree,
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("path", PATHS)
def test_soft_margin_matches_pytorch_eager_at_large_products(path: str, dtype: np.dtype) -> None:
    calls = soft_margin_calls(dtype)
    for call, got in zip(calls, PATHS[path](calls), strict=True):
        assert_soft_margin_accurate(got, call, f"{path}, {dtype.name}")


@pytest.mark.parametrize("path", PATHS)
def test_soft_margin_huge_target_follows_pytorch(path: str) -> None:
    """t = 3e38, x = 1, g = -3 in float32: PyTorch's kernel gives +0 (t*exp(-t*x) = 0 before
    g enters); the decomposition's (t*g)*(sigmoid(t*x) - 1) gives inf*0 = NaN."""
    f32 = np.float32
    inputs = {"grad_output": np.array([-3.0], f32), "self": np.array([1.0], f32)}
    inputs["target"] = np.array([3e38], f32)
    call = (SOFT, inputs, {"reduction": "none"})
    [got] = PATHS[path]([call])
    expected = torch_oracle.oracle(*call)
    assert expected.tolist() == [0.0] and not np.signbit(expected).any()
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("path", PATHS)
def test_kl_target_log_target_computes_in_pytorch_order(path: str) -> None:
    """KlDivTargetBackward with log_target 1 is (g*(t - x))*exp(t) + g*exp(t), PyTorch's
    order (issue 44): at t = 88.72, x = 0.5, g = 1e-5 in float32 it stays finite (3.0e35),
    where g*(exp(t)*((t + 1) - x)) overflows; with g = +-inf and t == x it is NaN (inf*0),
    as PyTorch gives, where that grouping gives +-inf."""
    f32 = np.float32
    inputs = {
        "grad_output": np.array([1e-5, np.inf, -np.inf], f32),
        "self": np.array([0.5, 0.25, 0.25], f32),
        "target": np.array([88.72, 0.25, 0.25], f32),
    }
    call = (KL_TARGET, inputs, {"reduction": "none", "log_target": 1})
    [got] = PATHS[path]([call])
    expected = torch_oracle.oracle(*call)
    assert np.isfinite(expected[0]) and np.isnan(expected[1:]).all()
    assert np.isnan(got[1:]).all(), got
    np.testing.assert_allclose(got[0], expected[0], rtol=4 * np.finfo(f32).eps)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("path", PATHS)
def test_bce_with_logits_matches_pytorch_at_large_logits(path: str, dtype: np.dtype) -> None:
    calls = bce_logits_calls(dtype)
    for (op, inputs, attrs), got in zip(calls, PATHS[path](calls), strict=True):
        expected = torch_oracle.oracle(op, inputs, attrs)
        assert_matches(got, expected, op, inputs, attrs, tolerance=ORACLE, context=path)
        assert np.isfinite(got.astype(np.float64)).all(), (path, attrs, got)
