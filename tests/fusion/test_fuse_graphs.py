"""The fusion pass on hand-written graphs: the forms it must recognise (commuted operands,
a reciprocal instead of a division, Expand instead of implicit broadcasting, Casts around
half types), the near misses it must leave alone with a reason, and what it promises about
everything else (the input model untouched, intermediates read elsewhere kept, idempotence)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from lossgrad_compiler import fuse, reference, spec
from lossgrad_compiler.evaluation.ort import session
from lossgrad_compiler.onnx.builders import IR_VERSION
from lossgrad_compiler.runtime.ort_io import run_session

F32 = TensorProto.FLOAT


def _model(
    nodes: list[onnx.NodeProto],
    constants: dict[str, Any],
    inputs: dict[str, tuple[int, list]],
    outputs: list[str],
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(o, inputs[next(iter(inputs))][0], None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = IR_VERSION
    return model


def smooth_l1_graph(
    *,
    beta: Any = 0.5,
    divisor: Any = None,
    scale: float = 1.0,
    commute: bool = False,
    reciprocal: bool = False,
    extra_consumer: bool = False,
    expand: bool = False,
) -> onnx.ModelProto:
    """The exporter's SmoothL1 gradient: where(|d| < beta, s*d/beta, s*sign(d))."""
    divisor = beta if divisor is None else divisor
    mul = (
        (lambda a, b, o: helper.make_node("Mul", [b, a], [o]))
        if commute
        else (lambda a, b, o: helper.make_node("Mul", [a, b], [o]))
    )
    nodes = [
        helper.make_node("Sub", ["x", "t"], ["d"]),
        helper.make_node("Abs", ["d"], ["abs"]),
        helper.make_node("Less", ["abs", "beta"], ["inside"]),
        mul("s", "d", "sd"),
        helper.make_node("Sign", ["d"], ["sign"]),
        mul("s", "sign", "outside"),
        helper.make_node("Where", ["inside", "quadratic", "outside"], ["y"]),
    ]
    constants: dict[str, Any] = {"beta": beta}
    if reciprocal:
        nodes.insert(4, helper.make_node("Mul", ["sd", "inv_beta"], ["quadratic"]))
        constants["inv_beta"] = 1.0 / np.float32(divisor)
    else:
        nodes.insert(4, helper.make_node("Div", ["sd", "divisor"], ["quadratic"]))
        constants["divisor"] = divisor
    if expand:
        nodes.insert(0, helper.make_node("Shape", ["x"], ["x_shape"]))
        nodes.insert(1, helper.make_node("Expand", ["s_scalar", "x_shape"], ["s"]))
        constants["s_scalar"] = scale
    else:
        constants["s"] = scale
    outputs = ["y"]
    if extra_consumer:
        nodes.append(helper.make_node("Neg", ["sign"], ["also_sign"]))
        outputs.append("also_sign")
    inputs = {"x": (F32, ["N", 6]), "t": (F32, ["N", 6])}
    return _model(nodes, constants, inputs, outputs)


def _ours(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.domain == spec.DOMAIN]


def _attributes(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _run(model: onnx.ModelProto, **feeds: np.ndarray) -> list[np.ndarray]:
    return run_session(session(model), feeds)


FEEDS = {
    "x": np.random.default_rng(0).normal(size=(5, 6)).astype(np.float32),
    "t": np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32),
}


@pytest.mark.parametrize(
    "variant",
    [{}, {"commute": True}, {"reciprocal": True}, {"expand": True}, {"scale": 0.25}],
    ids=lambda v: ",".join(v) or "plain",
)
def test_smooth_l1_variants_fuse(variant: dict[str, Any]) -> None:
    model = smooth_l1_graph(**variant)
    fused, report = fuse(model)
    [node] = _ours(fused)
    assert node.op_type == "SmoothL1LossBackward" and len(fused.graph.node) == 1
    assert _attributes(node)["beta"] == 0.5
    assert report.fused[0].output == "y" and not report.left
    scale = variant.get("scale", 1.0)
    go = np.float32(scale)
    expected = reference.evaluate(
        "SmoothL1LossBackward",
        {"grad_output": go, "self": FEEDS["x"], "target": FEEDS["t"]},
        {"reduction": "none", "beta": 0.5},
    )
    np.testing.assert_allclose(_run(fused, **FEEDS)[0], expected, rtol=2e-7, atol=0)
    np.testing.assert_allclose(_run(fused, **FEEDS)[0], _run(model, **FEEDS)[0], rtol=2e-7)


@pytest.mark.parametrize(
    ("variant", "reason"),
    [
        ({"beta": [0.5, 0.5, 0.5, 0.5, 0.5, 0.25]}, "not one number"),
        ({"divisor": 0.25}, "the threshold 0.5 and the divisor 0.25 differ"),
        ({"reciprocal": True, "divisor": 0.3}, "is not the reciprocal of 0.5"),
        ({"extra_consumer": True}, "is also read by"),
        ({"beta": -0.5}, "is not a beta > 0"),
    ],
    ids=["beta per element", "wrong divisor", "wrong reciprocal", "intermediate read", "beta<0"],
)
def test_near_misses_stay_with_a_reason(variant: dict[str, Any], reason: str) -> None:
    model = smooth_l1_graph(**variant)
    fused, report = fuse(model)
    assert _ours(fused) == [] and fused == model
    assert any(reason in left.reason for left in report.left), report.lines()
    assert "left 'y'" in "\n".join(report.lines())


def test_a_clamp_that_is_not_smooth_l1_stays() -> None:
    """The inline form clamps d/beta to [-beta', 1] where -beta' is not -beta."""
    nodes = [
        helper.make_node("Sub", ["x", "t"], ["d"]),
        helper.make_node("Div", ["d", "beta"], ["q"]),
        helper.make_node("LessOrEqual", ["d", "low"], ["below"]),
        helper.make_node("Where", ["below", "minus_one", "q"], ["lower"]),
        helper.make_node("GreaterOrEqual", ["d", "beta"], ["above"]),
        helper.make_node("Where", ["above", "one", "lower"], ["clamped"]),
        helper.make_node("Mul", ["go", "clamped"], ["y"]),
    ]
    constants = {"beta": 0.5, "low": -0.75, "minus_one": -1.0, "one": 1.0}
    inputs = {"go": (F32, []), "x": (F32, [4]), "t": (F32, [4])}
    model = _model(nodes, constants, inputs, ["y"])
    fused, report = fuse(model)
    assert _ours(fused) == []
    assert any("clamp bounds -0.75 and 0.5" in left.reason for left in report.left)
    constants["low"] = -0.5
    fused, report = fuse(_model(nodes, constants, inputs, ["y"]))
    assert [n.op_type for n in fused.graph.node] == ["SmoothL1LossBackward"], report.lines()


def test_half_types_through_casts() -> None:
    """Casts to float32 around float16 operands and back: one node of the half type."""
    nodes = [
        helper.make_node("Cast", ["go"], ["go32"], to=F32),
        helper.make_node("Cast", ["t"], ["t32"], to=F32),
        helper.make_node("Exp", ["t32"], ["e"]),
        helper.make_node("Mul", ["e", "go32"], ["m"]),  # commuted
        helper.make_node("Neg", ["m"], ["y32"]),
        helper.make_node("Cast", ["y32"], ["y"], to=TensorProto.FLOAT16),
    ]
    f16 = TensorProto.FLOAT16
    inputs = {"go": (f16, [3, 4]), "t": (f16, [3, 4])}
    fused, _ = fuse(_model(nodes, {}, inputs, ["y"]))
    [node] = _ours(fused)
    # self is never read: any value of its type and shape (here target's) stands for it
    assert (node.op_type, list(node.input)) == ("KlDivBackward", ["go", "t", "t"])
    assert _attributes(node)["log_target"] == 1
    feeds = {"go": np.full((3, 4), 0.5, np.float16), "t": np.linspace(-2, 1, 12).reshape(3, 4)}
    feeds["t"] = feeds["t"].astype(np.float16)
    expected = -0.5 * np.exp(feeds["t"].astype(np.float32))
    np.testing.assert_allclose(_run(fused, **feeds)[0], expected.astype(np.float16), rtol=1e-3)


def test_half_result_without_the_cast_back_takes_a_float32_operand() -> None:
    """float16 operands computed and returned in float32: the operator returns the promoted
    input type, so the node takes the float32 scale as grad_output (sgn(d) is the same in
    every type, and the graph's product is exact)."""
    nodes = [
        helper.make_node("Cast", ["x"], ["x32"], to=F32),
        helper.make_node("Cast", ["t"], ["t32"], to=F32),
        helper.make_node("Sub", ["x32", "t32"], ["d"]),
        helper.make_node("Sign", ["d"], ["sign"]),
        helper.make_node("Mul", ["s", "sign"], ["y"]),
    ]
    f16 = TensorProto.FLOAT16
    model = _model(nodes, {"s": 0.5}, {"x": (f16, [3]), "t": (f16, [3])}, ["y"])
    model.graph.output[0].type.tensor_type.elem_type = F32
    fused, report = fuse(model)
    [node] = _ours(fused)
    assert list(node.input) == ["s", "x", "t"], report.lines()
    feeds = {"x": np.asarray([1, 2, np.nan], np.float16), "t": np.asarray([2, 2, 0], np.float16)}
    np.testing.assert_array_equal(_run(fused, **feeds)[0], np.asarray([-0.5, 0, 0], np.float32))


def test_input_model_untouched_and_fusion_idempotent() -> None:
    model = smooth_l1_graph()
    before = model.SerializeToString()
    fused, _ = fuse(model)
    assert model.SerializeToString() == before
    again, report = fuse(fused)
    assert again == fused and report.fused == [] and report.left == []


def test_graph_without_candidates_is_returned_as_is() -> None:
    nodes = [helper.make_node("Add", ["x", "t"], ["y"])]
    model = _model(nodes, {}, {"x": (F32, [2]), "t": (F32, [2])}, ["y"])
    fused, report = fuse(model)
    assert fused == model
    assert report.summary() == "fused nothing; left 0 candidate(s) as they are"


def test_beta_that_is_no_float32_stays() -> None:
    """A float64 threshold of 0.1 is not the float32 attribute 0.1f."""
    f64 = TensorProto.DOUBLE
    nodes = [
        helper.make_node("Sub", ["x", "t"], ["d"]),
        helper.make_node("Abs", ["d"], ["abs"]),
        helper.make_node("Less", ["abs", "beta"], ["inside"]),
        helper.make_node("Div", ["d", "beta"], ["q"]),
        helper.make_node("Sign", ["d"], ["sign"]),
        helper.make_node("Where", ["inside", "q", "sign"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, f64, [3]) for n in ("x", "t")],
        [helper.make_tensor_value_info("y", 0, None)],
        [numpy_helper.from_array(np.asarray(0.1, np.float64), "beta")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    fused, report = fuse(model)
    assert _ours(fused) == []
    assert any("is not a float32" in r.reason for r in report.left), report.lines()


def test_values_read_inside_a_branch_stay() -> None:
    """An If branch reads the gradient's Sign from the enclosing graph: it is an intermediate
    read elsewhere, so nothing is fused and nothing the branch reads is removed."""
    model = smooth_l1_graph()
    branch = helper.make_graph(
        [helper.make_node("Identity", ["sign"], ["branch_out"])],
        "branch",
        [],
        [helper.make_tensor_value_info("branch_out", F32, None)],
    )
    model.graph.input.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
    model.graph.node.append(
        helper.make_node("If", ["flag"], ["chosen"], then_branch=branch, else_branch=branch)
    )
    model.graph.output.append(helper.make_tensor_value_info("chosen", F32, None))
    fused, report = fuse(model)
    assert _ours(fused) == [] and fused == model
    assert any("is also read by node 'If'" in left.reason for left in report.left), report.lines()


def test_a_narrowing_cast_before_sign_stays() -> None:
    """sign(float16(d)) is 0 where d underflows float16; the operator's sgn(d) is not. The
    widening Casts of a half-type L1 gradient are exact: that one is an L1LossBackward."""
    f16 = TensorProto.FLOAT16
    nodes = [
        helper.make_node("Sub", ["x", "t"], ["d"]),
        helper.make_node("Cast", ["d"], ["d16"], to=f16),
        helper.make_node("Sign", ["d16"], ["sign16"]),
        helper.make_node("Cast", ["sign16"], ["sign"], to=F32),
        helper.make_node("Mul", ["s", "sign"], ["y"]),
    ]
    model = _model(nodes, {"s": 0.5}, {"x": (F32, [3]), "t": (F32, [3])}, ["y"])
    fused, _ = fuse(model)
    assert _ours(fused) == []
    widening = [
        helper.make_node("Cast", ["x"], ["x32"], to=F32),
        helper.make_node("Cast", ["t"], ["t32"], to=F32),
        helper.make_node("Sub", ["x32", "t32"], ["d"]),
        helper.make_node("Sign", ["d"], ["sign32"]),
        helper.make_node("Cast", ["sign32"], ["sign"], to=f16),
        helper.make_node("Mul", ["s", "sign"], ["y"]),
    ]
    half = _model(widening, {}, {"x": (f16, [3]), "t": (f16, [3]), "s": (f16, [3])}, ["y"])
    fused, report = fuse(half)
    assert [n.op_type for n in fused.graph.node] == ["L1LossBackward"], report.lines()
