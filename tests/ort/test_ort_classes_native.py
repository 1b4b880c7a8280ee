"""The classification operators through ONNX Runtime with the native kernels (the loop-nest
variants of backends/ort/class_variants.py): bit-identical to the reference for every case
of tests/helpers/class_cases.py (4 float types, int64 and int32 targets, every reduction,
weight present and absent, ignore_index, label smoothing, [C], [N, C], [N, C, H, W], empty
batch), but for the one op of level 2 whose bits depend on the libm (see assert_agrees), one
session serving several sizes, and ignore_index values an int32 target cannot hold."""

from __future__ import annotations

import numpy as np
import pytest

from lossgrad_compiler import reference, spec
from lossgrad_compiler.runtime.ort_io import run_session
from tests.helpers.class_cases import (
    CLASS_OP_TYPES,
    ClassCase,
    all_class_cases,
    class_cases,
    make_class_case,
)
from tests.helpers.tolerances import TIGHT, assert_matches
from tests.ort.class_support import class_model, run_case
from tests.ort.support import native_session

EXP_OPS = {spec.CROSS_ENTROPY_LOSS_GRAD.name}
"""Operators whose level 2 takes math.exp of an input (exp(log_prob))."""

pytestmark = pytest.mark.usefixtures("native_kernels")


def assert_bits(got: np.ndarray, want: np.ndarray, label: str) -> None:
    assert got.dtype == want.dtype, label
    assert got.shape == want.shape, label
    assert got.tobytes() == want.tobytes(), label


def assert_agrees(got: np.ndarray, case: ClassCase) -> None:
    """The reference's bits, but where the kernel's exp and numpy's may differ: the kernels'
    exp is cxx/vmath.h's vectorised polynomial (<= 1.02 ulp, tests/ort/test_ort_numerics.py),
    numpy's its own, so a float32 or float64 result of an op that takes exp is compared with
    TIGHT (the same ops in the same order, the sums sequential alike: only exp differs). A
    half result rounds the float32 value once and keeps the reference's bits."""
    want = case.expected()
    dtype = case.inputs["self"].dtype
    if case.op_type in EXP_OPS and dtype in (np.float32, np.float64):
        assert_matches(got, want, *case.call, tolerance=TIGHT, context=case.label)
    else:
        assert_bits(got, want, case.label)


@pytest.mark.parametrize("dtype", [t.name for t in spec.FLOAT_TYPES])
@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_bit_identical_int64(op_type: str, dtype: str) -> None:
    float_type = spec.float_type(dtype)
    assert float_type is not None
    for case in class_cases(op_type, float_type.dtype):
        assert_agrees(run_case(case), case)


@pytest.mark.parametrize("dtype", [t.name for t in spec.FLOAT_TYPES])
@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_bit_identical_int32(op_type: str, dtype: str) -> None:
    float_type = spec.float_type(dtype)
    assert float_type is not None
    for case in class_cases(op_type, float_type.dtype, target_dtype=np.int32, seed=3):
        assert_agrees(run_case(case), case)


def test_all_class_cases_are_covered() -> None:
    """The sweep above holds what all_class_cases() draws (every shape kind among them)."""
    shapes = {case.inputs["self"].shape for case in all_class_cases()}
    assert (5,) in shapes and any(len(s) == 4 for s in shapes)
    assert any(0 in s for s in shapes)


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_one_session_serves_every_size(op_type: str) -> None:
    """Dynamic sizes: one session, calls of other batch and class counts."""
    first = make_class_case(op_type, _shape(op_type, 2, 3), np.float32, weighted=True)
    session = native_session(class_model(op_type, first.inputs, first.attrs))
    for rows, classes in ((2, 3), (7, 5), (0, 2), (1, 9)):
        case = make_class_case(
            op_type, _shape(op_type, rows, classes), np.float32, weighted=True, seed=rows
        )
        (got,) = run_session(session, case.inputs)
        assert_agrees(got, case)


@pytest.mark.parametrize("ignore_index", [2**40, -(2**40), 2**31 - 1])
def test_ignore_index_beyond_int32(ignore_index: int) -> None:
    """ignore_index is compared as int64: an int32 target never equals 2**40, and a value
    it does hold (2**31 - 1) is ignored, not out of range."""
    op_type = "NLLLossBackward"
    targets = np.array([0, 2, 1, 2], np.int64)
    if ignore_index == 2**31 - 1:
        targets[1] = ignore_index
    case = make_class_case(
        op_type,
        (4, 3),
        np.float32,
        reduction="sum",
        ignore_index=ignore_index,
        targets=targets,
        target_dtype=np.int32,
    )
    want = reference.evaluate(*case.call)
    assert_bits(run_case(case), want, case.label)


def _shape(op_type: str, rows: int, classes: int) -> tuple[int, ...]:
    rank = max(spec.operator(op_type).class_ranks)
    return (rows, classes) if rank == 2 else (rows, classes, 2, 3)
