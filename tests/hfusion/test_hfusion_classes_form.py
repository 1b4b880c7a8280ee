"""convert-linalg-to-hfusion on the classification operators (NLLLossBackward,
NLLLoss2dBackward), from lossgrad-level modules (tests/helpers/class_cases.py) through
lower-lossgrad and the pass, run by xDSL's interpreter: the gradient bit for bit against
reference.evaluate and the target check's count (the second result) against the number of
bad targets, for float16/bfloat16/float32, int64 and int32 targets, every reduction,
weight or none, ignore_index, [C], [N, C], [N, C, H, W] and an empty batch, static and
dynamic shapes."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler.context import make_context
from lossgrad_compiler.dialects import hfusion as hf
from lossgrad_compiler.interpreter import run_function
from lossgrad_compiler.passes.convert_linalg_to_hfusion import ConvertLinalgToHfusionPass
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.class_cases import (
    CLASS_OP_TYPES,
    ClassCase,
    class_case_module,
    class_cases,
    inputs_in_order,
    out_of_range_case,
)
from tests.helpers.tolerances import bits
from tests.hfusion import BF16, F16, F32

TYPES = {"float32": F32, "float16": F16, "bfloat16": BF16}


def converted(case: ClassCase, *, dynamic: bool) -> ModuleOp:
    module = class_case_module(case, dynamic=dynamic)
    context = make_context()
    LowerLossgradPass().apply(context, module)
    ConvertLinalgToHfusionPass().apply(context, module)
    module.verify()
    assert not [op for op in module.walk() if op.name == "linalg.generic"], "a generic is left"
    return module


def bad_targets(case: ClassCase) -> int:
    t = case.inputs["target"].astype(np.int64)
    classes = case.inputs["self"].shape[0 if case.inputs["self"].ndim == 1 else 1]
    ignore = case.attrs["ignore_index"]
    return int(np.count_nonzero((t != ignore) & ((t < 0) | (t >= classes))))


def check(case: ClassCase, *, dynamic: bool) -> None:
    gradient, count = run_function(converted(case, dynamic=dynamic), "f", *inputs_in_order(case))
    label = f"{case.label} ({'dynamic' if dynamic else 'static'})"
    assert count.dtype == np.int64 and count.shape == () and int(count) == bad_targets(case)
    wanted = case.expected()
    assert gradient.dtype == wanted.dtype and gradient.shape == wanted.shape, label
    assert (bits(gradient) == bits(wanted)).all(), f"{label}: not bit-identical"


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_every_class_case_matches_the_reference(op_type: str, dtype: str, dynamic: bool) -> None:
    for case in class_cases(op_type, TYPES[dtype], seed=3):
        check(case, dynamic=dynamic)


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_int32_targets(op_type: str) -> None:
    for k, case in enumerate(class_cases(op_type, F16, target_dtype=np.int32, seed=5)):
        check(case, dynamic=bool(k % 2))


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_bad_targets_are_counted_and_their_rows_are_zero(op_type: str) -> None:
    """The count the runner raises TARGET_RANGE from: 2 for out_of_range_case (C and -7),
    and no kernel reads a weight or writes a result at the bad index."""
    case = out_of_range_case(op_type)
    module = converted(case, dynamic=True)
    gradient, count = run_function(module, "f", *inputs_in_order(case))
    assert int(count) == 2
    rows = np.moveaxis(gradient, 1, -1).reshape(-1, gradient.shape[1])
    assert not rows[0].any() and not rows[-1].any()


def test_the_new_constructs_have_their_named_ops() -> None:
    """The class position is an hfusion.arange on the class axis, the target is broadcast
    along it, the weight along the rows, the mask logic is hfusion.compare/elemwise_binary on
    i1, and the count a linalg.reduce of addi into a 0-d i64."""
    case = class_cases("NLLLossBackward", F32)[3]  # [6, 5], none, ignore_index 1, weight
    module = converted(case, dynamic=True)
    names = [op.name for op in module.walk()]
    (arange,) = [op for op in module.walk() if isinstance(op, hf.ArangeOp)]
    assert len(arange.result.type.get_shape()) == 1  # type: ignore[attr-defined]  # along C
    (spread,) = [use.operation for use in arange.result.uses]
    assert spread.name == "linalg.broadcast" and list(spread.dimensions.get_values()) == [0]  # type: ignore[attr-defined]
    assert names.count("linalg.broadcast") == 4  # grad_output, target, weight, position
    assert "hfusion.elemwise_binary" in names and "linalg.reduce" in names
    assert "hfusion.compare" in names and "hfusion.select" in names
    text = str(module)
    assert "compare_fn<vne>" not in text  # ne is a negated veq (see hfusion_body_rules)
    assert "arith.addi" in text


def test_a_half_type_quotient_is_rounded_where_bishengir_keeps_it() -> None:
    """NLLLoss's mean quotient, rounded to the half type: a 0-d hfusion.cast and a bitcast
    there and back (AscendNPU IR 1.2.0 folds the bare cast pair away)."""
    case = class_cases("NLLLossBackward", BF16)[7]
    assert case.attrs["reduction"] == "mean"
    casts = [op for op in converted(case, dynamic=True).walk() if isinstance(op, hf.BitcastOp)]
    assert [str(op.outputs[0].type) for op in casts] == ["tensor<i16>", "tensor<bf16>"]


def test_a_wrong_integer_compare_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """If hfusion.compare's vlt on integers were unsigned, -7 would count as in range."""
    monkeypatch.setitem(hf.ops._INTEGER_COMPARE, hf.CompareFn.VGE, "uge")
    case = out_of_range_case("NLLLossBackward")
    _, count = run_function(converted(case, dynamic=False), "f", *inputs_in_order(case))
    assert int(count) != 2
