"""The generated aclnn two-phase wrappers: the operators' validation with its codes and messages
(the same text spec.validate produces), the signature check, outputs left untouched by a
rejected call, the empty-tensor rules, and emulate()'s own refusals."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from lossgrad_compiler import errors, spec
from lossgrad_compiler.backends.ascendc.emulation import (
    FLAG_NULL_EXECUTOR,
    FLAG_NULL_OUT,
    FLAG_NULL_WORKSPACE_SIZE,
    UNTOUCHED,
    RawCase,
    flag_null_input,
    run_raw,
)
from lossgrad_compiler.evaluation.ascendc import compile_signature, emulate

F32 = np.float32


def spec_format(argument: str, rule: str) -> str:
    return errors.format_error("KlDivBackward", argument, rule, errors.ACLNN_ERR_PARAM_INVALID)


def _signature(op_type: str, attrs: dict[str, Any]):
    shapes = {"grad_output": (), "self": (2, 3), "target": (2, 3)}
    infos = {n: spec.TensorInfo(np.dtype(F32), s) for n, s in shapes.items()}
    return compile_signature(spec.validate(op_type, infos, attrs))


def _raw(
    inputs: dict[str, np.ndarray],
    attrs: dict[str, Any],
    out_shape=(2, 3),
    out_dtype=F32,
    flags: int = 0,
    op_type: str | None = None,
) -> RawCase:
    """One raw case; its attribute values in the operator's order (spec's table), a
    reduction given as a string sent as its aclnn code, an int sent as it is."""
    if op_type is None:
        op_type = spec.SMOOTH_L1_LOSS_BACKWARD.name if "beta" in attrs else "KlDivBackward"
    values = []
    for a in spec.operator(op_type).attributes:
        value = attrs.get(a.name, 1.0 if a.name == "beta" else a.default)
        values.append(a.aclnn_value(value) if isinstance(value, str) else value)
    return RawCase(
        inputs=[inputs[n] for n in spec.INPUT_NAMES],
        out_dtype=out_dtype,
        out_shape=out_shape,
        attributes=values,
        flags=flags,
    )


def _inputs(go=(), x=(2, 3), t=(2, 3), dtypes=(F32, F32, F32)) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        n: rng.random(s).astype(d)
        for n, s, d in zip(spec.INPUT_NAMES, (go, x, t), dtypes, strict=True)
    }


def _spec_error(op_type: str, inputs: dict[str, np.ndarray | None], attrs: dict[str, Any]):
    infos = {n: None if a is None else spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}
    with pytest.raises(errors.LossGradError) as err:
        spec.validate(op_type, infos, attrs)
    return err.value


INVALID_KL = [
    ("int32 self", _inputs(dtypes=(F32, np.int32, F32)), {}),
    ("bool target", _inputs(dtypes=(F32, F32, np.bool_)), {}),
    ("rank 9", _inputs(t=(1,) * 9), {}),
    ("no broadcast", _inputs(x=(2, 3), t=(4, 3)), {}),
    ("grad_output enlarges B", _inputs(go=(5, 2, 3)), {}),
    ("grad_output does not broadcast", _inputs(go=(4,)), {}),
    ("grad_output enlarges an axis", _inputs(go=(3, 3), x=(1, 3), t=(1, 3)), {}),
]


@pytest.mark.parametrize(("label", "inputs", "attrs"), INVALID_KL, ids=[c[0] for c in INVALID_KL])
def test_kl_wrapper_rejects_like_spec(label: str, inputs: dict, attrs: dict) -> None:
    op = spec.KL_DIV_BACKWARD.name
    compiled = _signature(op, {"reduction": "mean"})
    (result,) = run_raw(compiled.runner, [_raw(inputs, {"reduction": "mean", **attrs})])
    expected = _spec_error(op, inputs, {"reduction": "mean", **attrs})
    assert (result.status, result.message) == (expected.code, str(expected))
    assert (result.output.view(np.uint8) == UNTOUCHED).all()


@pytest.mark.parametrize("missing", [0, 1, 2])
def test_null_input_is_161001_like_spec(missing: int) -> None:
    op = spec.SMOOTH_L1_LOSS_BACKWARD.name
    compiled = _signature(op, {"reduction": "mean", "beta": 1.0})
    inputs = _inputs()
    case = _raw(inputs, {}, flags=flag_null_input(missing), op_type=op)
    (result,) = run_raw(compiled.runner, [case])
    given = {n: (None if k == missing else a) for k, (n, a) in enumerate(inputs.items())}
    expected = _spec_error(op, given, {})
    assert result.status == errors.ACLNN_ERR_PARAM_NULLPTR == expected.code
    assert result.message == str(expected)


@pytest.mark.parametrize(
    ("flag", "argument"),
    [
        (FLAG_NULL_OUT, "out"),
        (FLAG_NULL_WORKSPACE_SIZE, "workspaceSize"),
        (FLAG_NULL_EXECUTOR, "executor"),
    ],
)
def test_null_output_and_phase_one_pointers_are_161001(flag: int, argument: str) -> None:
    op = spec.KL_DIV_TARGET_BACKWARD.name
    compiled = _signature(op, {"reduction": "sum"})
    case = _raw(_inputs(), {"reduction": "sum"}, flags=flag, op_type=op)
    (result,) = run_raw(compiled.runner, [case])
    assert result.status == errors.ACLNN_ERR_PARAM_NULLPTR
    assert result.message == errors.format_error(op, argument, "is required", result.status)


@pytest.mark.parametrize("beta", [-1.0, -1e-300, math.nan, -math.inf])
def test_beta_out_of_range_is_rejected_like_spec(beta: float) -> None:
    op = spec.SMOOTH_L1_LOSS_BACKWARD.name
    compiled = _signature(op, {"reduction": "mean", "beta": 1.0})
    inputs = _inputs()
    (result,) = run_raw(compiled.runner, [_raw(inputs, {"reduction": "mean", "beta": beta})])
    expected = _spec_error(op, inputs, {"reduction": "mean", "beta": beta})
    assert (result.status, result.message) == (expected.code, str(expected))


@pytest.mark.parametrize("delta", [0.0, -0.0, -1.0, math.nan])
def test_delta_at_or_below_its_exclusive_bound_is_rejected_like_spec(delta: float) -> None:
    """delta > 0: the bound itself is refused too (the wrapper once took delta = 0)."""
    op = spec.HUBER_LOSS_BACKWARD.name
    compiled = _signature(op, {"reduction": "mean", "delta": 1.0})
    inputs = _inputs()
    case = _raw(inputs, {"reduction": "mean", "delta": delta}, op_type=op)
    (result,) = run_raw(compiled.runner, [case])
    expected = _spec_error(op, inputs, {"reduction": "mean", "delta": delta})
    assert (result.status, result.message) == (expected.code, str(expected))
    assert (result.output.view(np.uint8) == UNTOUCHED).all()


@pytest.mark.parametrize(("op_type", "code"), [("SmoothL1LossBackward", 3), ("KlDivBackward", 7)])
def test_reduction_code_out_of_range_is_161002(op_type: str, code: int) -> None:
    attrs = {"reduction": "mean", "beta": 1.0} if op_type.startswith("Smooth") else {}
    compiled = _signature(op_type, attrs or {"reduction": "mean"})
    case = _raw(_inputs(), {**attrs, "reduction": code}, op_type=op_type)
    (result,) = run_raw(compiled.runner, [case])
    rule = spec.operator(op_type).attribute("reduction").rule()
    assert result.status == errors.ACLNN_ERR_PARAM_INVALID
    assert result.message == errors.format_error(
        op_type, "attribute 'reduction'", f"must be {rule}, got {code}", result.status
    )


def test_a_valid_call_of_another_signature_is_refused() -> None:
    op = spec.KL_DIV_BACKWARD.name
    compiled = _signature(op, {"reduction": "mean"})
    cases = [
        _raw(_inputs(dtypes=(F32, np.float16, F32)), {"reduction": "mean"}, out_dtype=np.float16),
        _raw(_inputs(x=(1, 3)), {"reduction": "mean"}, out_shape=(1, 3)),
        _raw(_inputs(), {"reduction": "sum"}),
        _raw(_inputs(), {"reduction": "mean", "log_target": 1}),
    ]
    results = run_raw(compiled.runner, cases)
    assert [r.status for r in results] == [errors.ACLNN_ERR_PARAM_INVALID] * 4
    assert "compiled for element type float32, got float16" in results[0].message
    assert "compiled for the shape pattern [?, ?]" in results[1].message
    assert (
        "attribute 'reduction': the Ascend C kernel was compiled for 1 ('mean')"
        in results[2].message
    )
    assert "attribute 'log_target': the Ascend C kernel was compiled for 0" in results[3].message
    assert all((r.output.view(np.uint8) == UNTOUCHED).all() for r in results)


def test_output_of_the_wrong_shape_or_type_is_refused() -> None:
    op = spec.KL_DIV_BACKWARD.name
    compiled = _signature(op, {"reduction": "mean"})
    results = run_raw(
        compiled.runner,
        [_raw(_inputs(), {}, out_shape=(3, 2)), _raw(_inputs(), {}, out_dtype=np.float16)],
    )
    assert results[0].message == spec_format(
        "out", "shape must be [2, 3] (the result shape), got [3, 2]"
    )
    assert "out: element type must be float32 (the result type), got float16" in results[1].message


def test_empty_iteration_space_writes_zeros_where_a_sum_is_taken() -> None:
    """self [0, 3] with target [3]: grad_target = zeros (the contract; CANN's aclnn skips it)."""
    op = spec.KL_DIV_TARGET_BACKWARD.name
    inputs = _inputs(go=(), x=(0, 3), t=(3,))
    out = emulate(op, inputs, {"reduction": "sum"})
    assert out.shape == (3,) and out.dtype == F32 and (out == 0).all() and not np.signbit(out).any()
    empty = emulate(op, _inputs(go=(), x=(0, 3), t=(0, 3)), {"reduction": "mean"})
    assert empty.shape == (0, 3)


def test_float64_is_refused_before_compiling() -> None:
    inputs = _inputs(dtypes=(F32, np.float64, F32))
    with pytest.raises(errors.UnsupportedByBackendError, match="use the onnx or ort target") as err:
        emulate(spec.KL_DIV_BACKWARD.name, inputs, {"reduction": "sum"})
    assert err.value.code == errors.ACLNN_ERR_PARAM_INVALID


def test_invalid_calls_raise_the_spec_error_before_compiling() -> None:
    inputs = _inputs(x=(2, 3), t=(4, 3))
    expected = _spec_error(spec.KL_DIV_BACKWARD.name, inputs, {})
    with pytest.raises(errors.LossGradError) as err:
        emulate(spec.KL_DIV_BACKWARD.name, inputs, {})
    assert str(err.value) == str(expected)


def test_optional_inputs_must_be_given_as_compiled() -> None:
    """A kernel compiled with pos_weight refuses a null pos_weight (it would read through the
    null tensor: the demo's runner once passed only the three required inputs and the
    emulator died of SIGSEGV), and one compiled without weight refuses a weight."""
    op = spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name
    shapes = {"grad_output": (), "self": (2, 3), "target": (2, 3), "pos_weight": (3,)}
    infos = {n: spec.TensorInfo(np.dtype(F32), s) for n, s in shapes.items()}
    compiled = compile_signature(spec.validate(op, infos, {"reduction": "mean"}))
    arrays = {**_inputs(), "pos_weight": np.ones(3, F32), "weight": np.ones((2, 3), F32)}
    names = spec.operator(op).input_names
    given = RawCase(
        inputs=[arrays[n] for n in names], out_dtype=F32, out_shape=(2, 3), attributes=[1],
        flags=flag_null_input(names.index("weight")),
    )  # fmt: skip
    null_pos_weight = RawCase(
        inputs=[arrays[n] for n in names], out_dtype=F32, out_shape=(2, 3), attributes=[1],
        flags=flag_null_input(names.index("weight")) | flag_null_input(names.index("pos_weight")),
    )  # fmt: skip
    extra_weight = RawCase(
        inputs=[arrays[n] for n in names], out_dtype=F32, out_shape=(2, 3), attributes=[1]
    )
    results = run_raw(compiled.runner, [given, null_pos_weight, extra_weight])
    assert [r.status for r in results] == [0, errors.ACLNN_ERR_PARAM_INVALID, 161002]
    assert "pos_weight: the Ascend C kernel was compiled with pos_weight; got null" in (
        results[1].message
    )
    assert "weight: the Ascend C kernel was compiled without weight; got a tensor" in (
        results[2].message
    )
    assert all((r.output.view(np.uint8) == UNTOUCHED).all() for r in results[1:])
