"""Every validation row of docs/operators.md through lossgrad_compiler.onnx.check_model, onnx's full
checker and strict shape inference; the builders and the strict attribute reader."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import AttributeProto, TensorProto, helper
from onnx.checker import ValidationError
from onnx.shape_inference import InferenceError

from lossgrad_compiler import examples, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.errors import (
    AttributeValueError,
    BroadcastError,
    ElementTypeError,
    InvalidArgumentError,
    LossGradError,
    MissingInputError,
    RankError,
)

F32 = TensorProto.FLOAT
KL, KLT, SL1 = "KlDivBackward", "KlDivTargetBackward", "SmoothL1LossBackward"


pytestmark = pytest.mark.usefixtures("registered_schemas")


@dataclass
class Case:
    """One invalid node in a one-node model, and what each checking path reports."""

    id: str
    op: str
    error: type[LossGradError]
    message: str  # regex on the spec message (after "<op> node 'n': ")
    attrs: dict = field(default_factory=dict)
    types: tuple = (F32, F32, F32)
    shapes: tuple = ([], ["N", 3], [3])
    inputs: tuple = ("go", "x", "t")
    onnx_checker: str | None = None  # onnx's own wording when its C++ checks come first
    caught_by_inference: bool = True


CASES = [
    Case("missing self", KL, MissingInputError, "self: is required", inputs=("go", "", "t"),
         onnx_checker="input 1 is marked single but has an empty string"),
    Case("missing target", SL1, MissingInputError, "target: is required", inputs=("go", "x", ""),
         onnx_checker="input 2 is marked single but has an empty string"),
    Case("int32 self", SL1, ElementTypeError,
         "self: element type must be one of float16, bfloat16, float32, float64, got int32",
         types=(F32, TensorProto.INT32, F32)),
    Case("int64 grad_output", KLT, ElementTypeError, "grad_output: element type .* got int64",
         types=(TensorProto.INT64, F32, F32)),
    Case("float8 target", KL, ElementTypeError, "target: element type .* got float8e4m3fn",
         types=(F32, F32, TensorProto.FLOAT8E4M3FN)),
    Case("string self", KL, ElementTypeError, "self: element type .* got string",
         types=(F32, TensorProto.STRING, F32)),
    Case("rank 9", KL, RankError, "target: rank must be at most 8, got 9",
         shapes=([], [3], [1] * 9)),
    Case("no broadcast", SL1, BroadcastError,
         r"self and target: shapes self \['N', 3\], target \[4\] do not broadcast",
         shapes=([], ["N", 3], [4])),
    Case("grad_output enlarges B", KL, BroadcastError,
         "grad_output: shape .* without enlarging it", shapes=([2, "N", 3], ["N", 3], [3])),
    Case("grad_output enlarges axis", KLT, BroadcastError,
         "grad_output: shape .* without enlarging it", shapes=([4, 1], [1, 3], [3])),
    Case("grad_output no broadcast", SL1, BroadcastError, "grad_output and broadcast",
         shapes=([2], ["N", 3], [3])),
    Case("reduction avg", KL, AttributeValueError,
         "attribute 'reduction': must be one of 'none', 'mean', 'sum', 'batchmean', got 'avg'",
         attrs={"reduction": "avg"}),
    Case("batchmean smooth_l1", SL1, AttributeValueError,
         "attribute 'reduction': must be one of 'none', 'mean', 'sum', got 'batchmean'",
         attrs={"reduction": "batchmean"}),
    Case("log_target 2", KLT, AttributeValueError,
         "attribute 'log_target': must be one of 0, 1, got 2", attrs={"log_target": 2}),
    Case("beta -1", SL1, AttributeValueError,
         r"attribute 'beta': must be a float >= 0 \(not NaN\), got -1.0", attrs={"beta": -1.0}),
    Case("beta NaN", SL1, AttributeValueError, "attribute 'beta': must be .* got nan",
         attrs={"beta": math.nan}),
    Case("INT beta", SL1, AttributeValueError,
         "attribute 'beta': must be an ONNX FLOAT attribute .* got INT", attrs={"beta": 2},
         onnx_checker="Mismatched attribute type .* Expected: 'FLOAT', actual: 'INT'"),
    Case("FLOAT log_target", KL, AttributeValueError,
         "attribute 'log_target': must be an ONNX INT attribute .* got FLOAT",
         attrs={"log_target": 1.0},
         onnx_checker="Mismatched attribute type .* Expected: 'INT', actual: 'FLOAT'"),
    Case("INT reduction", KLT, AttributeValueError,
         "attribute 'reduction': must be an ONNX STRING attribute .* got INT",
         attrs={"reduction": 1},
         onnx_checker="Mismatched attribute type .* Expected: 'STRING', actual: 'INT'"),
    Case("unknown attribute", SL1, AttributeValueError,
         r"attribute 'foo': is not an attribute of SmoothL1LossBackward \(reduction, beta\)",
         attrs={"foo": 1}, onnx_checker="Unrecognized attribute: foo",
         caught_by_inference=False),
    Case("extra input", KL, InvalidArgumentError,
         r"input 3: is not an input of KlDivBackward \(grad_output, self, target\)",
         inputs=("go", "x", "t", "t"), onnx_checker="has input size 4 not in range"),
]  # fmt: skip


def case_model(case: Case) -> onnx.ModelProto:
    node = helper.make_node(case.op, list(case.inputs), ["g"], name="n", domain=spec.DOMAIN)
    node.attribute.extend(helper.make_attribute(k, v) for k, v in case.attrs.items())
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(name, t, s)
            for name, t, s in zip(("go", "x", "t"), case.types, case.shapes, strict=True)
        ],
        [helper.make_tensor_value_info("g", F32, ["d0", "d1"])],
    )
    return lo.make_model(graph)


def _assert_spec_error(err: BaseException, case: Case) -> None:
    assert isinstance(err, case.error)
    assert err.code == case.error.code
    assert err.op == case.op
    assert err.node == "n"
    text = str(err)
    assert text.startswith(f"{case.op} node 'n': ")
    assert text.endswith(f"[aclnn {err.code} {'ACLNN_ERR_PARAM_' + _code_name(err.code)}]")


def _code_name(code: int) -> str:
    return {161001: "NULLPTR", 161002: "INVALID"}[code]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_lossgrad_check_model(case: Case):
    """Our check_model reports every row with spec's error, the node and the aclnn code."""
    with pytest.raises(case.error, match=case.message) as info:
        lo.check_model(case_model(case))
    _assert_spec_error(info.value, case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_onnx_full_checker(case: Case):
    """onnx's own checker rejects every row too; rows its C++ code sees first keep its
    wording, the rest come from our inference function with the aclnn code."""
    model = case_model(case)
    if case.onnx_checker:
        with pytest.raises(ValidationError, match=case.onnx_checker):
            onnx.checker.check_model(model, full_check=True)
    else:
        with pytest.raises(case.error, match=case.message) as info:
            onnx.checker.check_model(model, full_check=True)
        assert isinstance(info.value, InferenceError)
        _assert_spec_error(info.value, case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_strict_shape_inference(case: Case):
    model = case_model(case)
    if not case.caught_by_inference:
        # an inference function can only ask for attributes by name: unknown ones are
        # invisible to it (check_model catches them)
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
        return
    with pytest.raises(case.error, match=case.message) as info:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    assert isinstance(info.value, InferenceError)
    _assert_spec_error(info.value, case)


def test_plain_onnx_checker_does_not_run_inference():
    """Documents why check_model uses full_check: without it, values are not validated."""
    case = next(c for c in CASES if c.id == "beta -1")
    onnx.checker.check_model(case_model(case))


def test_unknown_op_in_the_domain():
    node = helper.make_node("KlDivForward", ["a", "b", "c"], ["g"], name="n", domain=spec.DOMAIN)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(v, F32, [3]) for v in "abc"],
        [helper.make_tensor_value_info("g", F32, [3])],
    )
    with pytest.raises(InvalidArgumentError, match="op_type: must be one of KlDivBackward"):
        lo.check_model(lo.make_model(graph))


# --------------------------------------------------------------------------- valid models


def test_example_model_passes_both_checkers():
    model = examples.example_model()
    lo.check_model(model)
    onnx.checker.check_model(model, full_check=True)


@pytest.mark.parametrize("op_type", [KL, KLT, SL1])
@pytest.mark.parametrize(
    ("types", "shapes"),
    [
        ((F32, F32, F32), ([], ["N", 3], [3])),
        ((TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE), ([1], [2, 3], [2, 1])),
        ((F32, F32, F32), ([], [1] * 8, [])),
        ((F32, F32, F32), ([], [0, 3], [3])),
    ],
)
def test_valid_models_pass(op_type, types, shapes):
    node = lo.make_node(op_type, ["go", "x", "t"], "g", name="n")
    inputs = [("go", types[0], shapes[0]), ("x", types[1], shapes[1]), ("t", types[2], shapes[2])]
    model = lo.make_model(lo.make_graph([node], inputs, ["g"]))
    lo.check_model(model)


def test_check_model_validates_nodes_in_subgraphs():
    inner = helper.make_node(KL, ["go", "x", "t"], ["g"], name="inner", domain=spec.DOMAIN)
    inner.attribute.append(helper.make_attribute("reduction", "avg"))
    branch = helper.make_graph(
        [inner], "branch", [], [helper.make_tensor_value_info("g", F32, [3])]
    )
    cond = helper.make_node("If", ["c"], ["g_out"], then_branch=branch, else_branch=branch)
    graph = helper.make_graph(
        [cond],
        "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
        + [helper.make_tensor_value_info(v, F32, [3]) for v in ("go", "x", "t")],
        [helper.make_tensor_value_info("g_out", F32, [3])],
    )
    # The node's path: the unnamed If is "#0"; onnx's helper sorts else_branch first.
    with pytest.raises(
        AttributeValueError, match="KlDivBackward node '#0/else_branch/inner': attribute"
    ):
        lo.check_model(lo.make_model(graph))


def test_check_model_uses_subgraph_scopes_for_types():
    inner = lo.make_node(KL, ["go", "x", "t"], "g", name="inner")
    branch = helper.make_graph(
        [inner], "branch", [], [helper.make_tensor_value_info("g", F32, [3])]
    )
    cond = helper.make_node("If", ["c"], ["g_out"], then_branch=branch, else_branch=branch)
    inputs = [helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
    graph = helper.make_graph(
        [cond],
        "g",
        [
            *inputs,
            *(helper.make_tensor_value_info(v, F32, [3]) for v in ("go", "x")),
            helper.make_tensor_value_info("t", TensorProto.INT32, [3]),
        ],
        [helper.make_tensor_value_info("g_out", F32, [3])],
    )
    with pytest.raises(ElementTypeError, match=r"node '#0/else_branch/inner': target: .* int32"):
        lo.check_model(lo.make_model(graph))


def test_check_model_still_runs_onnx_checks():
    node = lo.make_node(SL1, ["go", "x", "t"], "g", name="n")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(v, F32, [3]) for v in ("go", "x", "t")],
        [helper.make_tensor_value_info("g", F32, None)],  # an output without a shape field
    )
    with pytest.raises(ValidationError, match="shape"):
        lo.check_model(lo.make_model(graph))


def test_validate_node_with_unknown_input_types():
    node = lo.make_node(SL1, ["go", "x", "t"], "g", name="n", beta=0.25)
    call = lo.validate_node(node, {})
    assert call.attrs == {"reduction": "mean", "beta": 0.25}
    assert call.result_shape is None
    known = {"x": helper.make_tensor_type_proto(TensorProto.FLOAT16, ["N", 2])}
    call = lo.validate_node(node, known)
    assert call.types["self"] is spec.FLOAT16
    assert call.shapes["self"] == ("N", 2)


# --------------------------------------------------------------------------- attributes


def _attr(name, value, attr_type=None):
    return helper.make_attribute(name, value, attr_type=attr_type)


def test_attributes_from_protos_fills_spec_defaults():
    assert lo.attributes_from_protos(KL, []) == spec.KL_DIV_BACKWARD.defaults
    assert lo.attributes_from_protos(SL1, [_attr("beta", 0.0)]) == {
        "reduction": "mean",
        "beta": 0.0,
    }
    assert lo.attributes_from_protos(KLT, [_attr("reduction", b"sum")])["reduction"] == "sum"


def test_attributes_from_protos_keeps_float32_beta_exact():
    """An ONNX FLOAT is 32-bit; its value is widened exactly, never re-rounded."""
    beta = lo.attributes_from_protos(SL1, [_attr("beta", 0.1)])["beta"]
    assert beta == float(np.float32(0.1))
    assert beta != 0.1


@pytest.mark.parametrize(
    ("op_type", "proto", "message"),
    [
        (SL1, _attr("beta", 2), "attribute 'beta': must be an ONNX FLOAT attribute .* got INT"),
        (SL1, _attr("beta", "1.0"), "attribute 'beta': must be an ONNX FLOAT attribute .* STRING"),
        (KL, _attr("log_target", [1]), "attribute 'log_target': must be an ONNX INT .* got INTS"),
        (KL, _attr("log_target", 1.0), "attribute 'log_target': must be an ONNX INT .* got FLOAT"),
        (KLT, _attr("reduction", 0), "attribute 'reduction': must be an ONNX STRING .* got INT"),
        (SL1, _attr("foo", 1.0), "attribute 'foo': is not an attribute of SmoothL1LossBackward"),
        (SL1, _attr("beta", -0.5), "attribute 'beta': must be a float >= 0"),
        (KL, _attr("reduction", "Mean"), "attribute 'reduction': must be one of"),
    ],
)
def test_attributes_from_protos_is_strict(op_type, proto, message):
    with pytest.raises(AttributeValueError, match=message) as info:
        lo.attributes_from_protos(op_type, [proto])
    assert info.value.code == 161002


def test_attributes_given_twice():
    with pytest.raises(AttributeValueError, match="attribute 'beta': is given more than once"):
        lo.attributes_from_protos(SL1, [_attr("beta", 1.0), _attr("beta", 2.0)])


def test_linked_attributes():
    ref = AttributeProto(name="beta", ref_attr_name="fn_beta", type=AttributeProto.FLOAT)
    assert lo.attributes_from_protos(SL1, [ref], linked={"fn_beta": 0.5})["beta"] == 0.5
    with pytest.raises(AttributeValueError, match="refers to the function attribute 'fn_beta'"):
        lo.attributes_from_protos(SL1, [ref])
    with pytest.raises(AttributeValueError, match=r"got -1\.0"):
        lo.attributes_from_protos(SL1, [ref], linked={"fn_beta": -1.0})


def test_unknown_op_type():
    with pytest.raises(InvalidArgumentError, match="op_type: must be one of"):
        lo.attributes_from_protos("L1Loss", [])


# --------------------------------------------------------------------------- builders


@pytest.mark.parametrize("op", spec.OPERATORS.values(), ids=lambda op: op.name)
def test_make_node_writes_every_attribute(op: spec.OperatorSpec):
    required = [f"v{k}" for k, i in enumerate(op.inputs) if not i.optional]
    node = lo.make_node(op.name, required, "out", name="n")
    assert (node.op_type, node.domain, node.name) == (op.name, spec.DOMAIN, "n")
    assert list(node.input) == required and list(node.output) == ["out"]
    assert [a.name for a in node.attribute] == [a.name for a in op.attributes]
    assert [a.type for a in node.attribute] == [a.kind.onnx_code for a in op.attributes]
    assert lo.attributes_from_node(node) == op.defaults


def test_make_node_takes_inputs_by_name_and_attributes():
    node = lo.make_node(
        SL1, {"target": "t", "self": "x", "grad_output": "go"}, ["g"], reduction="sum", beta=0
    )
    assert list(node.input) == ["go", "x", "t"]
    assert lo.attributes_from_node(node) == {"reduction": "sum", "beta": 0.0}
    assert node.attribute[1].type == AttributeProto.FLOAT  # an int beta is written as FLOAT


@pytest.mark.parametrize(
    ("inputs", "attrs", "error", "message"),
    [
        (["go", "", "t"], {}, MissingInputError, "self: is required"),
        (["go", "x"], {}, MissingInputError, "target: is required"),
        ({"grad_output": "go", "self": "x"}, {}, MissingInputError, "target: is required"),
        (["go", "x", "t", "u"], {}, InvalidArgumentError, "input 3: is not an input"),
        ({"grad_output": "a", "self": "b", "target": "c", "weight": "w"}, {},
         InvalidArgumentError, "weight: is not an input"),
        (["go", "x", "t"], {"reduction": "avg"}, AttributeValueError, "got 'avg'"),
        (["go", "x", "t"], {"log_target": 2}, AttributeValueError, "got 2"),
        (["go", "x", "t"], {"beta": 1.0}, AttributeValueError, "'beta': is not an attribute"),
        (["go", "x", "t"], {"reduction": 3}, AttributeValueError, "must be a string"),
    ],
)  # fmt: skip
def test_make_node_rejects_invalid_calls(inputs, attrs, error, message):
    with pytest.raises(error, match=message):
        lo.make_node(KL, inputs, "g", **attrs)


def test_make_node_rejects_unknown_op():
    with pytest.raises(InvalidArgumentError, match="op_type"):
        lo.make_node("Relu", ["a", "b", "c"], "g")


def test_make_graph_infers_named_outputs():
    nodes = [
        lo.make_node(SL1, ["go", "x", "t"], "g1", reduction="none"),
        lo.make_node(SL1, ["go", "p", "q"], "g2", reduction="none"),
    ]
    inputs = [
        ("go", "float16", []),
        ("x", "float32", ["N", 3]),
        ("t", "float16", [1, 3]),
        ("p", "float32", ["A"]),
        ("q", "float32", ["B"]),
    ]
    graph = lo.make_graph(nodes, inputs, ["g1", ("g2", "float32", ["k"])])
    out1, out2 = graph.output
    assert helper.printable_value_info(out1) == "%g1[FLOAT, Nx3]"
    assert helper.printable_value_info(out2) == "%g2[FLOAT, k]"
    # two different symbolic names broadcast to an unknown dim: onnx gives it a fresh name
    graph = lo.make_graph(nodes, inputs, ["g2"])
    (dim,) = graph.output[0].type.tensor_type.shape.dim
    assert dim.dim_param not in ("", "A", "B")


def test_make_graph_refuses_outputs_of_unknown_rank():
    node = lo.make_node(KL, ["go", "x", "t"], "g")
    inputs = [("go", "float32", []), ("x", "float32", None), ("t", "float32", [3])]
    with pytest.raises(ValueError, match="rank of graph output 'g' cannot be inferred"):
        lo.make_graph([node], inputs, ["g"])


def test_make_model_versions_and_onnxruntime_accepts_them():
    model = lo.make_model(
        lo.make_graph(
            [helper.make_node("Mul", ["a", "b"], ["c"])],
            [("a", np.float32, ["N"]), ("b", spec.FLOAT32, ["N"])],
            [("c", TensorProto.FLOAT, ["N"])],
        )
    )
    assert model.ir_version == lo.IR_VERSION == 10
    assert {(o.domain, o.version) for o in model.opset_import} == {
        ("", lo.ONNX_OPSET),
        (spec.DOMAIN, 1),  # no ai.lossgrad operator: the smallest version
    }
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    a = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(session.run(None, {"a": a, "b": a})[0], a * a)
