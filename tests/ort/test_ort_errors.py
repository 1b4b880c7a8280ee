"""Invalid calls through ONNX Runtime with the native kernels: a Python exception whose text is
exactly spec's message (op, argument, rule, aclnn code), and the process goes on working."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import helper

from lossgrad_compiler import spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.evaluation.ort import session
from tests.ort.support import native_session, node_model, run

F32 = np.float32


pytestmark = pytest.mark.usefixtures("native_kernels")


def spec_message(op_type: str, shapes: tuple[tuple, tuple, tuple], attrs: dict) -> str:
    infos = {n: spec.TensorInfo(F32, s) for n, s in zip(spec.INPUT_NAMES, shapes, strict=True)}
    with pytest.raises(LossGradError) as raised:
        spec.validate(op_type, infos, attrs)
    return str(raised.value)


def run_shapes(op_type: str, shapes: tuple[tuple, tuple, tuple], attrs: dict) -> None:
    model = node_model(op_type, attrs, (F32,) * 3, shapes)
    inputs = {n: np.ones(s, F32) for n, s in zip(spec.INPUT_NAMES, shapes, strict=True)}
    run(native_session(model), inputs)


def default_attrs(op_type: str) -> dict:
    return {} if op_type != "SmoothL1LossBackward" else {"beta": 0.5}


BAD_SHAPES = [
    ("self_target", "SmoothL1LossBackward", ((), (2, 3), (4, 3))),
    ("self_target_rank", "KlDivBackward", ((), (5, 2, 3), (2, 4))),
    ("grad_output", "SmoothL1LossBackward", ((7,), (2, 3), (3,))),
    ("grad_output_kl", "KlDivTargetBackward", ((2, 5), (2, 3), (2, 3))),
    ("enlarge_rank", "KlDivBackward", ((1, 2, 3), (2, 3), (2, 3))),
    ("enlarge_axis", "KlDivTargetBackward", ((4, 3), (1, 3), (3,))),
    ("rank9_self", "SmoothL1LossBackward", ((), (1,) * 9, (1,))),
    ("rank9_grad_output", "KlDivBackward", ((1,) * 9, (1,), (1,))),
    ("rank9_target", "KlDivTargetBackward", ((), (2,), (1,) * 9)),
]


@pytest.mark.parametrize("name,op_type,shapes", BAD_SHAPES, ids=[b[0] for b in BAD_SHAPES])
def test_bad_shapes_raise_spec_message(name: str, op_type: str, shapes: tuple) -> None:
    attrs = default_attrs(op_type)
    expected = spec_message(op_type, shapes, attrs)
    with pytest.raises(Exception, match="INVALID_ARGUMENT") as raised:
        run_shapes(op_type, shapes, attrs)
    assert str(raised.value).endswith(expected), (str(raised.value), expected)
    assert "161002" in expected
    # The process survives, and the same library still runs a valid call.
    run_shapes(op_type, ((), (2, 3), (2, 3)), attrs)


_DIM = st.integers(min_value=0, max_value=3)
_SHAPE = st.lists(_DIM, min_size=0, max_size=10).map(tuple)


@given(op_type=st.sampled_from(list(spec.BROADCAST_OPERATORS)), go=_SHAPE, x=_SHAPE, t=_SHAPE)
def test_any_shapes_accepted_or_rejected_like_spec(
    op_type: str, go: tuple, x: tuple, t: tuple
) -> None:
    """Random shapes (ranks up to 10, sizes 0-3): the kernel accepts exactly what spec
    accepts, and rejects the rest with spec's message."""
    attrs = default_attrs(op_type)
    infos = {n: spec.TensorInfo(F32, s) for n, s in zip(spec.INPUT_NAMES, (go, x, t), strict=True)}
    try:
        checked = spec.validate(op_type, infos, attrs)
    except LossGradError as err:
        with pytest.raises(Exception) as raised:
            run_shapes(op_type, (go, x, t), attrs)
        assert str(raised.value).endswith(str(err))
        return
    model = node_model(op_type, attrs, (F32,) * 3, (go, x, t))
    inputs = {n: np.full(s, 0.5, F32) for n, s in zip(spec.INPUT_NAMES, (go, x, t), strict=True)}
    result = run(native_session(model), inputs)
    assert result.shape == tuple(checked.result_shape)


BAD_ATTRIBUTES = [
    ("KlDivBackward", "reduction", "average"),
    ("KlDivBackward", "reduction", 'it\'s "quoted"\n\t\\'),
    ("KlDivTargetBackward", "log_target", 2),
    ("KlDivTargetBackward", "log_target", -1),
    ("SmoothL1LossBackward", "reduction", "batchmean"),
    ("SmoothL1LossBackward", "beta", -0.25),
    ("SmoothL1LossBackward", "beta", -1e-30),
    ("SmoothL1LossBackward", "beta", float("nan")),
    ("SmoothL1LossBackward", "beta", float("-inf")),
    ("SmoothL1LossBackward", "beta", 2),  # an INT attribute where a FLOAT is required
    ("KlDivBackward", "reduction", 1),  # the aclnn integer code instead of the string
    ("KlDivBackward", "log_target", 1.0),
    ("KlDivBackward", "log_target", [0, 1]),
    ("SmoothL1LossBackward", "beta", [0.5]),
    ("HuberLossBackward", "delta", 0.0),  # delta > 0: the minimum itself is refused
    ("HuberLossBackward", "delta", -0.0),
    ("HuberLossBackward", "delta", float("nan")),
    ("MseLossBackward", "reduction", "batchmean"),
]


def expected_attribute_message(op_type: str, name: str, value: object) -> str:
    """What the ONNX attribute reader (strict ONNX type) or spec (range) says."""
    from lossgrad_compiler.onnx.attributes import attributes_from_protos

    with pytest.raises(LossGradError) as raised:
        attributes_from_protos(op_type, [helper.make_attribute(name, value)])
    return str(raised.value)


@pytest.mark.parametrize(
    "op_type,name,value", BAD_ATTRIBUTES, ids=[f"{a}-{b}-{c!r}" for a, b, c in BAD_ATTRIBUTES]
)
def test_bad_attributes_fail_session_creation(op_type: str, name: str, value: object) -> None:
    expected = expected_attribute_message(op_type, name, value)
    model = node_model(op_type, {name: value}, (F32,) * 3, ((), (2,), (2,)), write_attributes=False)
    with pytest.raises(Exception) as raised:
        native_session(model)
    assert str(raised.value).endswith(expected), (str(raised.value), expected)
    # session() checks attributes before ORT sees the model: spec's own exception.
    with pytest.raises(LossGradError) as checked:
        session(model)
    assert str(checked.value) == expected


def test_unknown_attribute_rejected_by_session() -> None:
    """ORT cannot list a custom op's attributes; session() rejects unknown ones with spec."""
    model = node_model(
        "KlDivBackward",
        {"reduction": "sum", "colour": 3},
        (F32,) * 3,
        ((), (2,), (2,)),
        write_attributes=False,
    )
    with pytest.raises(LossGradError, match="colour") as raised:
        session(model)
    assert raised.value.code == 161002


@pytest.mark.parametrize("value", [0.0, 1e-45, 5e-324, 1.0, 3.4e38, math.inf])
def test_valid_betas_accepted(value: float) -> None:
    model = node_model("SmoothL1LossBackward", {"beta": value}, (F32,) * 3, ((), (2,), (2,)))
    out = run(native_session(model), {n: np.ones(2, F32) for n in spec.INPUT_NAMES})
    assert out.shape == (2,)
