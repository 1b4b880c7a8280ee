"""The classification benchmarks' calls (benchmarks/class_inputs.py), drawn the same by
bench_classes.py and by the device check on the GPU machine: what the docs say they hold."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from benchmarks.class_inputs import IGNORED, class_attributes, class_inputs
from lossgrad_compiler import spec


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)])
@pytest.mark.parametrize("op", ["CrossEntropyLossGrad", "NLLLossBackward"])
def test_a_mean_call_with_a_weight_and_every_seventh_row_ignored(op: str, dtype) -> None:
    arrays = class_inputs(op, (50, 7), dtype, seed=3)
    assert list(arrays) == [n for n in spec.operator(op).input_names if n in arrays]
    target = arrays["target"]
    assert target.dtype == np.int64 and target.shape == (50,)
    assert (target[::7] == IGNORED).all()
    kept = target[np.arange(50) % 7 != 0]
    assert ((kept >= 0) & (kept < 7)).all()
    assert {a.dtype for k, a in arrays.items() if k != "target"} == {dtype}
    assert arrays["weight"].shape == (7,) and arrays["grad_output"].shape == ()
    self = arrays["self"].astype(np.float64)
    if op == "CrossEntropyLossGrad":  # log-probabilities: each row's exp sums to 1
        np.testing.assert_allclose(np.exp(self).sum(axis=1), 1.0, rtol=0.05)
    else:  # the forward's total weight, of the kept rows
        total = arrays["weight"].astype(np.float64)[kept].sum()
        np.testing.assert_allclose(float(arrays["total_weight"]), total, rtol=1e-2)
    assert class_attributes(op)["reduction"] == "mean"
    spec.validate(op, {k: spec.TensorInfo(v.dtype, v.shape) for k, v in arrays.items()},
                  class_attributes(op))  # fmt: skip


def test_the_seed_decides_the_draw() -> None:
    first, again, other = (
        class_inputs("NLLLossBackward", (20, 5), np.dtype(np.float32), seed) for seed in (1, 1, 2)
    )
    assert all(np.array_equal(first[k], again[k]) for k in first)
    assert not np.array_equal(first["self"], other["self"])


def test_label_smoothing_is_cross_entropy_s_alone() -> None:
    assert class_attributes("CrossEntropyLossGrad", 0.1)["label_smoothing"] == 0.1
    assert "label_smoothing" not in class_attributes("NLLLossBackward", 0.1)
