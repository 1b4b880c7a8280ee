"""The fused half-type path of the native kernels (cxx/iteration.h, fused_half_block): a
float16 or bfloat16 signature whose operands are all of the result's type, each contiguous or
broadcast along the inner axis. Its results must be the float32 kernel's on the widened
inputs, narrowed once, bit for bit: the contract computes half types in float32 and rounds
once, and the fused path may not change a bit of it. The shapes put full 16-element chunks,
a partial last chunk, block boundaries (1024 elements) and broadcast operands (0-d, a row,
a column that changes per row, for grad_output too: a grad_output constant along the row is
widened once per block, not per chunk) through it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from lossgrad_compiler import spec
from tests.helpers.cases import Case, make_case
from tests.helpers.tolerances import bits
from tests.ort.support import case_model, native_session, run

HALVES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]

# (name, grad_output, self, target) for the differentiated operand's elementwise forms.
SHAPES = [
    ("full", (37, 45), (37, 45), (37, 45)),
    ("scalar_go", (), (37, 45), (37, 45)),
    ("row", (37, 45), (37, 45), (45,)),
    ("column", (37, 45), (37, 45), (37, 1)),
    ("column_go", (37, 1), (37, 45), (37, 45)),
    ("one_chunk", (16,), (16,), (16,)),
    ("under_one_chunk", (5,), (5,), (5,)),
    ("across_blocks", (), (3, 1100), (3, 1100)),
]

ATTRIBUTES = {
    spec.KL_DIV_BACKWARD.name: [
        {"reduction": r, "log_target": lt} for r in ("none", "mean") for lt in (0, 1)
    ],
    spec.KL_DIV_TARGET_BACKWARD.name: [
        {"reduction": r, "log_target": lt} for r in ("none", "batchmean") for lt in (0, 1)
    ],
    spec.SMOOTH_L1_LOSS_BACKWARD.name: [
        {"reduction": r, "beta": b} for r in ("none", "sum") for b in (0.5, 0.3, 0.0)
    ],
}


pytestmark = pytest.mark.usefixtures("native_kernels")


def _shapes_for(op_type: str, go: tuple, x: tuple, t: tuple) -> tuple[tuple, tuple, tuple]:
    """KlDivTargetBackward's result follows target: the broadcast operand is then self."""
    return (go, t, x) if op_type == spec.KL_DIV_TARGET_BACKWARD.name else (go, x, t)


@pytest.mark.parametrize("half", HALVES, ids=lambda d: d.name)
@pytest.mark.parametrize("op_type", list(ATTRIBUTES))
@pytest.mark.parametrize("name,go,x,t", SHAPES, ids=[s[0] for s in SHAPES])
def test_half_kernel_is_the_float32_kernel_rounded_once(
    op_type: str, half: np.dtype, name: str, go: tuple, x: tuple, t: tuple
) -> None:
    go, x, t = _shapes_for(op_type, go, x, t)
    if name == "scalar_go" or name == "across_blocks":
        attrs_list = [a for a in ATTRIBUTES[op_type] if a["reduction"] != "none"]
    else:
        attrs_list = [a for a in ATTRIBUTES[op_type] if a["reduction"] == "none"]
    for k, attrs in enumerate(attrs_list):
        case = make_case(op_type, attrs, x, t, go, half, seed=17 + k, specials=0.1)
        wide = Case(op_type, {n: v.astype(np.float32) for n, v in case.inputs.items()}, attrs)
        got = run(native_session(case_model(case)), case.inputs)
        in_float32 = run(native_session(case_model(wide)), wide.inputs)
        assert got.dtype == half
        assert np.array_equal(bits(got), bits(in_float32.astype(half))), (
            f"{case.label}: the half kernel differs from float32 rounded once"
        )


@pytest.mark.parametrize("half", HALVES, ids=lambda d: d.name)
def test_subnormal_results_round_like_float32(half: np.dtype) -> None:
    """Products that land among the half type's subnormals (for bfloat16 these are float32's
    too, which its hardware chunk conversion flushes to zero: such lanes take the exact
    integer path)."""
    rng = np.random.default_rng(5)
    n = 96  # six full chunks
    tiny = np.float32(ml_dtypes.finfo(half).tiny)
    target = (rng.uniform(0.01, 4.0, n) * tiny * rng.choice([-1, 1], n)).astype(np.float32)
    inputs = {
        "grad_output": rng.uniform(0.2, 1.0, n).astype(half),
        "self": np.zeros(n, half),
        "target": target.astype(half),
    }
    attrs = {"reduction": "none", "log_target": 0}
    case = Case(spec.KL_DIV_BACKWARD.name, inputs, attrs)
    wide = Case(case.op_type, {k: v.astype(np.float32) for k, v in inputs.items()}, attrs)
    got = run(native_session(case_model(case)), case.inputs)
    in_float32 = run(native_session(case_model(wide)), wide.inputs)
    assert np.any((in_float32 != 0) & (np.abs(in_float32) < tiny))  # subnormal results
    assert np.array_equal(bits(got), bits(in_float32.astype(half)))
