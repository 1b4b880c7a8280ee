"""The ai.lossgrad OpSchemas: structure taken from spec, and type-and-shape inference."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, TypeProto, defs, helper
from onnx.defs import OpSchema
from onnx.shape_inference import InferenceError, infer_node_outputs

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.errors import (
    AttributeValueError,
    BroadcastError,
    ElementTypeError,
    LossGradError,
    MissingInputError,
    RankError,
)

F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16
F32, F64 = TensorProto.FLOAT, TensorProto.DOUBLE
KL, KLT, SL1 = "KlDivBackward", "KlDivTargetBackward", "SmoothL1LossBackward"


pytestmark = pytest.mark.usefixtures("registered_schemas")


def infer(op_type, types, shapes, **attrs):
    """The inferred output TypeProto of one node (shape None = rank unknown)."""
    node = lo.make_node(op_type, ["go", "x", "t"], "out", name="n", **attrs)
    inputs = {
        name: helper.make_tensor_type_proto(t, s)
        for name, t, s in zip(("go", "x", "t"), types, shapes, strict=True)
    }
    return infer_node_outputs(lo.get_schema(op_type), node, inputs).get("out")


def dims(type_proto):
    if not type_proto.tensor_type.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
        for d in type_proto.tensor_type.shape.dim
    ]


# --------------------------------------------------------------------------- registration


def test_register_is_idempotent_and_replaces():
    first = lo.register_schemas()
    second = lo.register_schemas()
    assert [s.name for s in first] == [s.name for s in second] == list(spec.OPERATORS)
    for name in spec.OPERATORS:
        assert defs.has(name, spec.DOMAIN)


def test_deregister_then_ensure():
    try:
        lo.deregister_schemas()
        assert not any(defs.has(name, spec.DOMAIN) for name in spec.OPERATORS)
        lo.ensure_schemas()
        assert all(defs.has(name, spec.DOMAIN) for name in spec.OPERATORS)
    finally:
        lo.register_schemas()


@pytest.mark.parametrize("op", spec.BROADCAST_OPERATORS.values(), ids=lambda op: op.name)
def test_schema_structure_follows_spec(op: spec.OperatorSpec):
    """The elementwise operators (the classification ones: test_onnx_classification.py)."""
    schema = lo.get_schema(op.name)
    assert (schema.name, schema.domain, schema.since_version) == (
        op.name,
        spec.DOMAIN,
        op.since_version,  # the three first operators 1, the loss family 2, L1 3
    )
    first = 1 if op.name in (KL, KLT, SL1) else 3 if op is spec.L1_LOSS_BACKWARD else 2
    assert op.since_version == first
    assert [p.name for p in schema.inputs] == list(op.input_names)
    optional = [p.option == OpSchema.FormalParameterOption.Optional for p in schema.inputs]
    assert optional == [i.optional for i in op.inputs]
    assert [p.name for p in schema.outputs] == [op.output]
    input_params = [p.type_str for p in schema.inputs]
    assert len(set(input_params)) == len(op.inputs)  # one per input: mixed types allowed
    floats = {t.onnx_type_str for t in spec.FLOAT_TYPES}
    constraints = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    assert all(constraints[p] == floats for p in input_params)
    out_param = schema.outputs[0].type_str
    assert constraints[out_param] == floats
    if op.differentiates:
        assert out_param == input_params[op.input_names.index(op.differentiates)]
    else:
        assert out_param not in input_params
    assert set(schema.attributes) == {a.name for a in op.attributes}
    for a in op.attributes:
        attr = schema.attributes[a.name]
        assert not attr.required
        assert attr.type == OpSchema.AttrType(a.kind.onnx_code)
        default = helper.get_attribute_value(attr.default_value)
        assert default == (a.default.encode() if isinstance(a.default, str) else a.default)
    assert op.doc in schema.doc
    assert schema.has_type_and_shape_inference_function


# --------------------------------------------------------------------------- shapes


@pytest.mark.parametrize(
    ("op_type", "shapes", "expected"),
    [
        (KL, [[], ["N", 10], [1, 10]], ["N", 10]),
        (KL, [["N", 1], ["N", 10], [10]], ["N", 10]),
        (KLT, [[], ["N", 10], [10]], [10]),
        (KLT, [[], ["N", 10], ["N", 10]], ["N", 10]),
        (SL1, [["N", 4], ["N", 4], [1, 4]], ["N", 4]),
        (SL1, [[2, 1, 1], ["N", 1], [1, 5]], [2, "N", 5]),
        (SL1, [[], [], []], []),
        (SL1, [[], [3, 1], [0]], [3, 0]),
        (KL, [[], [1] * 8, [1] * 8], [1] * 8),
        # a static size other than 1 wins over a symbolic name
        (SL1, [[], ["N", 4], [3, 4]], [3, 4]),
        # two different symbolic names give an unknown dimension
        (SL1, [[], ["N"], ["M"]], [None]),
        (SL1, [[], [None, 4], [1, 4]], [None, 4]),
    ],
)
def test_inferred_shape(op_type, shapes, expected):
    assert dims(infer(op_type, [F32] * 3, shapes)) == expected


def test_unknown_rank_leaves_the_shape_out():
    assert dims(infer(SL1, [F32] * 3, [[], None, [3]])) is None
    assert dims(infer(KLT, [F32] * 3, [[], ["N", 3], None])) is None
    # KlDivBackward takes self's shape: target's unknown rank does not matter
    assert dims(infer(KL, [F32] * 3, [[], ["N", 3], None])) == ["N", 3]


def test_unknown_input_types():
    """An input without any type: the result type is set when it does not depend on it."""
    node = lo.make_node(KL, ["go", "x", "t"], "out")
    known = helper.make_tensor_type_proto(BF16, ["N", 3])
    found = infer_node_outputs(lo.get_schema(KL), node, {"go": TypeProto(), "x": known, "t": known})
    assert found["out"] == known
    node = lo.make_node(SL1, ["go", "x", "t"], "out")
    found = infer_node_outputs(
        lo.get_schema(SL1), node, {"go": TypeProto(), "x": known, "t": known}
    )
    assert found["out"] == TypeProto()  # the promoted type needs all three


def test_non_tensor_input_is_an_element_type_error():
    node = lo.make_node(SL1, ["go", "x", "t"], "out", name="n")
    tensor = helper.make_tensor_type_proto(F32, [3])
    inputs = {"go": tensor, "x": helper.make_sequence_type_proto(tensor), "t": tensor}
    with pytest.raises(
        ElementTypeError, match=r"self: element type .* got sequence \(not a tensor\)"
    ):
        infer_node_outputs(lo.get_schema(SL1), node, inputs)


def test_inference_in_a_graph_keeps_declared_symbolic_names():
    node = lo.make_node(SL1, ["go", "x", "t"], "g", reduction="none")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("go", F32, []),
            helper.make_tensor_value_info("x", F32, ["batch", 3, 1]),
            helper.make_tensor_value_info("t", F32, [1, 4]),
        ],
        [helper.make_tensor_value_info("g", F32, ["o0", "o1", "o2"])],
    )
    inferred = onnx.shape_inference.infer_shapes(lo.make_model(graph), strict_mode=True)
    assert dims(inferred.graph.output[0].type) == ["o0", 3, 4]


# --------------------------------------------------------------------------- element types


@pytest.mark.parametrize(
    ("types", "kl", "klt", "sl1"),
    [
        ((F32, F32, F32), F32, F32, F32),
        ((F16, F16, F16), F16, F16, F16),
        ((BF16, BF16, BF16), BF16, BF16, BF16),
        ((F32, F16, BF16), F16, BF16, F32),
        ((F16, BF16, BF16), BF16, BF16, F32),  # float16 with bfloat16 promotes to float32
        ((F16, F16, F64), F16, F64, F64),
        ((BF16, F64, F32), F64, F32, F64),
        ((F16, F16, BF16), F16, BF16, F32),
    ],
)
def test_result_element_type(types, kl, klt, sl1):
    shapes = [[], [2, 3], [3]]
    assert infer(KL, types, shapes).tensor_type.elem_type == kl
    assert infer(KLT, types, shapes).tensor_type.elem_type == klt
    assert infer(SL1, types, shapes).tensor_type.elem_type == sl1


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("op_type", "types", "shapes", "attrs", "cls", "code", "message"),
    [
        (
            SL1,
            [F32, TensorProto.INT32, F32],
            [[], [3], [3]],
            {},
            ElementTypeError,
            161002,
            "SmoothL1LossBackward node 'n': self: element type must be one of float16, bfloat16, "
            "float32, float64, got int32",
        ),
        (
            KL,
            [TensorProto.INT64, F32, F32],
            [[], [3], [3]],
            {},
            ElementTypeError,
            161002,
            "grad_output: element type .* got int64",
        ),
        (
            KLT,
            [F32] * 3,
            [[], [1] * 9, [1]],
            {},
            RankError,
            161002,
            "self: rank must be at most 8, got 9",
        ),
        (
            KL,
            [F32] * 3,
            [[], ["N", 3], [4]],
            {},
            BroadcastError,
            161002,
            r"self and target: shapes self \['N', 3\], target \[4\] do not broadcast",
        ),
        (
            KL,
            [F32] * 3,
            [[2, "N", 3], ["N", 3], [3]],
            {},
            BroadcastError,
            161002,
            "grad_output: .* without enlarging it",
        ),
        (
            KLT,
            [F32] * 3,
            [[5, 1], [3], [3]],
            {},
            BroadcastError,
            161002,
            "grad_output: .* without enlarging it",
        ),
        (SL1, [F32] * 3, [[5], [3], [3]], {}, BroadcastError, 161002, "grad_output and broadcast"),
        (
            KL,
            [F32] * 3,
            [[], [3], [3]],
            {"reduction": "avg"},
            AttributeValueError,
            161002,
            "attribute 'reduction': must be one of 'none', 'mean', 'sum', 'batchmean', got 'avg'",
        ),
        (
            SL1,
            [F32] * 3,
            [[], [3], [3]],
            {"reduction": "batchmean"},
            AttributeValueError,
            161002,
            "attribute 'reduction': must be one of 'none', 'mean', 'sum', got 'batchmean'",
        ),
        (
            KLT,
            [F32] * 3,
            [[], [3], [3]],
            {"log_target": 2},
            AttributeValueError,
            161002,
            "attribute 'log_target': must be one of 0, 1, got 2",
        ),
        (
            SL1,
            [F32] * 3,
            [[], [3], [3]],
            {"beta": -1.0},
            AttributeValueError,
            161002,
            r"attribute 'beta': must be a float >= 0 \(not NaN\), got -1.0",
        ),
        (
            SL1,
            [F32] * 3,
            [[], [3], [3]],
            {"beta": float("nan")},
            AttributeValueError,
            161002,
            "attribute 'beta': must be .* got nan",
        ),
    ],
)
def test_inference_errors(op_type, types, shapes, attrs, cls, code, message):
    """Invalid nodes (built with onnx.helper: make_node would refuse them) fail inference
    with an exception that is both onnx's InferenceError and spec's error class."""
    node = helper.make_node(op_type, ["go", "x", "t"], ["out"], name="n", domain=spec.DOMAIN)
    node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    inputs = {
        n: helper.make_tensor_type_proto(t, s)
        for n, t, s in zip(("go", "x", "t"), types, shapes, strict=True)
    }
    with pytest.raises(cls, match=message) as info:
        infer_node_outputs(lo.get_schema(op_type), node, inputs)
    assert isinstance(info.value, InferenceError)
    assert info.value.code == code
    assert info.value.op == op_type
    assert info.value.node == "n"
    assert str(info.value).startswith(f"{op_type} node 'n': ")
    assert str(info.value).endswith(f"[aclnn {code} ACLNN_ERR_PARAM_INVALID]")


def graph_model(node, types=(F32, F32, F32), shapes=([], [3], [3])):
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, t, s)
            for n, t, s in zip(("go", "x", "t"), types, shapes, strict=True)
        ],
        [helper.make_tensor_value_info(node.output[0], F32, ["d"])],
    )
    return lo.make_model(graph)


@pytest.mark.parametrize(
    ("op_type", "attrs", "message"),
    [
        (SL1, {"beta": 2}, "attribute 'beta': must be an ONNX FLOAT attribute .* got INT"),
        (KL, {"log_target": 1.0}, "attribute 'log_target': must be an ONNX INT attribute .* FLOAT"),
        (KL, {"reduction": 1}, "attribute 'reduction': must be an ONNX STRING attribute .* INT"),
    ],
)
def test_attribute_type_errors_in_graph_inference(op_type, attrs, message):
    """onnx's node check catches these in infer_node_outputs; in a graph, infer_shapes leaves
    them to our inference function, which reports them by spec's rule with the aclnn code."""
    node = helper.make_node(op_type, ["go", "x", "t"], ["g"], name="n", domain=spec.DOMAIN, **attrs)
    with pytest.raises(AttributeValueError, match=message) as info:
        onnx.shape_inference.infer_shapes(graph_model(node), strict_mode=True)
    assert info.value.code == 161002


def test_missing_and_extra_inputs_in_graph_inference():
    missing = helper.make_node(KL, ["go", "", "t"], ["g"], domain=spec.DOMAIN)
    with pytest.raises(MissingInputError, match=r"KlDivBackward: self: is required \[aclnn 161001"):
        onnx.shape_inference.infer_shapes(graph_model(missing), strict_mode=True)
    extra = helper.make_node(KL, ["go", "x", "t", "t"], ["g"], domain=spec.DOMAIN)
    with pytest.raises(LossGradError, match="input 3: is not an input of KlDivBackward"):
        onnx.shape_inference.infer_shapes(graph_model(extra), strict_mode=True)


def test_errors_propagate_from_infer_shapes_even_when_not_strict():
    node = helper.make_node(SL1, ["go", "x", "t"], ["g"], name="sl", domain=spec.DOMAIN, beta=-2.0)
    for strict in (True, False):
        with pytest.raises(AttributeValueError, match="node 'sl': attribute 'beta'"):
            onnx.shape_inference.infer_shapes(graph_model(node), strict_mode=strict)
