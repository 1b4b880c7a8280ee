"""Differential tests of `convert-linalg-to-hfusion`: the HFusion form, run by xDSL's
interpreter (each named op element by element in its result type, lossgrad_compiler/
interpreter.py), against reference.evaluate.

The pass keeps level 2's expressions, order and types, and the interpreter rounds every op to
its result type and sums in row-major order as the reference does, so results are expected
bit for bit; `assert_close` (TIGHT) is the fallback that names the first difference. Every
signature class the HFusion form takes (f16/bf16/f32 and mixed half types; float64 is
refused) runs with static shapes and as its dynamic signature: by default each (operator,
type group) pair one way, in turn, so that every operator and every type group meets both;
LOSSGRAD_FULL_MATRIX=1 runs every pair both ways.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import func

from lossgrad_compiler import reference
from lossgrad_compiler.context import make_context
from lossgrad_compiler.dialects import hfusion as hf
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.interpreter import run_function
from lossgrad_compiler.passes.convert_linalg_to_hfusion import ConvertLinalgToHfusionPass
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.cases import (
    OP_TYPES,
    Case,
    make_case,
    operator_type_variant_matrix,
    standard_cases,
)
from tests.helpers.modules import cases_module
from tests.helpers.strategies import calls
from tests.helpers.tolerances import assert_close, bits
from tests.hfusion import BF16, F16, F32
from tests.hfusion import TYPE_GROUPS as HFUSION_TYPES

TYPE_GROUPS = HFUSION_TYPES


def converted(cases: list[Case], *, dynamic: bool) -> Any:
    """The cases' functions lowered to level 2 and converted to the HFusion form."""
    module = cases_module(cases, dynamic=dynamic)
    context = make_context()
    LowerLossgradPass().apply(context, module)
    ConvertLinalgToHfusionPass().apply(context, module)
    module.verify()
    for op in module.walk():
        assert op.name != "linalg.generic", "a generic is left"
    return module


def check(cases: list[Case], *, dynamic: bool) -> None:
    module = converted(cases, dynamic=dynamic)
    for k, case in enumerate(cases):
        (got,) = run_function(module, f"f{k}", *(case.inputs[n] for n in case.checked.present))
        wanted = reference.evaluate(case.op_type, case.inputs, case.attrs)
        context = f"{case.label} ({'dynamic' if dynamic else 'static'})"
        assert got.dtype == wanted.dtype and got.shape == wanted.shape, context
        assert_close(got, wanted, compute=case.compute_dtype, tight=True, context=context)
        assert (bits(got) == bits(wanted)).all(), f"{context}: not bit-identical"


@pytest.mark.parametrize(
    ("op_type", "group", "dynamic"),
    [
        pytest.param(op, group, dynamic, id=f"{op}-{group}-{'dynamic' if dynamic else 'static'}")
        for op, group, dynamic in operator_type_variant_matrix(
            OP_TYPES, list(TYPE_GROUPS), [False, True]
        )
    ],
)
def test_every_signature_class_matches_the_reference(
    op_type: str, group: str, dynamic: bool
) -> None:
    """Every broadcast pattern (ranks 0-8, empty dims) and grad_output form, every
    reduction and log_target / beta form, per element type."""
    check(standard_cases(op_type, TYPE_GROUPS[group], seed=3), dynamic=dynamic)


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_special_values(op_type: str) -> None:
    """0, -0, +-inf and NaN in every input: NaN compares (hfusion.compare is ordered but for
    vne) and the t == 0 select come out as level 2 says."""
    check(standard_cases(op_type, F32, seed=7, specials=0.3)[::2], dynamic=False)


def test_infinite_beta() -> None:
    cases = [
        make_case("SmoothL1LossBackward", {"reduction": r, "beta": np.inf}, (4, 3), (3,), (), F16)
        for r in ("none", "mean", "sum")
    ]
    check(cases, dynamic=True)


def test_float64_is_refused_with_the_targets_that_compute_it() -> None:
    case = make_case("KlDivBackward", {"reduction": "sum"}, (2, 3), (3,), (), np.float64)
    with pytest.raises(UnsupportedByBackendError, match="use the onnx, ort or iree target"):
        converted([case], dynamic=True)


def test_the_check_sees_a_wrong_nan_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """If hfusion.compare's vle were unordered (true on NaN), SmoothL1's clamp would give
    -ge for a NaN difference instead of NaN: the differential check must fail."""
    monkeypatch.setitem(hf.ops._COMPARE, hf.CompareFn.VLE, "ule")
    case = make_case("SmoothL1LossBackward", {"reduction": "none", "beta": 1.0}, (3,), (3,), (3,))
    case.inputs["self"][1] = np.nan
    with pytest.raises(AssertionError):
        check([case], dynamic=False)


@settings(max_examples=40, deadline=None)
@given(calls(dtypes=[F16, BF16, F32]), st.booleans())
def test_drawn_calls_match_the_reference(case: Case, dynamic: bool) -> None:
    """Drawn shapes, broadcasts (ranks 0-8, empty axes), attributes, special values and per
    input half or float32 types (tests/helpers/strategies.py)."""
    check([case], dynamic=dynamic)


def test_functions_keep_their_interface_and_say_what_they_are() -> None:
    case = make_case("KlDivTargetBackward", {"reduction": "mean"}, (4, 3), (3,), (), F16)
    before = cases_module([case], dynamic=True)
    LowerLossgradPass().apply(make_context(), before)
    (function,) = before.ops
    assert isinstance(function, func.FuncOp)
    interface = function.function_type
    ConvertLinalgToHfusionPass().apply(make_context(), before)
    assert function.function_type == interface
    assert function.attributes["lossgrad.op_type"].data == "KlDivTargetBackward"  # type: ignore[attr-defined]
    assert hf.HACC_ENTRY in function.attributes
    assert function.attributes[hf.HACC_FUNCTION_KIND] == hf.FunctionKindAttr(hf.FunctionKind.HOST)
