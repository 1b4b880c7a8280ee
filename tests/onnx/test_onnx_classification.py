"""The classification operators (NLLLossBackward, NLLLoss2dBackward, CrossEntropyLossGrad)
in the ONNX front: their OpSchemas (type constraints, attributes, inference), check_model and
onnx's checkers on valid and invalid nodes, and onnx's ReferenceEvaluator with
lossgrad_compiler's kernels (bit for bit the reference; a bad target raises TARGET_RANGE).
CrossEntropyLossGrad's own errors: test_onnx_cross_entropy.py."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
from onnx import TensorProto, TypeProto, helper
from onnx.checker import ValidationError
from onnx.defs import OpSchema
from onnx.reference import ReferenceEvaluator
from onnx.shape_inference import InferenceError, infer_node_outputs

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.errors import (
    ACLNN_CODE_NAMES,
    AttributeValueError,
    ClassShapeError,
    ElementTypeError,
    InvalidArgumentError,
    LossGradError,
    MissingInputError,
    TargetValueError,
)
from lossgrad_compiler.onnx.schemas import CLASS_FLOAT_PARAM, CLASS_INDEX_PARAM
from tests.helpers.class_cases import (
    ClassCase,
    all_class_cases,
    make_class_case,
    out_of_range_case,
)
from tests.helpers.class_models import VALUE_NAMES, class_feeds, class_model
from tests.helpers.tolerances import bits

F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16
F32, F64 = TensorProto.FLOAT, TensorProto.DOUBLE
I64, I32 = TensorProto.INT64, TensorProto.INT32
NLL, NLL2D = spec.NLL_LOSS_BACKWARD.name, spec.NLL_LOSS_2D_BACKWARD.name
CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
CLASS_OPS = list(spec.CLASS_OPERATORS.values())

pytestmark = pytest.mark.usefixtures("registered_schemas")


def dims(type_proto: TypeProto) -> list[int | str | None] | None:
    if not type_proto.tensor_type.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
        for d in type_proto.tensor_type.shape.dim
    ]


def assert_bit_identical(actual: np.ndarray, expected: np.ndarray, label: str) -> None:
    assert actual.dtype == expected.dtype, label
    assert actual.shape == expected.shape, label
    np.testing.assert_array_equal(bits(actual), bits(expected), err_msg=label)


# --------------------------------------------------------------------------- schemas


SCHEMA_INPUTS: dict[str, list[str]] = {
    NLL: ["grad_output", "self", "target", "total_weight", "weight"],
    NLL2D: ["grad_output", "self", "target", "total_weight", "weight"],
    CE: ["grad_output", "self", "target", "weight"],  # no total_weight: it computes D
}
SCHEMA_VERSIONS = {NLL: 4, NLL2D: 4, CE: 5}


@pytest.mark.parametrize("op", CLASS_OPS, ids=lambda op: op.name)
def test_class_schema_structure(op: spec.OperatorSpec):
    """One type T for every float input and the result (all of self's type), Tind for the
    class indices; ignore_index an INT defaulting to -100; the NLL operators at ai.lossgrad
    version 4, CrossEntropyLossGrad at 5 with a FLOAT label_smoothing defaulting to 0."""
    schema = lo.get_schema(op.name)
    assert (schema.name, schema.domain, schema.since_version) == (
        op.name, spec.DOMAIN, SCHEMA_VERSIONS[op.name],
    )  # fmt: skip
    assert [p.name for p in schema.inputs] == list(op.input_names) == SCHEMA_INPUTS[op.name]
    optional = [p.option == OpSchema.FormalParameterOption.Optional for p in schema.inputs]
    assert optional == [n == "weight" for n in SCHEMA_INPUTS[op.name]]
    params = [p.type_str for p in schema.inputs]
    assert params == [CLASS_INDEX_PARAM if n == "target" else CLASS_FLOAT_PARAM for n in
                      SCHEMA_INPUTS[op.name]]  # fmt: skip
    assert [(p.name, p.type_str) for p in schema.outputs] == [("grad_input", "T")]
    constraints = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    assert constraints == {
        "T": ["tensor(float16)", "tensor(bfloat16)", "tensor(float)", "tensor(double)"],
        "Tind": ["tensor(int64)", "tensor(int32)"],
    }
    smoothing = {"label_smoothing"} if op.name == CE else set()
    assert set(schema.attributes) == {"reduction", "ignore_index"} | smoothing
    ignore = schema.attributes["ignore_index"]
    assert ignore.type == OpSchema.AttrType.INT and not ignore.required
    assert helper.get_attribute_value(ignore.default_value) == -100
    reduction = schema.attributes["reduction"]
    assert reduction.type == OpSchema.AttrType.STRING
    assert helper.get_attribute_value(reduction.default_value) == b"mean"
    if smoothing:
        ls = schema.attributes["label_smoothing"]
        assert ls.type == OpSchema.AttrType.FLOAT and not ls.required
        assert helper.get_attribute_value(ls.default_value) == 0.0
        assert "[0, 1]" in ls.description
    assert op.doc in schema.doc
    assert schema.has_type_and_shape_inference_function


def infer(op_type, types, shapes, values=("go", "x", "t", "tw"), **attrs) -> TypeProto:
    """The inferred output type of one node (built with onnx.helper: any types go)."""
    node = helper.make_node(op_type, list(values), ["out"], name="n", domain=spec.DOMAIN)
    node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    inputs = {
        v: helper.make_tensor_type_proto(t, s) if t is not None else TypeProto()
        for v, t, s in zip(values, types, shapes, strict=True)
        if v
    }
    return infer_node_outputs(lo.get_schema(op_type), node, inputs)["out"]


@pytest.mark.parametrize(
    ("op_type", "shapes", "attrs"),
    [
        (NLL, [[], ["N", 5], ["N"], []], {}),
        (NLL, [["N"], ["N", "C"], ["N"], [1]], {"reduction": "none"}),
        (NLL, [[], [5], [], []], {"reduction": "none"}),  # no batch: one element
        (NLL, [[1], [0, 4], [0], [1]], {"reduction": "sum"}),
        (NLL2D, [[], ["N", "C", "H", "W"], ["N", "H", "W"], []], {"ignore_index": 3}),
        (NLL2D, [[2, 3, 3], [2, 5, 3, 3], [2, 3, 3], []], {"reduction": "none"}),
    ],
)
@pytest.mark.parametrize(("elem", "target"), [(F32, I64), (F16, I32), (BF16, I64), (F64, I32)])
def test_inferred_result_has_selfs_shape_and_type(op_type, shapes, attrs, elem, target):
    out = infer(op_type, [elem, elem, target, elem], shapes, **attrs)
    assert out.tensor_type.elem_type == elem
    assert dims(out) == shapes[1]


def test_inference_with_weight_and_untyped_inputs():
    """The result is self's: an untyped grad_output or target leaves it set (the untyped
    input is validated as a stand-in of self's type, or int64); with self untyped only onnx's
    binding of the shared type T gives it an element type, and no shape."""
    values = ("go", "x", "t", "tw", "w")
    shapes = [[], ["N", 5], ["N"], [], [5]]
    out = infer(NLL, [F16, F16, I32, F16, F16], shapes, values)
    assert (out.tensor_type.elem_type, dims(out)) == (F16, ["N", 5])
    out = infer(NLL, [None, F16, None, F16, F16], shapes, values)
    assert (out.tensor_type.elem_type, dims(out)) == (F16, ["N", 5])
    out = infer(NLL, [F16, None, I64, F16, F16], shapes, values)
    assert (out.tensor_type.elem_type, dims(out)) == (F16, None)


def test_make_node_and_make_graph_infer_the_output():
    node = lo.make_node(NLL2D, ["go", "x", "t", "tw", ""], "g", name="n", ignore_index=-1)
    assert list(node.input) == ["go", "x", "t", "tw"]  # a trailing absent input is left out
    assert lo.attributes_from_node(node) == {"reduction": "mean", "ignore_index": -1}
    assert [a.type for a in node.attribute] == [onnx.AttributeProto.STRING, onnx.AttributeProto.INT]
    inputs = [
        ("go", "float16", []),
        ("x", "float16", ["N", 4, "H", "W"]),
        ("t", np.int32, ["N", "H", "W"]),
        ("tw", "float16", []),
    ]
    graph = lo.make_graph([node], inputs, ["g"])
    assert helper.printable_value_info(graph.output[0]) == "%g[FLOAT16, Nx4xHxW]"


# --------------------------------------------------------------------------- invalid nodes


@dataclass
class Invalid:
    """One invalid node of a one-node model (NLLLossBackward on self [3, 5] unless changed)."""

    id: str
    error: type[LossGradError]
    message: str  # regex on the spec message, after "<op> node 'n': "
    op: str = NLL
    types: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, list] = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    values: tuple[str, ...] = ("go", "x", "t", "tw", "w")
    onnx_checker: str | None = None  # onnx's wording where its C++ checks come first


def _valid_inputs(op: str) -> dict[str, tuple[int, list]]:
    if op == NLL2D:
        x, t = [2, 5, 3, 3], [2, 3, 3]
    else:
        x, t = [3, 5], [3]
    return {"go": (F32, []), "x": (F32, x), "t": (I64, t), "tw": (F32, []), "w": (F32, [5])}


INVALID = [
    Invalid("float target", ElementTypeError,
            "target: element type must be one of int64, int32, got float32", types={"t": F32}),
    Invalid("int8 target", ElementTypeError,
            "target: element type must be one of int64, int32, got int8",
            op=NLL2D, types={"t": TensorProto.INT8}),
    Invalid("uint64 target", ElementTypeError, "target: .* got uint64",
            types={"t": TensorProto.UINT64}),
    Invalid("int64 self", ElementTypeError, "self: element type must be one of float16, .* "
            "got int64", types={"x": I64}),
    Invalid("float16 grad_output", ElementTypeError,
            r"grad_output: element type must be self's \(float32\), got float16",
            types={"go": F16}),
    Invalid("float64 total_weight", ElementTypeError,
            r"total_weight: element type must be self's \(float32\), got float64",
            types={"tw": F64}),
    Invalid("bfloat16 weight", ElementTypeError,
            r"weight: element type must be self's \(bfloat16\), got float16",
            op=NLL2D, types={"go": BF16, "x": BF16, "tw": BF16, "w": F16}),
    Invalid("self of rank 3", ClassShapeError,
            r"self: shape \[2, 5, 3\] must be rank 2 or rank 1 for self \[2, 5, 3\]",
            shapes={"x": [2, 5, 3], "t": [2, 3]}),
    Invalid("2d self of rank 2", ClassShapeError,
            r"self: shape \[3, 5\] must be rank 4 for self \[3, 5\]",
            op=NLL2D, shapes={"x": [3, 5], "t": [3]}),
    Invalid("target rows", ClassShapeError,
            r"target: shape \[4\] must be \[3\] \(self without dimension 1\) for self \[3, 5\]",
            shapes={"t": [4]}),
    Invalid("target rank", ClassShapeError, r"target: shape \[3, 1\] must be \[3\]",
            shapes={"t": [3, 1]}),
    Invalid("2d target", ClassShapeError,
            r"target: shape \[2, 3, 4\] must be \[2, 3, 3\] \(self without dimension 1\)",
            op=NLL2D, shapes={"t": [2, 3, 4]}),
    Invalid("no-batch target", ClassShapeError,
            r"target: shape \[1\] must be \[\] \(self without dimension 0\) for self \[5\]",
            shapes={"x": [5], "t": [1]}),
    Invalid("symbolic target rank", ClassShapeError, r"target: shape \['N', 3\] must be \['N'\]",
            shapes={"x": ["N", 5], "t": ["N", 3]}),
    Invalid("grad_output of none", ClassShapeError,
            r"grad_output: shape \[\] must be \[3\] \(target's, for reduction none\)",
            attrs={"reduction": "none"}),
    Invalid("grad_output of mean", ClassShapeError,
            r"grad_output: shape \[3\] must be one element for self \[3, 5\]",
            shapes={"go": [3]}),
    Invalid("total_weight", ClassShapeError, r"total_weight: shape \[2\] must be one element",
            shapes={"tw": [2]}),
    Invalid("weight", ClassShapeError, r"weight: shape \[4\] must be \[5\] \(one per class\)",
            shapes={"w": [4]}),
    Invalid("missing total_weight", MissingInputError, "total_weight: is required",
            values=("go", "x", "t"), onnx_checker="has input size 3 not in range"),
    Invalid("batchmean", AttributeValueError,
            "attribute 'reduction': must be one of 'none', 'mean', 'sum', got 'batchmean'",
            attrs={"reduction": "batchmean"}),
    Invalid("FLOAT ignore_index", AttributeValueError,
            "attribute 'ignore_index': must be an ONNX INT attribute .* got FLOAT",
            attrs={"ignore_index": 1.0},
            onnx_checker="Mismatched attribute type .* Expected: 'INT', actual: 'FLOAT'"),
]  # fmt: skip


def invalid_model(case: Invalid) -> onnx.ModelProto:
    node = helper.make_node(case.op, list(case.values), ["g"], name="n", domain=spec.DOMAIN)
    node.attribute.extend(helper.make_attribute(k, v) for k, v in case.attrs.items())
    inputs, declared = [], {}
    for value, (elem, shape) in _valid_inputs(case.op).items():
        declared[value] = (case.types.get(value, elem), case.shapes.get(value, shape))
        if value in case.values:
            inputs.append(helper.make_tensor_value_info(value, *declared[value]))
    output = helper.make_tensor_value_info("g", *declared["x"])  # the result is self's
    return lo.make_model(helper.make_graph([node], "g", inputs, [output]))


def assert_spec_error(err: BaseException, case: Invalid) -> None:
    assert isinstance(err, case.error), err
    assert (err.op, err.node) == (case.op, "n")
    assert str(err).startswith(f"{case.op} node 'n': ")
    code = 161001 if case.error is MissingInputError else 161002
    assert err.code == code
    assert str(err).endswith(f"[aclnn {code} {ACLNN_CODE_NAMES[code]}]")


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_check_model_rejects_with_spec_errors(case: Invalid):
    with pytest.raises(case.error, match=case.message) as info:
        lo.check_model(invalid_model(case))
    assert_spec_error(info.value, case)


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_onnx_full_checker_and_strict_inference_reject_them(case: Invalid):
    model = invalid_model(case)
    if case.onnx_checker:
        with pytest.raises(ValidationError, match=case.onnx_checker):
            onnx.checker.check_model(model, full_check=True)
        return
    for check in (
        lambda: onnx.checker.check_model(model, full_check=True),
        lambda: onnx.shape_inference.infer_shapes(model, strict_mode=True),
    ):
        with pytest.raises(case.error, match=case.message) as info:
            check()
        assert isinstance(info.value, InferenceError)
        assert_spec_error(info.value, case)


def test_the_valid_base_model_passes():
    """The models above differ from this valid one in the one thing each case names."""
    for op in (NLL, NLL2D):
        model = invalid_model(Invalid("valid", LossGradError, "", op=op))
        lo.check_model(model)
        onnx.checker.check_model(model, full_check=True)


# --------------------------------------------------------------------------- valid models


CASES = list(all_class_cases())


def _checked_sample() -> list[ClassCase]:
    """Every shape, reduction, weight and target type of both operators, in every float type
    (every third case of the full set, which keeps them all)."""
    return CASES[::3] + [c for c in CASES if c.inputs["target"].dtype == np.int32][::5]


@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
@pytest.mark.parametrize("case", _checked_sample(), ids=lambda c: c.label)
def test_valid_models_pass_both_checkers(case: ClassCase, symbolic: bool):
    model = class_model(case, symbolic=symbolic)
    lo.check_model(model)
    onnx.checker.check_model(model, full_check=True)
    (output,) = model.graph.output
    assert output.type.tensor_type.elem_type == helper.np_dtype_to_tensor_dtype(
        case.inputs["self"].dtype
    )
    assert {o.domain: o.version for o in model.opset_import}[spec.DOMAIN] == SCHEMA_VERSIONS[
        case.op_type
    ]


# --------------------------------------------------------------------------- reference runtime


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_evaluator_equals_reference(case: ClassCase):
    got = lo.run_reference(class_model(case), class_feeds(case))["g"]
    assert_bit_identical(got, case.expected(), case.label)


def test_one_symbolic_model_serves_every_batch_and_class_count():
    first = make_class_case(NLL, (6, 5), np.float32, reduction="none", weighted=True)
    model = class_model(first, symbolic=True)
    for shape in ((6, 5), (0, 5), (1, 3), (4, 9)):
        case = make_class_case(NLL, shape, np.float32, reduction="none", weighted=True, seed=2)
        got = lo.run_reference(model, class_feeds(case))["g"]
        assert_bit_identical(got, case.expected(), case.label)


@pytest.mark.parametrize("target_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("op_type", [NLL, NLL2D])
def test_bad_targets_raise_target_range(op_type: str, target_dtype):
    bad = out_of_range_case(op_type)
    case = make_class_case(
        op_type, bad.inputs["self"].shape, np.float32, reduction="sum",
        targets=bad.inputs["target"], target_dtype=target_dtype,
    )  # fmt: skip
    classes = case.inputs["self"].shape[1]
    message = (
        f"{op_type} node 'n': target: holds 2 value(s) outside [0, {classes}) that are not "
        "ignore_index -100 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]"
    )
    for run in (
        lambda: lo.run_reference(class_model(case), class_feeds(case)),
        lambda: ReferenceEvaluator(class_model(case), new_ops=lo.reference_ops()).run(
            None, class_feeds(case)
        ),
    ):
        with pytest.raises(TargetValueError) as info:
            run()
        assert str(info.value) == message
        assert (info.value.op, info.value.node, info.value.code) == (op_type, "n", 161002)
        assert info.value.argument == "target"


def test_ignore_index_outside_the_classes_is_no_bad_target():
    """-100 (the default) and 7 for C = 5 mark rows as ignored, not as out of range."""
    for ignore in (-100, 7):
        targets = np.array([0, ignore, 4])
        case = make_class_case(NLL, (3, 5), np.float64, ignore_index=ignore, targets=targets)
        got = lo.run_reference(class_model(case), class_feeds(case))["g"]
        assert_bit_identical(got, case.expected(), case.label)
        assert not got[1].any()


def test_evaluator_reports_shape_errors_at_run_time():
    """A symbolic model fed arrays whose sizes contradict each other: spec's error."""
    case = make_class_case(NLL, (4, 5), np.float32, reduction="none")
    feeds = {**class_feeds(case), "t": case.inputs["target"][:3]}
    with pytest.raises(ClassShapeError, match=r"NLLLossBackward node 'n': target: shape \[3\]"):
        lo.run_reference(class_model(case, symbolic=True), feeds)


def test_against_torch_autograd():
    """One independent check per operator: model → evaluator → reference against PyTorch,
    fed the total weight PyTorch's forward returns."""
    pytest.importorskip("torch", reason="needs PyTorch, a test extra: pip install -e '.[test]'")
    from tests.helpers.torch_oracle import with_torch_total_weight

    for op_type, shape in ((NLL, (6, 5)), (NLL2D, (2, 4, 3, 3))):
        case = make_class_case(op_type, shape, np.float32, ignore_index=1, weighted=True)
        inputs, expected = with_torch_total_weight(op_type, case.inputs, case.attrs)
        feeds = {VALUE_NAMES[n]: a for n, a in inputs.items()}
        got = lo.run_reference(class_model(case), feeds)["g"]
        assert_bit_identical(got, expected, case.label)


def test_unknown_inputs_of_a_class_node_are_an_invalid_argument():
    """An input beyond weight is not the operator's (spec names the inputs)."""
    node = helper.make_node(NLL, ["go", "x", "t", "tw", "w", "w"], ["g"], name="n")
    node.domain = spec.DOMAIN
    with pytest.raises(InvalidArgumentError, match="input 5: is not an input of NLLLossBackward"):
        lo.validate_node(node, {})


def test_ignore_index_linked_from_a_function_call():
    """A model-local function's NLLLossBackward takes ignore_index (an INT) from the call:
    the reference runtime and the frontend read the call's value."""
    from lossgrad_compiler.frontend import import_model

    inner = helper.make_node(
        NLL, ["a", "b", "c", "d"], ["o"], domain=spec.DOMAIN, name="inner", reduction="sum"
    )
    inner.attribute.append(
        onnx.AttributeProto(name="ignore_index", ref_attr_name="ii", type=onnx.AttributeProto.INT)
    )
    function = helper.make_function(
        "local", "F", ["a", "b", "c", "d"], ["o"], [inner],
        opset_imports=lo.opset_imports(op_types=[NLL]), attributes=["ii"],
    )  # fmt: skip
    case = make_class_case(NLL, (6, 5), np.float64, reduction="sum", ignore_index=1)
    call = helper.make_node("F", ["go", "x", "t", "tw"], ["g"], domain="local", name="call", ii=1)
    inputs = [
        (VALUE_NAMES[n], case.inputs[n].dtype, list(case.inputs[n].shape)) for n in case.present
    ]
    model = lo.make_model(lo.make_graph([call], inputs, [("g", np.float64, [6, 5])]), [function])
    model.opset_import.append(helper.make_opsetid("local", 1))
    lo.check_model(model)
    got = lo.run_reference(model, class_feeds(case))["g"]
    assert_bit_identical(got, case.expected(), case.label)
    assert not got[::3].any()  # the rows of class 1 (every third) are ignored
    (site,) = import_model(model).sites
    assert site.signature.attributes["ignore_index"] == 1
    assert site.signature.id.endswith("__sum_ignore_index1")
