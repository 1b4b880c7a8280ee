"""How the Ascend C backend reads level 2 (lossgrad_compiler.level2): cmpf predicates as
CMPMODEs and as C++ comparisons, checked against xDSL's own interpreter; the two ways a
function's structure is read (with and without identity attributes) giving the same kernel;
and the level-2 forms it refuses, with the error class that says whose fault it is."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ModuleOp, f32, i1
from xdsl.interpreter import Interpreter
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import Block, Region

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.ascendc import emit_project
from lossgrad_compiler.backends.cxx import cxx_comparison
from lossgrad_compiler.context import make_context, parse_module
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.frontend.lowering import LoweringForm, lower_signatures
from lossgrad_compiler.frontend.signature import signature_of
from lossgrad_compiler.passes.ascendc_body_rules import SUPPORTED_PREDICATES, cmp_mode
from lossgrad_compiler.passes.convert_linalg_to_ascendc import ConvertLinalgToAscendcPass


def xdsl_cmpf(name: str, a: float, b: float) -> bool:
    """arith.cmpf evaluated by xDSL's interpreter: the oracle independent of this backend."""
    block = Block(arg_types=[f32, f32])
    op = arith.CmpfOp(block.args[0], block.args[1], name)
    block.add_ops([op, func.ReturnOp(op.result)])
    interpreter = Interpreter(ModuleOp([func.FuncOp("c", ([f32, f32], [i1]), Region(block))]))
    interpreter.register_implementations(ArithFunctions())
    interpreter.register_implementations(FuncFunctions())
    (result,) = interpreter.call_op("c", (a, b))
    return bool(result)


def cxx_as_python(expression: str, a: float, b: float) -> bool:
    """A C++ comparison of two floats evaluated with the same IEEE rules (Python's float
    comparisons are C++'s, NaN included)."""
    text = expression.replace("||", " or ").replace("!(", " not (")
    return bool(eval(text, {}, {"a": a, "b": b}))


CMPMODE_SEMANTICS = {  # the emulator's Compare (lossgrad_emu/runtime.cpp, CompareFloats)
    "LT": lambda a, b: a < b,
    "GT": lambda a, b: a > b,
    "EQ": lambda a, b: a == b,
    "LE": lambda a, b: a <= b,
    "GE": lambda a, b: a >= b,
    "NE": lambda a, b: a != b,  # true when either is NaN
}
SAMPLES = [(a, b) for a in (-1.0, 0.0, 1.0, math.nan) for b in (-1.0, 0.0, 1.0, math.nan)]
RELATIONAL = [p for p in level2.PREDICATES.values() if p.relation is not None]


@given(
    a=st.one_of(st.floats(width=32), st.sampled_from([0.0, -0.0, math.nan])),
    b=st.one_of(st.floats(width=32), st.sampled_from([0.0, -0.0, math.nan])),
)
def test_the_cxx_comparison_of_every_predicate_is_the_predicate(a: float, b: float) -> None:
    for predicate in RELATIONAL:
        text = cxx_comparison(predicate, "a", "b")
        assert cxx_as_python(text, a, b) == xdsl_cmpf(predicate.name, a, b), (predicate, text)
        # the ORT lane form (masks of GNU vectors, which take | and ~, not || and !)
        lanes = cxx_comparison(predicate, "a", "b", lanes=True)
        assert "||" not in lanes and "!" not in lanes, lanes
        scalar = lanes.replace(" | ", " || ").replace("~(", "!(")
        assert cxx_as_python(scalar, a, b) == xdsl_cmpf(predicate.name, a, b), (predicate, lanes)


def test_a_cmpmode_is_chosen_exactly_when_one_has_the_predicates_nan_behaviour() -> None:
    for predicate in level2.PREDICATES.values():
        truth = [xdsl_cmpf(predicate.name, a, b) for a, b in SAMPLES]
        matching = [
            mode
            for mode, holds in CMPMODE_SEMANTICS.items()
            if [holds(a, b) for a, b in SAMPLES] == truth
        ]
        mode = cmp_mode(predicate)
        assert (mode.value if mode else None) == (matching[0] if matching else None), predicate
    assert SUPPORTED_PREDICATES == ("oeq", "ogt", "oge", "olt", "ole", "une")


def test_predicates_without_a_relation_have_no_cxx_comparison() -> None:
    with pytest.raises(level2.Level2ContractError, match="predicate 'ord' is not level 2"):
        cxx_comparison(level2.PREDICATES["ord"], "a", "b")


# --------------------------------------------------------------------------- structure


def _signature(op_type: str, attrs: dict, shapes, dtype=np.float16):
    infos = {
        n: spec.TensorInfo(np.dtype(dtype), s)
        for n, s in zip(spec.INPUT_NAMES, shapes, strict=True)
    }
    return signature_of(spec.validate(op_type, infos, attrs))


CASES = [
    ("KlDivBackward", {"reduction": "batchmean", "log_target": 1}, ((), (4, 3), (1, 3))),
    ("KlDivTargetBackward", {"reduction": "sum", "log_target": 0}, ((), (4, 3), (3,))),
    ("KlDivTargetBackward", {"reduction": "mean", "log_target": 1}, ((4, 3), (4, 3), (4, 1))),
    ("SmoothL1LossBackward", {"reduction": "mean", "beta": 0.5}, ((), (4, 3), (1, 3))),
    ("SmoothL1LossBackward", {"reduction": "none", "beta": 0.0}, ((1, 3), (4, 3), (4, 3))),
]
IDENTITY = re.compile(r" attributes \{lossgrad\.op_type = [^\n]*\}(?= \{)")


@pytest.mark.parametrize(("op_type", "attrs", "shapes"), CASES)
def test_identity_attributes_do_not_change_the_kernel(op_type: str, attrs: dict, shapes) -> None:
    """A marked function is read by analyze_function, an unmarked one by analyze_generic
    alone: the converted IR is the same."""
    marked = lower_signatures([_signature(op_type, attrs, shapes)])
    text = str(marked)
    assert IDENTITY.search(text)
    unmarked = parse_module(IDENTITY.sub("", text))
    for module in (marked, unmarked):
        ConvertLinalgToAscendcPass().apply(make_context(), module)
    assert IDENTITY.sub("", str(marked)) == str(unmarked)


NARROWING = """
func.func @f(%g: tensor<f16>, %x: tensor<?x4xf16>, %t: tensor<4xf16>) -> tensor<4xf16> {
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<4xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>,
      affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>,
      affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%g, %x, %t : tensor<f16>, tensor<?x4xf16>, tensor<4xf16>) outs(%zeros : tensor<4xf32>) {
  ^bb0(%a: f16, %b: f16, %c: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %c32 = arith.extf %c : f16 to f32
    %m = arith.mulf %a32, %c32 : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e16 = tensor.empty() : tensor<4xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%sum : tensor<4xf32>) outs(%e16 : tensor<4xf16>) {
  ^bb0(%v: f32, %o: f16):
    NARROW
    linalg.yield %h : f16
  } -> tensor<4xf16>
  func.return %r : tensor<4xf16>
}
"""


def test_a_sum_narrowed_by_a_second_generic_converts() -> None:
    module = parse_module(NARROWING.replace("NARROW", "%h = arith.truncf %v : f32 to f16"))
    ConvertLinalgToAscendcPass().apply(make_context(), module)
    text = str(module)
    assert "ascendc.reduce_sum" in text and "ascendc.tensor_cast" in text
    assert "linalg.generic" not in text


def test_a_second_generic_that_does_more_than_narrow_is_refused() -> None:
    body = "%n = arith.negf %v : f32\n    %h = arith.truncf %n : f32 to f16"
    module = parse_module(NARROWING.replace("NARROW", body))
    with pytest.raises(level2.Level2ContractError, match="only narrows the first one's sum"):
        ConvertLinalgToAscendcPass().apply(make_context(), module)


def test_runtime_parameters_are_refused_by_the_ascend_c_backend(tmp_path) -> None:
    """n and beta as function arguments are level 2, but a project computes n in its tiling
    function and compiles beta in: the constant form is the one to lower."""
    signature = _signature("SmoothL1LossBackward", {"reduction": "mean", "beta": 0.5}, CASES[3][2])
    module = lower_signatures([signature], LoweringForm.RUNTIME_PARAMETERS)
    with pytest.raises(UnsupportedByBackendError, match=r"run-time parameters \(n, beta\)"):
        emit_project(module, tmp_path)
    assert emit_project(lower_signatures([signature]), tmp_path)
