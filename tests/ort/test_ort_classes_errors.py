"""Invalid calls of the classification operators through ONNX Runtime with the native
kernels: the exact message spec.validate (or the reference, for the values) raises, with its
aclnn code: a target outside [0, C) (TARGET_RANGE, aclnn 161002, from the count the level-2
target check computes), wrong shapes (CLASS_SHAPE), wrong element types (ELEMENT_TYPE,
SAME_TYPE), a missing input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lossgrad_compiler import reference, spec
from lossgrad_compiler.errors import LossGradError
from tests.helpers.class_cases import CLASS_OP_TYPES, make_class_case, out_of_range_case
from tests.ort.class_support import run_case, run_class

pytestmark = pytest.mark.usefixtures("native_kernels")


def spec_message(op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any]) -> str:
    with pytest.raises(LossGradError) as raised:
        spec.validate(
            op_type, {n: spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}, attrs
        )
    return str(raised.value)


def native_message(op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any]) -> str:
    with pytest.raises(Exception, match="INVALID_ARGUMENT") as raised:
        run_class(op_type, inputs, attrs)
    return str(raised.value).split("Status Message: ", 1)[1]


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
@pytest.mark.parametrize("target_dtype", [np.int64, np.int32])
def test_target_out_of_range(op_type: str, target_dtype: Any) -> None:
    case = out_of_range_case(op_type)
    inputs = {**case.inputs, "target": case.inputs["target"].astype(target_dtype)}
    with pytest.raises(LossGradError) as raised:
        reference.evaluate(op_type, inputs, case.attrs)
    assert "161002" in str(raised.value)
    assert native_message(op_type, inputs, case.attrs) == str(raised.value)


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
@pytest.mark.parametrize(
    "targets", [[2**62, -(2**62), 3, 0], [2**31 - 1, -(2**31), -1, 1]], ids=["huge", "int32"]
)
def test_any_target_value_is_counted_not_used(op_type: str, targets: list[int]) -> None:
    """Values far outside [0, C) address nothing (neither the weight gathered at the target
    nor self): they are counted, and the count is the message's."""
    t = np.array(targets, np.int64 if abs(targets[0]) > 2**31 else np.int32)
    shape = (4, 3) if 2 in spec.operator(op_type).class_ranks else (4, 3, 1, 1)
    inputs = {
        "grad_output": np.ones((), np.float32),
        "self": np.zeros(shape, np.float32),
        "target": t.reshape((4, *shape[2:])),
        "total_weight": np.ones((), np.float32),
        "weight": np.ones(3, np.float32),
    }
    inputs = {n: a for n, a in inputs.items() if n in spec.operator(op_type).input_names}
    for attrs in ({"reduction": "sum", "ignore_index": -100}, {"reduction": "mean"}):
        with pytest.raises(LossGradError) as raised:
            reference.evaluate(op_type, inputs, attrs)
        assert native_message(op_type, inputs, attrs) == str(raised.value)


def test_ignored_targets_are_not_out_of_range() -> None:
    targets = np.array([-100, 2, -100], np.int64)
    case = make_class_case("NLLLossBackward", (3, 4), np.float32, targets=targets)
    assert run_case(case).tobytes() == case.expected().tobytes()


def _inputs(op_type: str, **changes: np.ndarray | None) -> dict[str, np.ndarray]:
    shape = {"NLLLoss2dBackward": (2, 3, 2, 2)}.get(op_type, (3, 4))
    case = make_class_case(op_type, shape, np.float32, weighted=True, reduction="sum")
    inputs = dict(case.inputs)
    for name, value in changes.items():
        if value is None:
            inputs.pop(name)
        else:
            inputs[name] = value
    return inputs


F32 = np.float32
BAD_CALLS: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "self_rank",
        "NLLLossBackward",
        {"self": np.zeros((2, 3, 4), F32), "target": np.zeros((2, 4), np.int64)},
        {},
    ),
    (
        "self_rank_2d",
        "NLLLoss2dBackward",
        {"self": np.zeros((2, 3), F32), "target": np.zeros(2, np.int64)},
        {},
    ),
    ("target_shape", "NLLLossBackward", {"target": np.zeros(4, np.int64)}, {}),
    ("target_rank", "NLLLoss2dBackward", {"target": np.zeros((2, 2), np.int64)}, {}),
    ("weight_size", "NLLLossBackward", {"weight": np.ones(5, F32)}, {}),
    ("total_weight", "NLLLossBackward", {"total_weight": np.ones(2, F32)}, {}),
    (
        "grad_output_none",
        "NLLLossBackward",
        {"grad_output": np.ones((), F32)},
        {"reduction": "none"},
    ),
    ("grad_output_sum", "NLLLoss2dBackward", {"grad_output": np.ones((2, 2, 2), F32)}, {}),
    ("target_float", "NLLLossBackward", {"target": np.zeros(3, F32)}, {}),
    ("target_int8", "NLLLossBackward", {"target": np.zeros(3, np.int8)}, {}),
    ("weight_double", "NLLLossBackward", {"weight": np.ones(4, np.float64)}, {}),
    ("total_weight_half", "NLLLoss2dBackward", {"total_weight": np.ones((), np.float16)}, {}),
    ("grad_output_int", "NLLLossBackward", {"grad_output": np.ones((), np.int32)}, {}),
    ("rank9_weight", "NLLLossBackward", {"weight": np.ones((1,) * 9, F32)}, {}),
    ("ce_self_rank1", "CrossEntropyLossGrad", {"self": np.zeros(4, F32)}, {}),
    (
        "ce_self_rank3",
        "CrossEntropyLossGrad",
        {"self": np.zeros((3, 4, 1), F32), "target": np.zeros((3, 1), np.int64)},
        {},
    ),
    ("ce_target_shape", "CrossEntropyLossGrad", {"target": np.zeros(4, np.int64)}, {}),
    ("ce_target_rank", "CrossEntropyLossGrad", {"target": np.zeros((3, 1), np.int64)}, {}),
    ("ce_weight_size", "CrossEntropyLossGrad", {"weight": np.ones(5, F32)}, {}),
    ("ce_weight_rank", "CrossEntropyLossGrad", {"weight": np.ones((1, 4), F32)}, {}),
    (
        "ce_grad_output_none",
        "CrossEntropyLossGrad",
        {"grad_output": np.ones(2, F32)},
        {"reduction": "none"},
    ),
    ("ce_grad_output_mean", "CrossEntropyLossGrad", {"grad_output": np.ones(3, F32)}, {}),
    ("ce_target_float", "CrossEntropyLossGrad", {"target": np.zeros(3, F32)}, {}),
    ("ce_weight_half", "CrossEntropyLossGrad", {"weight": np.ones(4, np.float16)}, {}),
]


@pytest.mark.parametrize("name,op_type,changes,attrs", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_call_gives_spec_message(
    name: str, op_type: str, changes: dict[str, Any], attrs: dict[str, Any]
) -> None:
    inputs = _inputs(op_type, **changes)
    attrs = {"reduction": "sum", **attrs}
    assert native_message(op_type, inputs, attrs) == spec_message(op_type, inputs, attrs)


def test_process_goes_on_after_errors() -> None:
    case = out_of_range_case("NLLLossBackward")
    with pytest.raises(Exception, match="161002"):
        run_case(case)
    good = make_class_case("NLLLossBackward", (2, 3), np.float32)
    assert run_case(good).tobytes() == good.expected().tobytes()


ATTRIBUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("ignore_index_float", "NLLLossBackward", {"reduction": "sum", "ignore_index": 1.5}),
    ("ignore_index_string", "NLLLossBackward", {"ignore_index": "one"}),
    ("reduction_batchmean", "NLLLossBackward", {"reduction": "batchmean"}),
    ("unknown_beta", "NLLLossBackward", {"beta": 0.5}),
    ("respelled", "NLLLossBackward", {"ignoreIndex": 3}),
    ("nll_label_smoothing", "NLLLossBackward", {"label_smoothing": 0.1}),
    ("ls_negative", "CrossEntropyLossGrad", {"label_smoothing": -0.25}),
    ("ls_negative_tiny", "CrossEntropyLossGrad", {"label_smoothing": -1e-45}),
    ("ls_above_one", "CrossEntropyLossGrad", {"label_smoothing": 1.0000001}),
    ("ls_nan", "CrossEntropyLossGrad", {"label_smoothing": float("nan")}),
    ("ls_inf", "CrossEntropyLossGrad", {"label_smoothing": float("inf")}),
    ("ls_int", "CrossEntropyLossGrad", {"label_smoothing": 1}),
    ("ls_string", "CrossEntropyLossGrad", {"label_smoothing": "0.1"}),
    ("ce_reduction", "CrossEntropyLossGrad", {"reduction": "batchmean"}),
    ("ce_unknown_log_target", "CrossEntropyLossGrad", {"log_target": 1}),
    ("ce_respelled", "CrossEntropyLossGrad", {"labelSmoothing": 0.1}),
]


@pytest.mark.parametrize("name,op_type,attrs", ATTRIBUTES, ids=[a[0] for a in ATTRIBUTES])
def test_bad_attributes_give_the_compilers_message(
    name: str, op_type: str, attrs: dict[str, Any]
) -> None:
    """Attributes are read when ORT creates the kernel, in the compiler's order."""
    from onnx import helper

    from lossgrad_compiler.onnx.attributes import attributes_from_protos

    protos = [helper.make_attribute(k, v) for k, v in attrs.items()]
    with pytest.raises(LossGradError) as expected:
        attributes_from_protos(op_type, protos)
    inputs = _inputs(op_type)
    with pytest.raises(Exception) as raised:
        run_class(op_type, inputs, attrs)
    assert str(expected.value) in str(raised.value)


def test_default_attributes_are_mean_and_minus_100() -> None:
    targets = np.array([-100, 2, 1], np.int64)
    case = make_class_case("NLLLossBackward", (3, 4), np.float32, targets=targets)
    got = run_class("NLLLossBackward", case.inputs, {})
    assert got.tobytes() == case.expected().tobytes()
