"""Differential tests of `lower-lossgrad` for the classification operators: the lowered IR,
run by xDSL's interpreter, against reference.evaluate bit for bit (static shapes and the
frontend's signature form), the target check's count, and the runtime-parameter form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossgrad_compiler import reference, spec
from lossgrad_compiler.context import make_context
from lossgrad_compiler.interpreter import run_function
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.class_cases import (
    CLASS_OP_TYPES,
    ClassCase,
    all_class_cases,
    class_case_module,
    every,
    inputs_in_order,
    make_class_case,
    out_of_range_case,
)
from tests.helpers.tolerances import bits

CASES = every(list(all_class_cases()), 2)


def run_lowered(case: ClassCase, *, dynamic: bool) -> tuple[np.ndarray, int]:
    module = class_case_module(case, dynamic=dynamic)
    module.verify()
    LowerLossgradPass().apply(make_context(), module)
    module.verify()
    grad, count = run_function(module, "f", *inputs_in_order(case))
    return grad, int(count)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_lowering_matches_reference(case: ClassCase, dynamic: bool) -> None:
    grad, count = run_lowered(case, dynamic=dynamic)
    want = case.expected()
    assert grad.shape == want.shape and grad.dtype == want.dtype
    assert (bits(grad) == bits(want)).all(), case.label
    assert count == 0


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_the_target_check_counts_bad_targets_and_their_rows_are_zeros(op_type: str) -> None:
    """Two targets outside [0, C): the count is 2, and the gradient (what a path that cannot
    raise returns) has zeros where they are, and the reference's values elsewhere."""
    case = out_of_range_case(op_type)
    grad, count = run_lowered(case, dynamic=True)
    assert count == 2
    t = case.inputs["target"]
    classes = case.inputs["self"].shape[1]
    good = np.where((t >= 0) & (t < classes), t, 0)
    fixed = {**case.inputs, "target": good}
    want = reference.evaluate(case.op_type, fixed, case.attrs)
    bad = (t < 0) | (t >= classes)
    want = np.moveaxis(want, 1, -1).copy()
    want[bad] = 0
    assert (bits(np.moveaxis(grad, 1, -1)) == bits(want)).all()


@settings(max_examples=40, deadline=None)
@given(
    op_type=st.sampled_from(CLASS_OP_TYPES),
    batch=st.integers(0, 3),
    classes=st.integers(1, 5),
    reduction=st.sampled_from(["none", "mean", "sum"]),
    ignore_index=st.integers(-2, 5),
    weighted=st.booleans(),
    dtype=st.sampled_from([t.dtype for t in spec.FLOAT_TYPES]),
    target_dtype=st.sampled_from([np.int64, np.int32]),
    seed=st.integers(0, 2**16),
    label_smoothing=st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0)),
)
def test_random_calls(
    op_type: str,
    batch: int,
    classes: int,
    reduction: str,
    ignore_index: int,
    weighted: bool,
    dtype: np.dtype,
    target_dtype: type,
    seed: int,
    label_smoothing: float,
) -> None:
    op = spec.operator(op_type)
    if op_type == spec.NLL_LOSS_2D_BACKWARD.name:
        shape: tuple[int, ...] = (batch, classes, 2, 1)
    elif op.class_ranks == (2,):
        shape = (batch, classes)
    else:
        shape = (batch, classes) if batch else (classes,)
    rng = np.random.default_rng(seed)
    rows = shape[:1] + shape[2:] if len(shape) > 1 else ()
    targets = rng.choice([*range(classes), ignore_index], size=rows)
    case = make_class_case(
        op_type, shape, dtype, reduction=reduction, ignore_index=ignore_index,
        weighted=weighted, target_dtype=target_dtype, seed=seed, targets=targets,
        label_smoothing=label_smoothing,
    )  # fmt: skip
    grad, count = run_lowered(case, dynamic=bool(seed % 2))
    assert (bits(grad) == bits(case.expected())).all(), case.label
    assert count == 0


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_the_runtime_parameter_form_reads_ignore_index_from_its_argument(op_type: str) -> None:
    """One body lowered with ignore_index = -100 (and label smoothing 0.5 where it is not 0)
    serves the calls of another ignore_index (and smoothing) through its `%ignore_index`
    (and `%label_smoothing`) argument, bit for bit."""
    for case in [c for c in all_class_cases([np.float32]) if c.op_type == op_type][::3]:
        smoothing = case.attrs.get("label_smoothing")
        lowered_with = make_class_case(
            op_type, case.inputs["self"].shape, np.float32,
            reduction=case.attrs["reduction"], ignore_index=-100,
            weighted="weight" in case.inputs, label_smoothing=0.5 if smoothing else smoothing,
        )  # fmt: skip
        module = class_case_module(lowered_with, dynamic=True)
        LowerLossgradPass(runtime_parameters=True).apply(make_context(), module)
        parameters = [case.attrs["ignore_index"], *([smoothing] if smoothing else [])]
        grad, count = run_function(module, "f", *inputs_in_order(case), *parameters)
        assert (bits(grad) == bits(case.expected())).all(), case.label
        assert int(count) == 0


def test_a_label_smoothing_that_is_0_in_the_compute_type_is_no_smoothing() -> None:
    """1e-50 rounds to 0 in float32: the lowering has no smoothing term, as the reference and
    the run-time parameters judge it; an infinite g then gives the unsmoothed row."""
    case = make_class_case(
        "CrossEntropyLossGrad", (3, 4), np.float32, reduction="none", weighted=True,
        label_smoothing=1e-50, grad_output_shape=(3,),
    )  # fmt: skip
    inputs = {**case.inputs, "grad_output": np.array([np.inf, 1.0, -np.inf], np.float32)}
    case = ClassCase(case.op_type, inputs, case.attrs, case.label, case.checked)
    grad, _ = run_lowered(case, dynamic=False)
    assert (bits(grad) == bits(case.expected())).all()
    module = class_case_module(case, dynamic=False)
    LowerLossgradPass().apply(make_context(), module)
    assert "lossgrad.reductions" not in str(module)
