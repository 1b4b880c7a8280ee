"""CrossEntropyLossGrad through ONNX Runtime with the native kernels, beyond the class grid of
test_ort_classes_native.py: label smoothing at 0, 0.25, 1 and the smallest float above 0 (each
kernel takes the value at run time; "> 0" picks the smoothing form), weighted mean (the
kept-weight sum before the gradient), an empty batch, no classes (refused), one session over
several batch and class counts.
Agreement as test_ort_classes_native.assert_agrees says (TIGHT where exp decides the bits)."""

from __future__ import annotations

import numpy as np
import pytest

from lossgrad_compiler import spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.runtime.ort_io import run_session
from tests.helpers.class_cases import make_class_case
from tests.ort.class_support import class_model, run_case, run_class
from tests.ort.support import native_session
from tests.ort.test_ort_classes_native import assert_agrees, assert_bits

pytestmark = pytest.mark.usefixtures("native_kernels")

OP = spec.CROSS_ENTROPY_LOSS_GRAD.name
SMALLEST = float(np.float32(1e-45))  # the smallest positive float32: the smoothing form
DTYPES = [t.dtype for t in spec.FLOAT_TYPES]


@pytest.mark.parametrize("dtype", DTYPES, ids=[t.name for t in spec.FLOAT_TYPES])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.25, 1.0, SMALLEST])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_label_smoothing(reduction: str, label_smoothing: float, dtype: np.dtype) -> None:
    for weighted in (False, True):
        case = make_class_case(
            OP, (9, 7), dtype, reduction=reduction, weighted=weighted, ignore_index=2,
            label_smoothing=label_smoothing, seed=int(label_smoothing * 100),
        )  # fmt: skip
        assert_agrees(run_case(case), case)


def test_weighted_mean_divides_by_the_kept_weight() -> None:
    """Doubling every weight leaves mean's result as it is, bit for bit (each product with a
    weight and each quotient by the divisor doubles and halves exactly): the divisor is
    sum(w[t]) over the kept rows (a kernel dividing by their count doubles the result)."""
    targets = np.array([0, 3, -100, 3, 1, 4], np.int64)
    for dtype in (np.float16, np.float32):
        case = make_class_case(
            OP, (6, 5), dtype, weighted=True, targets=targets, label_smoothing=0.25
        )
        got = run_case(case)
        assert_agrees(got, case)
        doubled = {**case.inputs, "weight": (case.inputs["weight"] * 2).astype(dtype)}
        twice = run_class(OP, doubled, case.attrs)
        assert_bits(twice, got, case.label)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_empty_batch(reduction: str) -> None:
    for weighted in (False, True):
        case = make_class_case(
            OP, (0, 6), np.float32, reduction=reduction, weighted=weighted, label_smoothing=0.25
        )
        got = run_case(case)
        assert got.shape == (0, 6)
        assert_bits(got, case.expected(), case.label)


@pytest.mark.parametrize("weighted", [False, True])
def test_no_classes_is_spec_s_class_shape_error(weighted: bool) -> None:
    """C = 0 is refused with spec's message before any kernel runs (a row's weight is
    gathered at class 0 even where the row is ignored)."""
    inputs = {
        "grad_output": np.ones((), np.float32),
        "self": np.zeros((3, 0), np.float32),
        "target": np.full(3, -100, np.int64),
    }
    if weighted:
        inputs["weight"] = np.ones(0, np.float32)
    attrs = {"reduction": "mean", "label_smoothing": 0.25}
    with pytest.raises(LossGradError) as expected:
        spec.validate(OP, {n: spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}, attrs)
    with pytest.raises(Exception, match="INVALID_ARGUMENT") as raised:
        run_class(OP, inputs, attrs)
    assert str(raised.value).split("Status Message: ", 1)[1] == str(expected.value)


def test_one_session_serves_every_size() -> None:
    """Every dimension dynamic: one session, other batch and class counts, and the values
    of the run-time parameters from the node."""
    first = make_class_case(OP, (2, 3), np.float32, weighted=True, label_smoothing=0.25)
    session = native_session(class_model(OP, first.inputs, first.attrs))
    for rows, classes in ((2, 3), (7, 5), (0, 2), (1, 9), (33, 70), (4, 1)):
        case = make_class_case(
            OP, (rows, classes), np.float32, weighted=True, seed=rows, label_smoothing=0.25
        )
        (got,) = run_session(session, case.inputs)
        assert_agrees(got, case)
