"""Differential tests of `lower-lossgrad`: the lowered IR, run by xDSL's interpreter (with
lossgrad_compiler.interpreter's per-type float ops), against reference.evaluate.

The lowering and the reference evaluate the same expressions in the same order and type,
and the interpreter rounds every float op to its result type, so the results are expected
to be bit-identical; a documented tolerance is the fallback only for exp/log. Each case
runs twice: with static shapes (the scale is a constant) and as a signature with dynamic
dims (the scale comes from tensor.dim), which is how the frontend compiles models.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossgrad_compiler import reference, spec
from lossgrad_compiler.context import make_context
from lossgrad_compiler.interpreter import run_function
from lossgrad_compiler.passes import lower_lossgrad
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.cases import (
    Case,
    attribute_grid,
    fits,
    make_case,
    mixed_dtype_combinations,
    standard_cases,
)
from tests.helpers.modules import build_module
from tests.helpers.tolerances import assert_close, bits

OP_TYPES = tuple(spec.BROADCAST_OPERATORS)


def run_lowered(case: Case, *, dynamic: bool) -> np.ndarray:
    module = build_module(case, dynamic=dynamic)
    module.verify()
    LowerLossgradPass().apply(make_context(), module)
    module.verify()
    assert not any(op.name.startswith("lossgrad.") for op in module.walk())  # no op left
    (result,) = run_function(module, "f", *(case.inputs[n] for n in case.checked.present))
    return result


def expected(case: Case) -> np.ndarray:
    return reference.evaluate(case.op_type, case.inputs, case.attrs)


def check_case(case: Case, *, dynamic: bool) -> None:
    actual, wanted = run_lowered(case, dynamic=dynamic), expected(case)
    context = f"{case.label} ({'dynamic' if dynamic else 'static'})"
    assert_close(actual, wanted, compute=case.compute_dtype, tight=True, context=context)
    assert (bits(actual) == bits(wanted)).all(), f"{context}: not bit-identical"


def cases_for(op_type: str, dtype: Any, specials: float = 0.0) -> list[Case]:
    return standard_cases(op_type, dtype, seed=11, specials=specials)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op_type", OP_TYPES)
def test_lowering_matches_reference(op_type: str, dtype: Any, dynamic: bool) -> None:
    """Every broadcast pattern, grad_output shape, reduction, log_target / beta variant."""
    for case in cases_for(op_type, dtype):
        check_case(case, dynamic=dynamic)


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_special_values(op_type: str) -> None:
    """0, -0, +-inf and NaN in every input (f32: the sign of zero and NaN propagation)."""
    for case in cases_for(op_type, np.float32, specials=0.3)[::3]:
        check_case(case, dynamic=False)


HALF_AND_MIXED = [
    (np.dtype(np.float16),) * 3,
    (np.dtype(ml_dtypes.bfloat16),) * 3,
    *mixed_dtype_combinations(),
]


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_half_and_mixed_types(op_type: str) -> None:
    """f16/bf16 widened with extf and rounded once with truncf (also after a C-typed sum);
    mixed input types, including an f64 compute type with a narrower result."""
    for k, dtypes in enumerate(HALF_AND_MIXED):
        self_shape, target_shape = ((4, 1), (4, 3)) if k % 2 else ((2, 3), (3,))
        if fits(op_type, "target"):  # the target fits into self
            self_shape, target_shape = target_shape, self_shape
            self_shape = (4, 3) if k % 2 else (2, 3)
        optional = {n: self_shape[-1:] for n in spec.operator(op_type).optional_inputs}
        case = make_case(
            op_type,
            {"reduction": "mean"},
            self_shape,
            target_shape,
            (),
            dtypes,
            seed=k,
            optional=optional,
        )
        check_case(case, dynamic=k % 3 == 0)


def test_beta_rounding_to_zero_takes_the_sign_form() -> None:
    """beta = 1e-50 is 0 in f32 (sign form, no division) but > 0 in f64 (clamp form)."""
    for dtype in (np.float32, np.float64):
        attrs = {"reduction": "none", "beta": 1e-50}
        case = make_case("SmoothL1LossBackward", attrs, (2, 3), (2, 3), (2, 3), dtype, seed=3)
        check_case(case, dynamic=False)


def test_mean_of_empty_and_batchmean_of_scalar_self() -> None:
    """numel(B) = 0 (scale 1/0 = inf, never used) and a 0-d self under batchmean."""
    empty = make_case("KlDivBackward", {"reduction": "mean"}, (0, 3), (3,), (), np.float32)
    check_case(empty, dynamic=True)
    batchmean = {"reduction": "batchmean"}
    scalar = make_case("KlDivTargetBackward", batchmean, (), (2, 3), (), np.float64)
    check_case(scalar, dynamic=False)


def test_differential_check_detects_a_wrong_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lowering whose mean scale is off (1/(n+1)) must fail check_case, statically and
    dynamically: the differential test is able to see a broken lowering."""

    original = lower_lossgrad.OpLowering.scale

    def off_by_one(self: lower_lossgrad.OpLowering, count: Any) -> Any:
        if count is not None and count.is_static:
            count = type(count)(count.static_factor + 1, count.dynamic)
        elif count is not None:
            value = original(self, count)
            return self.outer.mulf(value, self.outer.constant(0.5, self.compute_type))
        return original(self, count)

    monkeypatch.setattr(lower_lossgrad.OpLowering, "scale", off_by_one)
    case = make_case("SmoothL1LossBackward", {"reduction": "mean"}, (2, 3), (2, 3), (), np.float32)
    for dynamic in (False, True):
        with pytest.raises(AssertionError, match="elements differ"):
            check_case(case, dynamic=dynamic)


def test_differential_check_detects_a_wrong_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropping the t == 0 select of KlDivTargetBackward must be caught (NaN instead of 0)."""

    def without_select(log_target: bool) -> lower_lossgrad.Formula:
        def body(b: Any, v: lower_lossgrad.BodyValues) -> Any:
            one = b.constant(1.0, v.compute_type)
            return b.mulf(v.ge, b.subf(b.addf(b.log(v.t), one), v.x))

        return body

    monkeypatch.setattr(lower_lossgrad, "kl_div_target_backward", without_select)
    case = make_case(
        "KlDivTargetBackward", {"reduction": "none"}, (2, 3), (2, 3), (2, 3), np.float64
    )
    case.inputs["target"][0, 0] = 0.0
    with pytest.raises(AssertionError, match="elements differ"):
        check_case(case, dynamic=False)


@st.composite
def random_cases(draw: st.DrawFn) -> tuple[Case, bool]:
    """Random op, attributes, type, broadcast pattern (ranks 0-4) and static/dynamic form."""
    op_type = draw(st.sampled_from(OP_TYPES))
    attrs = draw(st.sampled_from(attribute_grid(op_type)))
    b = draw(st.lists(st.integers(0, 3), max_size=4))

    def trailing_with_ones(dims: tuple[int, ...]) -> tuple[int, ...]:
        """Some trailing dims of `dims`, each possibly replaced by a broadcast 1."""
        rank = draw(st.integers(0, len(dims)))
        return tuple(d if draw(st.booleans()) else 1 for d in dims[len(dims) - rank :])

    self_shape = trailing_with_ones(tuple(b))
    target_shape = trailing_with_ones(self_shape if fits(op_type, "target") else tuple(b))
    space = tuple(np.broadcast_shapes(self_shape, target_shape))
    go_shape = trailing_with_ones(space)
    if spec.operator(op_type).grad_output_may_enlarge and draw(st.booleans()):
        go_shape = (2, *space)
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    seed = draw(st.integers(0, 2**16))
    case = make_case(op_type, attrs, self_shape, target_shape, go_shape, dtype, seed=seed)
    return case, draw(st.booleans())


@settings(max_examples=40, deadline=None, derandomize=True)
@given(random_cases())
def test_random_broadcast_patterns(drawn: tuple[Case, bool]) -> None:
    case, dynamic = drawn
    check_case(case, dynamic=dynamic)
