"""CrossEntropyLossGrad in the reference, against PyTorch 2.13's eager autograd of
F.cross_entropy with respect to the logits (the operator takes their log_softmax), and every
error path of its spec.

Without label smoothing PyTorch's row sum adds one non-zero term, so the closed form is the
same value: float16 and bfloat16 (whose exp runs in float32 and rounds to the half type) are
bit for bit, float32 and float64 differ only by exp's last ulp between libms. Two sums differ
by their order and precision, and are compared to the ORACLE tolerance over their terms
(in the half type's own epsilon where PyTorch keeps the terms in it): with label smoothing
PyTorch sums C rounded terms per row, while the operator adds a + s*W; and a weighted mean's
D, which PyTorch's forward adds in the input's type by a cascade of partial sums, the
operator adds in order in float32 (float64) and rounds once."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossgrad_compiler import errors, reference, spec
from tests.helpers import torch_oracle
from tests.helpers.class_cases import class_cases, log_softmax, make_class_case
from tests.helpers.magnitude import term_magnitude
from tests.helpers.tolerances import assert_close, bits

CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
DTYPES = [np.dtype(t.numpy) for t in spec.FLOAT_TYPES]
HALVES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def assert_matches_autograd(
    inputs: dict[str, np.ndarray], attrs: dict[str, Any], *, exact: bool = True
) -> None:
    """Bit for bit where the module doc says so (`exact`), else within ORACLE."""
    fed, want = torch_oracle.cross_entropy_autograd(inputs, attrs)
    got = reference.evaluate(CE, fed, attrs)
    dtype = got.dtype
    smoothed = float(attrs.get("label_smoothing", 0.0)) > 0
    weighted_mean = "weight" in inputs and attrs.get("reduction", "mean") == "mean"
    if exact and dtype in HALVES and not smoothed and not weighted_mean:
        assert (bits(got) == bits(want)).all(), f"{attrs}: {got} != {want}"
        return
    magnitude, n_terms = term_magnitude(CE, fed, attrs)
    compute = dtype if dtype in HALVES else np.dtype(spec.float_type(dtype).numpy)
    assert_close(
        got, want, compute=compute, magnitude=magnitude, n_terms=n_terms, context=str(attrs)
    )


CASES = [c for dtype in DTYPES for c in class_cases(CE, dtype)]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_reference_is_pytorch_autograd(case: Any) -> None:
    """Every shape (a batch, one row, empty), reduction, ignore_index, weight, smoothing."""
    assert_matches_autograd(case.inputs, case.attrs)


@pytest.mark.parametrize("dtype", HALVES, ids=[d.name for d in HALVES])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_half_types_without_smoothing_are_autograd_bit_for_bit(
    dtype: np.dtype, reduction: str
) -> None:
    case = make_class_case(
        CE, (64, 37), dtype, reduction=reduction, ignore_index=3, weighted=reduction != "mean",
        seed=11,
    )  # fmt: skip
    fed, want = torch_oracle.cross_entropy_autograd(case.inputs, case.attrs)
    assert (bits(reference.evaluate(CE, fed, case.attrs)) == bits(want)).all()


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(0, 6),
    classes=st.integers(1, 40),
    reduction=st.sampled_from(["none", "mean", "sum"]),
    ignore_index=st.integers(-3, 7),
    weighted=st.booleans(),
    label_smoothing=st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0)),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
)
def test_random_calls_match_autograd(
    batch: int,
    classes: int,
    reduction: str,
    ignore_index: int,
    weighted: bool,
    label_smoothing: float,
    dtype: np.dtype,
    seed: int,
) -> None:
    """Hypothesis over shapes, ignore_index (inside, below and above [0, C)), weights,
    label smoothing (as float32, what an ONNX attribute holds) and types; targets drawn from
    [0, C) and ignore_index. Within ORACLE: two libms' float32 exp may round a half result
    to neighbouring values on some random input (the fixed cases above hold the bits)."""
    label_smoothing = float(np.float32(label_smoothing))
    rng = np.random.default_rng(seed)
    targets = rng.choice([*range(classes), ignore_index], size=batch)
    case = make_class_case(
        CE, (batch, classes), dtype, reduction=reduction, ignore_index=ignore_index,
        weighted=weighted, seed=seed, targets=targets, label_smoothing=label_smoothing,
    )  # fmt: skip
    assert_matches_autograd(case.inputs, case.attrs, exact=False)


def _call(
    x: np.ndarray, t: list[int], g: Any, **attrs: Any
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    dtype = x.dtype
    inputs = {"grad_output": np.asarray(g, dtype), "self": x, "target": np.array(t)}
    return inputs, {"ignore_index": -100, **attrs}


@pytest.mark.parametrize("label_smoothing", [0.0, 0.25])
def test_every_row_ignored_with_mean_gives_zeros(label_smoothing: float) -> None:
    """D = 0, but no row reads 1/0: the smoothing scale is masked before the division."""
    x = log_softmax(np.random.default_rng(1).standard_normal((4, 3)), np.float32)
    inputs, attrs = _call(x, [2, 2, 2, 2], 1.0, ignore_index=2, label_smoothing=label_smoothing)
    got = reference.evaluate(CE, inputs, attrs)
    assert (bits(got) == bits(np.zeros((4, 3), np.float32))).all()
    assert_matches_autograd(inputs, attrs)


def test_zero_weights_on_kept_rows_make_those_rows_nan() -> None:
    x = log_softmax(np.random.default_rng(2).standard_normal((3, 4)), np.float32)
    inputs, attrs = _call(x, [0, 1, 0], 1.0, reduction="mean")
    inputs["weight"] = np.array([0.0, 0.0, 1.0, 1.0], np.float32)
    got = reference.evaluate(CE, inputs, attrs)
    assert np.isnan(got).all()
    assert_matches_autograd(inputs, attrs)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.25])
def test_a_nan_log_prob_stays_in_its_element(label_smoothing: float) -> None:
    x = log_softmax(np.random.default_rng(3).standard_normal((3, 4)), np.float32)
    x[1, 2] = np.nan
    inputs, attrs = _call(x, [0, 1, 3], [1.0, 2.0, -1.0], reduction="none",
                          label_smoothing=label_smoothing)  # fmt: skip
    got = reference.evaluate(CE, inputs, attrs)
    assert np.isnan(got[1, 2]) and np.isnan(got).sum() == 1
    assert_matches_autograd(inputs, attrs)


@pytest.mark.parametrize("g", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.25, 1.0])
def test_a_non_finite_grad_output_spreads_over_its_row_as_autograd(
    g: float, label_smoothing: float
) -> None:
    """NaN at the target (inf - inf), inf elsewhere (NaN where p = 0); ls = 1 multiplies the
    nll term by 0, so an infinite g makes it NaN and with it the whole row."""
    x = log_softmax(np.random.default_rng(4).standard_normal((2, 5)), np.float32)
    x[0, 4] = -np.inf  # p = 0
    inputs, attrs = _call(x, [1, 3], [g, 1.0], reduction="none", label_smoothing=label_smoothing)
    got = reference.evaluate(CE, inputs, attrs)
    assert np.isfinite(got[1]).all() and not np.isfinite(got[0]).any()
    if label_smoothing == 1.0 and not math.isnan(g):
        assert np.isnan(got[0]).all()
    assert_matches_autograd(inputs, attrs)


def test_one_class_has_a_zero_gradient() -> None:
    inputs, attrs = _call(np.zeros((3, 1), np.float32), [0, 0, 0], 1.0, label_smoothing=0.25)
    assert not reference.evaluate(CE, inputs, attrs).any()
    assert_matches_autograd(inputs, attrs)


def test_int32_targets_compute_what_int64_targets_do() -> None:
    a = make_class_case(CE, (5, 4), np.float32, weighted=True, seed=9, label_smoothing=0.25)
    b = make_class_case(
        CE, (5, 4), np.float32, weighted=True, seed=9, label_smoothing=0.25,
        target_dtype=np.int32,
    )  # fmt: skip
    assert (bits(reference.evaluate(*a.call)) == bits(reference.evaluate(*b.call))).all()


def test_label_smoothing_spreads_the_target_mass() -> None:
    """With ls the gradient at a class other than the target gains -(ls/C)*w_j*s: dropping
    the smoothing term changes every element."""
    case = make_class_case(CE, (4, 6), np.float64, weighted=True, label_smoothing=0.25, seed=5)
    plain = {**case.attrs, "label_smoothing": 0.0}
    smoothed = reference.evaluate(*case.call)
    assert (smoothed != reference.evaluate(CE, case.inputs, plain)).all()


# --------------------------------------------------------------------------- errors


def _valid() -> dict[str, np.ndarray]:
    return {
        "grad_output": np.zeros((), np.float32),
        "self": np.zeros((4, 5), np.float32),
        "target": np.zeros(4, np.int64),
        "weight": np.ones(5, np.float32),
    }


ERRORS = [
    ("ls-above", {}, {"label_smoothing": 1.5}, errors.AttributeValueError,
     "attribute 'label_smoothing': must be a float in [0, 1] (not NaN), got 1.5"),
    ("ls-below", {}, {"label_smoothing": -0.25}, errors.AttributeValueError,
     "attribute 'label_smoothing': must be a float in [0, 1] (not NaN), got -0.25"),
    ("ls-nan", {}, {"label_smoothing": math.nan}, errors.AttributeValueError,
     "attribute 'label_smoothing': must be a float in [0, 1] (not NaN), got nan"),
    ("ls-type", {}, {"label_smoothing": "0.1"}, errors.AttributeValueError,
     "attribute 'label_smoothing': must be a float, got str"),
    ("self-rank-1", {"self": np.zeros(5, np.float32)}, {}, errors.ClassShapeError,
     "self: shape [5] must be rank 2 for self [5]"),
    ("self-rank-4", {"self": np.zeros((4, 5, 1, 1), np.float32)}, {}, errors.ClassShapeError,
     "self: shape [4, 5, 1, 1] must be rank 2 for self [4, 5, 1, 1]"),
    ("no-classes", {"self": np.zeros((4, 0), np.float32), "weight": np.ones(0, np.float32)}, {},
     errors.ClassShapeError, "self: shape [4, 0] must be C >= 1 along dimension 1"),
    ("target-shape", {"target": np.zeros(3, np.int64)}, {}, errors.ClassShapeError,
     "target: shape [3] must be [4] (self without dimension 1) for self [4, 5]"),
    ("weight-shape", {"weight": np.ones(4, np.float32)}, {}, errors.ClassShapeError,
     "weight: shape [4] must be [5] (one per class) for self [4, 5]"),
    ("grad-none", {}, {"reduction": "none"}, errors.ClassShapeError,
     "grad_output: shape [] must be [4] (target's, for reduction none) for self [4, 5]"),
    ("weight-type", {"weight": np.ones(5, np.float16)}, {}, errors.ElementTypeError,
     "weight: element type must be self's (float32), got float16"),
    ("target-float", {"target": np.zeros(4, np.float32)}, {}, errors.ElementTypeError,
     "target: element type must be one of int64, int32, got float32"),
    ("total-weight", {"total_weight": np.ones((), np.float32)}, {}, errors.InvalidArgumentError,
     "total_weight"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "attrs", "error", "message"),
    [e[1:] for e in ERRORS],
    ids=[e[0] for e in ERRORS],
)
def test_every_error_path_names_the_rule_and_code(
    changes: dict[str, Any], attrs: dict[str, Any], error: type[Exception], message: str
) -> None:
    inputs = {**_valid(), **changes}
    with pytest.raises(error) as info:
        reference.evaluate(CE, inputs, attrs)
    assert str(info.value).startswith(f"{CE}: ") and message in str(info.value)
    assert "[aclnn 161002 " in str(info.value)


def test_a_target_outside_the_classes_is_aclnn_161002() -> None:
    inputs = {**_valid(), "target": np.array([0, 5, -1, 2])}
    with pytest.raises(errors.TargetValueError, match=r"2 value\(s\) outside \[0, 5\)"):
        reference.evaluate(CE, inputs, {})
