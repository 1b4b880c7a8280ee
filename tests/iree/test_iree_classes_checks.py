"""The run-time checks of the classification operators on IREE: a target outside [0, C) that
is not ignore_index raises TARGET_RANGE (aclnn 161002) with the reference's own message,
whatever the target holds (values that an i64 → i32 demotion or an index taken from the
target would turn into a valid class or an address far outside the weight), and dynamic
sizes that disagree at run time are refused before anything is read."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler import reference, spec
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID, BroadcastError, LossGradError
from lossgrad_compiler.evaluation import iree as iree_evaluation
from tests.helpers.class_cases import (
    ClassCase,
    inputs_in_order,
    make_class_case,
    out_of_range_case,
    rows_of,
)
from tests.iree.class_agreement import assert_agrees
from tests.iree.class_modules import compiled

NLL, NLL2D = spec.NLL_LOSS_BACKWARD.name, spec.NLL_LOSS_2D_BACKWARD.name
CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
BF16 = spec.BFLOAT16.dtype
I64_EXTREMES = (2**32, 2**32 + 1, 2**62, -(2**63), 2**63 - 1, -1)
I32_EXTREMES = (2**31 - 1, -(2**31), -1)


def with_targets(
    op_type: str,
    shape: tuple[int, ...],
    values: tuple[int, ...],
    target_dtype: Any,
    dtype: Any = np.float32,
    **kw: Any,
) -> ClassCase:
    """A case whose first targets are `values` (the others 0); total_weight is the one of
    all-zero targets (the helper's sum of w[t] cannot index a weight by a bad target)."""
    rows, _ = rows_of(op_type, shape)
    case = make_class_case(
        op_type, shape, dtype, targets=np.zeros(rows, np.int64), target_dtype=target_dtype,
        **kw,
    )  # fmt: skip
    targets = case.inputs["target"].copy()
    flat = targets.reshape(-1)
    flat[: len(values)] = np.array(values[: flat.size], np.int64).astype(target_dtype)
    case.inputs["target"] = targets
    return case


BAD = [
    out_of_range_case(NLL),
    out_of_range_case(NLL2D, np.float16),
    with_targets(NLL, (6, 5), I64_EXTREMES, np.int64, reduction="mean", weighted=True),
    with_targets(NLL, (6, 5), I32_EXTREMES, np.int32, reduction="none", weighted=True),
    with_targets(NLL2D, (2, 4, 3, 3), (4, 9, -2), np.int32, reduction="sum", ignore_index=9),
    with_targets(NLL, (5,), (5,), np.int64, reduction="sum", weighted=True),
    out_of_range_case(CE),
    # a weighted mean gathers w[t] in its kept-weight reduction too, smoothing reads the
    # class weight's sum: neither may read the weight at a bad target
    with_targets(CE, (6, 5), I64_EXTREMES, np.int64, reduction="mean", weighted=True,
                 label_smoothing=0.25),
    with_targets(CE, (6, 5), I32_EXTREMES, np.int32, BF16, reduction="none", weighted=True,
                 label_smoothing=1.0),
    with_targets(CE, (4, 3), (3,), np.int64, reduction="sum", ignore_index=1),
]  # fmt: skip
"""Calls whose targets hold values outside [0, C) that are not ignore_index."""

FINE = [
    with_targets(NLL, (6, 5), (-100, -100, 4), np.int64, reduction="none", weighted=True),
    with_targets(NLL, (6, 5), (7, 7, 7, 7, 7, 7), np.int64, ignore_index=7, weighted=True),
    with_targets(NLL2D, (2, 4, 3, 3), (-100,), np.int32, reduction="mean", weighted=True),
    with_targets(NLL, (5,), (-100,), np.int64, reduction="mean"),
    make_class_case(NLL, (0, 4), np.float32, reduction="sum", weighted=True),
    with_targets(CE, (6, 5), (9, 9, 4, 9), np.int64, ignore_index=9, weighted=True,
                 label_smoothing=0.25),
    with_targets(CE, (6, 5), (-100,) * 6, np.int32, BF16, reduction="mean", weighted=True,
                 label_smoothing=0.25),
    make_class_case(CE, (0, 4), np.float32, reduction="mean", weighted=True,
                    label_smoothing=0.25),
]  # fmt: skip
"""Calls whose only out-of-range targets are ignore_index (or that have no target)."""


@pytest.fixture(scope="module")
def run():
    return compiled([*BAD, *FINE])


@pytest.mark.parametrize("k", range(len(BAD)), ids=[c.label for c in BAD])
def test_bad_targets_raise_the_references_error(run, k: int) -> None:
    case = BAD[k]
    with pytest.raises(LossGradError) as want:
        reference.evaluate(*case.call)
    with pytest.raises(LossGradError) as got:
        run.run(k)
    assert got.value.code == ACLNN_ERR_PARAM_INVALID
    assert str(got.value) == str(want.value)
    assert "target: holds " in str(got.value) and "[aclnn 161002" in str(got.value)


@pytest.mark.parametrize("k", [0, 3, 7])
def test_evaluate_raises_it_too(k: int) -> None:
    case = BAD[k]
    with pytest.raises(LossGradError) as want:
        reference.evaluate(*case.call)
    with pytest.raises(LossGradError) as got:
        iree_evaluation.evaluate(*case.call, device="local-sync")
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("k", range(len(FINE)), ids=[c.label for c in FINE])
def test_ignored_targets_outside_the_classes_are_no_error(run, k: int) -> None:
    case = FINE[k]
    assert_agrees(run.run(len(BAD) + k), case)


def _resized(case: ClassCase, name: str, axis: int, size: int) -> list[np.ndarray]:
    arrays = dict(zip(case.present, inputs_in_order(case), strict=True))
    shape = list(arrays[name].shape)
    shape[axis] = size
    arrays[name] = np.resize(arrays[name], shape).astype(arrays[name].dtype)
    return [arrays[n] for n in case.present]


SIZED = [
    make_class_case(NLL, (6, 5), np.float32, reduction="none", weighted=True),
    make_class_case(NLL2D, (2, 4, 3, 3), np.float32, reduction="none", weighted=True),
    make_class_case(CE, (6, 5), np.float32, reduction="none", weighted=True, label_smoothing=0.25),
    make_class_case(CE, (6, 5), BF16, reduction="mean", weighted=True, label_smoothing=0.25),
]
MISMATCHES = [
    (0, "target", 0, 7, "grad_output dimension 0 and target dimension 0"),
    (0, "target", 0, 5_000, "grad_output dimension 0 and target dimension 0"),
    (0, "weight", 0, 6, "self dimension 1 and weight dimension 0"),
    (0, "grad_output", 0, 5, "grad_output dimension 0 and self dimension 0"),
    (1, "target", 2, 4, "grad_output dimension 2 and target dimension 2"),
    (1, "weight", 0, 3, "self dimension 1 and weight dimension 0"),
    (2, "weight", 0, 3, "self dimension 1 and weight dimension 0"),
    (2, "target", 0, 7, "grad_output dimension 0 and target dimension 0"),
    (3, "weight", 0, 6, "self dimension 1 and weight dimension 0"),
    (3, "target", 0, 5_000, "self dimension 0 and target dimension 0"),
]
"""(case, input, axis, its size at run time, what the error names): every loop compares its
sizes (the first operand on the loop is grad_output for reduction none, else self); a
weight shorter than C would be read past its end by the gathers of CrossEntropyLossGrad's
reductions."""


@pytest.mark.parametrize(("k", "name", "axis", "size", "says"), MISMATCHES)
def test_dynamic_sizes_that_differ_are_refused(
    k: int, name: str, axis: int, size: int, says: str
) -> None:
    run = compiled(SIZED)
    case = SIZED[k]
    assert_agrees(run.run(k), case)
    with pytest.raises(BroadcastError) as raised:
        run.module(run.functions[k], *_resized(case, name, axis, size))
    assert raised.value.code == ACLNN_ERR_PARAM_INVALID
    assert raised.value.op == case.op_type
    assert says in str(raised.value) and "must be equal at run time" in str(raised.value)
