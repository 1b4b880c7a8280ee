"""Level 2 compiled and run by IREE against reference.py: every operator, reduction,
log_target and beta form (0, > 0, inf), every element type and mixed types, every broadcast
pattern of the shared matrix (ranks 0-8, empty dimensions), with the tolerance the native
kernels meet. Each group of calls runs in one module (one compile)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler import reference, spec
from lossgrad_compiler.calls import Call
from lossgrad_compiler.evaluation import iree as iree_evaluation
from tests.helpers.cases import OP_TYPES, in_turn, make_case, standard_cases
from tests.helpers.tolerances import TIGHT, assert_matches

F16, BF16, F32, F64 = (t.dtype for t in spec.FLOAT_TYPES)
TYPE_GROUPS: dict[str, Any] = {
    "float32": F32,
    "float16": F16,
    "bfloat16": BF16,
    "float64": F64,
    "mixed_half": (F16, BF16, F32),
    "mixed_wide": (F64, F32, BF16),
}


def infinite_beta_cases(dtype: Any) -> list:
    return [
        make_case("SmoothL1LossBackward", {"reduction": r, "beta": np.inf}, (4, 3), (3,), (), dtype)
        for r in ("none", "mean", "sum")
    ]


@pytest.mark.parametrize("group", TYPE_GROUPS)
def test_every_signature_class_matches_the_reference(group: str) -> None:
    """Every operator in every type group; by default the groups take the standard cases in
    turns of two, so that each case meets three of the six groups (the six modules'
    compiles are most of IREE's minutes); all of them with LOSSGRAD_FULL_MATRIX=1."""
    dtype = TYPE_GROUPS[group]
    turn = list(TYPE_GROUPS).index(group)
    cases = [c for op in OP_TYPES for c in in_turn(standard_cases(op, dtype, seed=5), turn)]
    cases += infinite_beta_cases(dtype)
    calls = [Call(c.op_type, c.inputs, c.attrs) for c in cases]
    results = iree_evaluation.evaluate_calls(calls, device="local-sync")
    for case, got in zip(cases, results, strict=True):
        expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
        assert got.dtype == expected.dtype, case.label
        assert got.shape == expected.shape, case.label
        assert_matches(
            got, expected, case.op_type, case.inputs, case.attrs, tolerance=TIGHT,
            context=case.label,
        )  # fmt: skip


def test_local_task_gives_the_bits_of_local_sync() -> None:
    case = make_case("KlDivTargetBackward", {"reduction": "sum"}, (64, 33), (33,), (), F32)
    sync = iree_evaluation.evaluate(case.op_type, case.inputs, case.attrs, device="local-sync")
    task = iree_evaluation.evaluate(case.op_type, case.inputs, case.attrs, device="local-task")
    assert sync.tobytes() == task.tobytes()


def test_float64_is_computed_in_float64() -> None:
    """(1 + 1e-12) - 1 is 0 in float32: a demoted module would return 0 for element 0."""
    inputs = {
        "grad_output": np.float64(1.0),
        "self": np.array([1 + 1e-12, 3.0], np.float64),
        "target": np.array([1.0, 0.0], np.float64),
    }
    attrs = {"reduction": "none", "beta": 1.0}
    got = iree_evaluation.evaluate("SmoothL1LossBackward", inputs, attrs)
    assert got.dtype == np.float64
    assert got[0] != 0.0
    np.testing.assert_array_equal(got, reference.evaluate("SmoothL1LossBackward", inputs, attrs))
