"""CrossEntropyLossGrad on IREE (llvm-cpu): its level 2 (reductions to 0-d before the
gradient, a gather of the weight in a body, math.exp, the class count as a float) compiled
by iree-compile and run by the IREE runtime. With exp exact the results are bit-identical to
reference.evaluate (in float32 and float64 without smoothing, whose products IREE fuses into
its sums), a weighted mean's kept weight summed in order; elsewhere they agree as
class_agreement.py says: label smoothing 0, 0.25 and 1, a weight or none,
every reduction, ignore_index, an empty batch, sizes past a vector and past a reduction's
tile, one function for every N and C, static shapes, and the Python call path."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler import spec
from lossgrad_compiler.calls import Call
from lossgrad_compiler.evaluation import iree as iree_evaluation
from tests.helpers.class_cases import ClassCase, make_class_case
from tests.iree.class_agreement import assert_agrees, exp_exact
from tests.iree.class_modules import compiled

CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
F16, BF16, F32, F64 = (t.dtype for t in spec.FLOAT_TYPES)
DTYPES = {"float16": F16, "bfloat16": BF16, "float32": F32, "float64": F64}
SMOOTHINGS = (0.0, 0.25, 1.0)
LARGE = ((257, 33), (1000, 7), (3, 1030))
"""Rows past a vector and a reduction's tile, classes past a vector (a tail each)."""


def grid(dtype: Any, shapes: tuple[tuple[int, int], ...], seed: int = 0) -> list[ClassCase]:
    """Every reduction, weight or none and label smoothing of SMOOTHINGS, ignore_index -100
    and (for the first shape) 1, a class that occurs."""
    cases = []
    forms = itertools.product(shapes, ("none", "mean", "sum"), (False, True), SMOOTHINGS)
    for k, (shape, reduction, weighted, ls) in enumerate(forms):
        ignore = 1 if shape == shapes[0] and k % 2 else -100
        cases.append(
            make_class_case(
                CE, shape, dtype, reduction=reduction, weighted=weighted, ignore_index=ignore,
                label_smoothing=ls, seed=seed + k,
            )
        )  # fmt: skip
    return cases


@pytest.mark.parametrize("dtype", DTYPES)
def test_with_exp_exact_the_results_are_bit_identical(dtype: str) -> None:
    """Log-probabilities 0 or -inf: what is left (the reductions summed in order, the
    gathers, the roundings to the half type) is the reference's, bit for bit; float32 and
    float64 without smoothing (class_agreement.py: FMA)."""
    cases = [
        exp_exact(c, seed=k)
        for k, c in enumerate(grid(DTYPES[dtype], ((6, 5), *LARGE)))
        if c.checked.result_type.is_half or c.attrs["label_smoothing"] == 0
    ]
    run = compiled(cases)
    for k, case in enumerate(cases):
        assert_agrees(run.run(k), case, bits=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_calls_match_the_reference(dtype: str) -> None:
    """Within TIGHT (exp: class_agreement.py); half results differ in few elements, by one
    ulp of the result (measured: at most 12 of 8481)."""
    cases = grid(DTYPES[dtype], LARGE, seed=100)
    run = compiled(cases)
    for k, case in enumerate(cases):
        got = run.run(k)
        assert_agrees(got, case, bits=False)
        if spec.float_type(got.dtype).is_half:
            assert np.count_nonzero(got != case.expected()) <= got.size // 200, case.label


def test_one_function_serves_every_batch_and_class_count() -> None:
    """Dynamic N and C: the class count (C, converted to float for the smoothing) and the
    reductions' lengths are read at run time; an empty batch gives an empty gradient."""
    shapes = ((6, 5), (1, 3), (0, 4), (257, 33), (2, 1))
    cases = [
        make_class_case(CE, s, F32, reduction="mean", weighted=True, label_smoothing=0.25, seed=k)
        for k, s in enumerate(shapes)
    ]
    run = compiled(cases, dynamic=True)
    assert len(set(run.functions)) == 1
    for k, case in enumerate(cases):
        got = run.run(k)
        assert got.shape == case.inputs["self"].shape
        assert_agrees(got, case)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_an_empty_batch_gives_an_empty_gradient(reduction: str) -> None:
    """A mean over no rows divides by a kept weight of 0 that no element reads."""
    cases = [
        make_class_case(CE, (0, 4), dtype, reduction=reduction, weighted=w, label_smoothing=ls)
        for dtype in (F32, BF16)
        for w in (False, True)
        for ls in (0.0, 0.25)
    ]
    run = compiled(cases)
    for k, case in enumerate(cases):
        got = run.run(k)
        assert (got.shape, got.dtype) == ((0, 4), case.expected().dtype), case.label


def test_static_functions_match_the_reference() -> None:
    """Static N and C: the class count is a constant of the body."""
    cases = [
        make_class_case(CE, s, dtype, reduction=r, weighted=w, label_smoothing=0.25, seed=3)
        for s in ((6, 5), (257, 33))
        for dtype in (F32, BF16)
        for r, w in (("mean", True), ("sum", False), ("none", True))
    ]
    run = compiled(cases, dynamic=False)
    for k, case in enumerate(cases):
        assert_agrees(run.run(k), case, bits=False)


def test_the_exported_function_declares_its_check() -> None:
    """The target check's count is the second result; C is self's dimension 1."""
    case = make_class_case(CE, (6, 5), F32, ignore_index=3, weighted=True, label_smoothing=0.25)
    run = compiled([case])
    checks = run.module.checks(run.functions[0])
    assert checks is not None and checks.op == CE
    (check,) = checks.checks
    assert (check.rule, check.result) == ("target_range", 1)
    assert check.slots == {"classes": {"input": 1, "axis": 1}, "ignore_index": {"value": 3}}


def test_evaluate_calls_computes_every_form() -> None:
    """The Python call path (the frontend's signatures), a smoothing no float type holds
    exactly included (0.1: both sides take it in C)."""
    cases = [
        make_class_case(CE, (6, 5), dtype, reduction=r, weighted=w, label_smoothing=ls, seed=k)
        for k, (dtype, r, w, ls) in enumerate(
            itertools.product((F32, BF16, F64), ("none", "mean"), (False, True), (0.0, 0.1))
        )
    ]
    calls = [Call(*c.call) for c in cases]
    for case, got in zip(cases, iree_evaluation.evaluate_calls(calls, "local-sync"), strict=True):
        assert_agrees(got, case, bits=False)


def test_no_classes_at_run_time_is_refused_before_the_gather() -> None:
    """C = 0 in a function of dynamic C: an invalid row's gather reads class 0, which an
    empty weight does not have, so the guard raises the classes rule's 161002 first."""
    case = make_class_case(CE, (3, 4), F32, reduction="mean", weighted=True, label_smoothing=0.25)
    run = compiled([case], dynamic=True)
    empty = {
        **case.inputs,
        "self": np.zeros((3, 0), np.float32),
        "weight": np.zeros(0, np.float32),
        "target": np.full(3, -100),
    }
    empty_case = ClassCase(CE, empty, case.attrs, "no-classes", case.checked)
    with pytest.raises(Exception, match=r"C >= 1 along dimension 1 .*161002"):
        run.run(0, empty_case)
