"""The classification operators compiled by IREE (llvm-cpu) from their lossgrad-level
functions, as reference.evaluate computes them (bit-identical, but for CrossEntropyLossGrad's
exp and FMAs in float32 and float64: class_agreement.py): every float type, int64 and int32
targets, every reduction, with and without a weight, ignore_index, label smoothing, [C],
[N, C], [N, C, H, W] and an empty batch, with dynamic dims (one module per group, one
function per rank and attributes) and with static shapes. The lowered functions return the
gradient and the target check's count; the runtime hands back the gradient alone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler import spec
from lossgrad_compiler.calls import Call
from lossgrad_compiler.evaluation import iree as iree_evaluation
from tests.helpers.class_cases import CLASS_OP_TYPES, class_cases
from tests.iree.class_agreement import assert_agrees
from tests.iree.class_modules import compiled

F16, BF16, F32, F64 = (t.dtype for t in spec.FLOAT_TYPES)
GROUPS: dict[str, tuple[Any, Any, tuple[int, ...]]] = {
    "float32": (F32, np.int64, (-100, 1)),
    "bfloat16": (BF16, np.int64, (-100, 1)),
    "float16": (F16, np.int64, (1,)),
    "float64": (F64, np.int64, (1,)),
    "float32-int32": (F32, np.int32, (1,)),
    "bfloat16-int32": (BF16, np.int32, (1,)),
}
"""(float type, target type, ignore_index values): the whole grid of class_cases for float32
and bfloat16 (whose quotient is rounded in the body), a class as ignore_index elsewhere (the
default -100 never occurs among the targets), so that the compiles stay short."""


def group_cases(dtype: Any, target_dtype: Any, ignore: tuple[int, ...] = (-100, 1)) -> list:
    return [
        c
        for op in CLASS_OP_TYPES
        for c in class_cases(op, dtype, target_dtype=target_dtype)
        if c.attrs["ignore_index"] in ignore
    ]


@pytest.mark.parametrize("group", GROUPS)
def test_dynamic_functions_match_the_reference(group: str) -> None:
    cases = group_cases(*GROUPS[group])
    run = compiled(cases, dynamic=True)
    # one function per operator, rank, attributes and weight: shapes share it
    assert len(set(run.functions)) < len(cases)
    for k, case in enumerate(cases):
        assert_agrees(run.run(k), case)


def test_static_functions_match_the_reference() -> None:
    """Every shape in static form, three attribute sets each (and bfloat16, int32)."""
    forms = {("mean", 1, True), ("none", -100, False), ("sum", 1, True)}
    cases = [
        c
        for op in CLASS_OP_TYPES
        for c in class_cases(op, F32)
        if (c.attrs["reduction"], c.attrs["ignore_index"], "weight" in c.inputs) in forms
    ]
    cases += [
        c
        for c in class_cases(CLASS_OP_TYPES[0], BF16, target_dtype=np.int32)
        if c.attrs["reduction"] == "mean" and c.attrs["ignore_index"] == 1
    ]
    run = compiled(cases, dynamic=False)
    for k, case in enumerate(cases):
        assert_agrees(run.run(k), case)


def test_the_exported_function_declares_its_check() -> None:
    """What the runtime reads: the count is the second result, its rule and slots."""
    case = class_cases(CLASS_OP_TYPES[0], F32)[0]
    run = compiled([case])
    reflection = run.module.reflection(run.functions[0])
    assert (
        "-> (%output0: tensor<?x?xf32>, %output1: tensor<i64>)"
        in reflection["iree.abi.declaration"]
    )
    checks = run.module.checks(run.functions[0])
    assert checks is not None and checks.op == case.op_type
    (check,) = checks.checks
    assert (check.rule, check.result) == ("target_range", 1)
    assert check.slots == {
        "classes": {"input": 1, "axis": 1},
        "ignore_index": {"value": case.attrs["ignore_index"]},
    }


def test_evaluate_calls_compiles_the_frontends_signatures() -> None:
    """The Python call path: every call checked, one module of the frontend's signatures
    (dynamic dims), the gradient alone per call."""
    cases = group_cases(F32, np.int64)[::4] + group_cases(BF16, np.int32, (1,))[1::4]
    calls = [Call(*c.call) for c in cases]
    for case, got in zip(cases, iree_evaluation.evaluate_calls(calls, "local-sync"), strict=True):
        assert_agrees(got, case)
