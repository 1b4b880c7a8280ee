"""NLLLossBackward and NLLLoss2dBackward in the reference, against PyTorch 2.13's eager
autograd of F.nll_loss, bit for bit, in each float type's own precision (its kernels compute
a half type in that type, and so does the contract); and every error path of their spec."""

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
from tests.helpers.class_cases import (
    CLASS_OP_TYPES,
    all_class_cases,
    make_class_case,
    out_of_range_case,
)
from tests.helpers.tolerances import bits

NLL = spec.NLL_LOSS_BACKWARD.name
NLL2D = spec.NLL_LOSS_2D_BACKWARD.name
DTYPES = [np.dtype(t.numpy) for t in spec.FLOAT_TYPES]


def _bits(a: np.ndarray) -> bytes:
    """Bit patterns, every NaN as one (its sign and payload are not part of the contract)."""
    return bits(a).tobytes()


def assert_matches_autograd(op_type: str, inputs: dict[str, np.ndarray], attrs: Any) -> None:
    fed, want = torch_oracle.with_torch_total_weight(op_type, inputs, attrs)
    got = reference.evaluate(op_type, fed, attrs)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert _bits(got) == _bits(want), f"{op_type} {attrs}: {got} != {want}"


NLL_OP_TYPES = (NLL, NLL2D)
CASES = [c for c in all_class_cases() if c.op_type in NLL_OP_TYPES]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_reference_is_pytorch_autograd_bit_for_bit(case: Any) -> None:
    """Every shape (batch, [C], one row, empty), reduction, ignore_index, weight, float
    type and both target types."""
    assert_matches_autograd(case.op_type, case.inputs, case.attrs)


@settings(max_examples=60, deadline=None)
@given(
    op_type=st.sampled_from(NLL_OP_TYPES),
    rows=st.lists(st.integers(0, 4), min_size=1, max_size=3),
    classes=st.integers(1, 7),
    reduction=st.sampled_from(["none", "mean", "sum"]),
    ignore_index=st.integers(-3, 7),
    weighted=st.booleans(),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
)
def test_random_calls_match_autograd(
    op_type: str,
    rows: list[int],
    classes: int,
    reduction: str,
    ignore_index: int,
    weighted: bool,
    dtype: np.dtype,
    seed: int,
) -> None:
    """Hypothesis over shapes, ignore_index (inside, below and above [0, C)), weights and
    types; targets drawn from [0, C) and ignore_index."""
    if op_type == NLL2D:
        shape = (rows[0], classes, *([*rows[1:], 2, 2][:2]))
    else:
        shape = (classes,) if len(rows) == 1 and rows[0] == 0 else (rows[0], classes)
    rng = np.random.default_rng(seed)
    target_shape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    choices = [*range(classes), ignore_index]
    targets = rng.choice(choices, size=target_shape)
    case = make_class_case(
        op_type, shape, dtype, reduction=reduction, ignore_index=ignore_index,
        weighted=weighted, seed=seed, targets=targets,
    )  # fmt: skip
    assert_matches_autograd(case.op_type, case.inputs, case.attrs)


@pytest.mark.parametrize("dtype", DTYPES, ids=[d.name for d in DTYPES])
@pytest.mark.parametrize("g", [math.inf, -math.inf, math.nan, 0.0])
def test_non_finite_grad_output_stays_at_the_target(dtype: np.dtype, g: float) -> None:
    """The eager kernel (and so the operator) writes w[t]*(-(g/TW)) at the target and +0
    elsewhere, whatever g is; the decomposition would give the whole row NaN."""
    case = make_class_case(NLL, (3, 4), dtype, reduction="mean", weighted=True, seed=3)
    inputs = {**case.inputs, "grad_output": np.array(g, dtype)}
    assert_matches_autograd(NLL, inputs, case.attrs)
    got = reference.evaluate(NLL, inputs, case.attrs)
    t = case.inputs["target"]
    off_target = np.ones(got.shape, bool)
    off_target[np.arange(3), t] = False
    assert _bits(got[off_target]) == _bits(np.zeros(off_target.sum(), dtype))


def test_self_is_never_read() -> None:
    case = make_class_case(NLL, (4, 3), np.float32, reduction="sum", seed=5)
    poisoned = {**case.inputs, "self": np.full((4, 3), np.nan, np.float32)}
    assert _bits(reference.evaluate(NLL, poisoned, case.attrs)) == _bits(case.expected())


def test_every_target_ignored_gives_zeros_even_with_a_zero_total_weight() -> None:
    targets = np.full(5, 2)
    case = make_class_case(NLL, (5, 4), np.float32, ignore_index=2, targets=targets)
    assert float(case.inputs["total_weight"]) == 0.0
    got = reference.evaluate(*case.call)
    assert _bits(got) == _bits(np.zeros((5, 4), np.float32))
    assert_matches_autograd(*case.call)


def test_half_types_round_the_quotient_first() -> None:
    """-(g/TW) rounds to float16 before the product by w (the eager kernel); computing
    w*(g/TW) in float32 and rounding once gives another value for these inputs."""
    g, tw, w = np.float16(5.277), np.float16(2.523), np.float16(0.807)
    inputs = {
        "grad_output": np.array(g),
        "self": np.zeros((1, 2), np.float16),
        "target": np.array([1]),
        "total_weight": np.array(tw),
        "weight": np.array([1.0, w], np.float16),
    }
    got = reference.evaluate(NLL, inputs, {})
    f32 = np.float32
    once = np.float16(f32(w) * -(f32(g) / f32(tw)))
    quotient_first = np.float16(f32(w) * f32(-np.float16(f32(g) / f32(tw))))
    assert got[0, 1] == quotient_first and quotient_first != once
    assert_matches_autograd(NLL, inputs, {})


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_a_target_outside_the_classes_is_aclnn_161002(op_type: str) -> None:
    case = out_of_range_case(op_type)
    with pytest.raises(errors.TargetValueError) as info:
        reference.evaluate(*case.call)
    classes = case.inputs["self"].shape[1]
    assert str(info.value) == (
        f"{op_type}: target: holds 2 value(s) outside [0, {classes}) that are not "
        "ignore_index -100 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]"
    )


def test_an_ignore_index_outside_the_classes_ignores_those_targets() -> None:
    """ii = 255 with C = 10: the targets equal to it are ignored, not out of range (as aclnn
    and PyTorch agree)."""
    targets = np.array([255, 3, 255, 9])
    case = make_class_case(NLL, (4, 10), np.float32, ignore_index=255, targets=targets)
    got = reference.evaluate(*case.call)
    assert not got[[0, 2]].any() and got[1, 3] != 0
    assert_matches_autograd(*case.call)


def test_int32_targets_compute_what_int64_targets_do() -> None:
    a = make_class_case(NLL2D, (2, 3, 2, 2), np.float32, weighted=True, seed=9)
    b = make_class_case(
        NLL2D, (2, 3, 2, 2), np.float32, weighted=True, seed=9, target_dtype=np.int32
    )
    assert _bits(reference.evaluate(*a.call)) == _bits(reference.evaluate(*b.call))


# --------------------------------------------------------------------------- errors


def _valid() -> dict[str, np.ndarray]:
    return {
        "grad_output": np.zeros((), np.float32),
        "self": np.zeros((4, 5), np.float32),
        "target": np.zeros(4, np.int64),
        "total_weight": np.ones((), np.float32),
        "weight": np.ones(5, np.float32),
    }


ERRORS = [
    ("target-float", {"target": np.zeros(4, np.float32)}, {}, errors.ElementTypeError,
     "target: element type must be one of int64, int32, got float32"),
    ("target-int8", {"target": np.zeros(4, np.int8)}, {}, errors.ElementTypeError,
     "target: element type must be one of int64, int32, got int8"),
    ("self-int", {"self": np.zeros((4, 5), np.int64)}, {}, errors.ElementTypeError,
     "self: element type must be one of float16, bfloat16, float32, float64, got int64"),
    ("weight-type", {"weight": np.ones(5, np.float64)}, {}, errors.ElementTypeError,
     "weight: element type must be self's (float32), got float64"),
    ("grad-type", {"grad_output": np.zeros((), ml_dtypes.bfloat16)}, {},
     errors.ElementTypeError, "grad_output: element type must be self's (float32), got bfloat16"),
    ("self-rank", {"self": np.zeros((4, 5, 2), np.float32)}, {}, errors.ClassShapeError,
     "self: shape [4, 5, 2] must be rank 2 or rank 1 for self [4, 5, 2]"),
    ("target-shape", {"target": np.zeros(3, np.int64)}, {}, errors.ClassShapeError,
     "target: shape [3] must be [4] (self without dimension 1) for self [4, 5]"),
    ("weight-shape", {"weight": np.ones(4, np.float32)}, {}, errors.ClassShapeError,
     "weight: shape [4] must be [5] (one per class) for self [4, 5]"),
    ("grad-none", {}, {"reduction": "none"}, errors.ClassShapeError,
     "grad_output: shape [] must be [4] (target's, for reduction none) for self [4, 5]"),
    ("grad-sum", {"grad_output": np.zeros(4, np.float32)}, {"reduction": "sum"},
     errors.ClassShapeError, "grad_output: shape [4] must be one element for self [4, 5]"),
    ("total-weight", {"total_weight": np.ones(2, np.float32)}, {}, errors.ClassShapeError,
     "total_weight: shape [2] must be one element for self [4, 5]"),
    ("missing-total-weight", {"total_weight": None}, {}, errors.MissingInputError,
     "total_weight: is required"),
    ("reduction", {}, {"reduction": "batchmean"}, errors.AttributeValueError,
     "attribute 'reduction': must be one of 'none', 'mean', 'sum', got 'batchmean'"),
    ("ignore-index-type", {}, {"ignore_index": 1.5}, errors.AttributeValueError,
     "attribute 'ignore_index': must be an int, got float"),
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
        reference.evaluate(NLL, inputs, attrs)
    code = 161001 if error is errors.MissingInputError else 161002
    assert str(info.value).startswith(f"{NLL}: {message} [aclnn {code} ")


def test_the_2d_operator_takes_only_four_dimensions() -> None:
    inputs = {**_valid(), "self": np.zeros((4, 5), np.float32)}
    with pytest.raises(errors.ClassShapeError, match="must be rank 4 for self"):
        reference.evaluate(NLL2D, inputs, {})


def test_no_classes_gives_an_empty_gradient() -> None:
    """C = 0 with a batch and an (empty) weight: nothing to write and nothing to read; every
    target is ignored here, since no class exists for it to be."""
    inputs = {
        "grad_output": np.zeros((), np.float32),
        "self": np.zeros((3, 0), np.float32),
        "target": np.full(3, -100),
        "total_weight": np.zeros((), np.float32),
        "weight": np.zeros(0, np.float32),
    }
    assert reference.evaluate(NLL, inputs, {}).shape == (3, 0)
