"""The ONNX frontend: finding ai.lossgrad nodes in every scope, typing and validating them
(errors name the node), grouping them by signature, and the level-1 IR per signature."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper

from lossgrad_compiler import errors, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.frontend import import_model, lossgrad_module
from lossgrad_compiler.frontend.signature import signature_of

F32, F64, F16 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16
KL, KLT, SL1 = "KlDivBackward", "KlDivTargetBackward", "SmoothL1LossBackward"


def vi(name: str, elem: int, shape: list[Any] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model_of(nodes, inputs, outputs, functions=(), opsets=None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    imports = opsets or [
        helper.make_opsetid("", 21),
        helper.make_opsetid(spec.DOMAIN, 1),
        helper.make_opsetid("local", 1),
    ]
    return helper.make_model(graph, ir_version=10, opset_imports=imports, functions=list(functions))


def single(op_type: str, shapes, elem=F32, **attrs) -> onnx.ModelProto:
    node = lo.make_node(op_type, ["go", "x", "t"], "y", name="the_node", **attrs)
    inputs = [vi(n, elem, s) for n, s in zip(("go", "x", "t"), shapes, strict=True)]
    return model_of([node], inputs, [vi("y", elem, None)])


# --------------------------------------------------------------------------- signatures


def test_identical_nodes_of_any_size_share_one_signature():
    nodes, inputs = [], []
    for i, n in enumerate((2, 5, "N", 0)):
        nodes.append(lo.make_node(SL1, [f"go{i}", f"x{i}", f"t{i}"], f"y{i}", beta=0.5))
        inputs += [vi(f"go{i}", F32, []), vi(f"x{i}", F32, [n, 3]), vi(f"t{i}", F32, [1, 3])]
    imported = import_model(model_of(nodes, inputs, [vi(f"y{i}", F32, None) for i in range(4)]))
    assert len(imported.sites) == 4
    assert list(imported.signatures) == [
        "smooth_l1_loss_backward__f32_f32_f32__0d_dxd_1xd__mean_beta0p5"
    ]
    expected = {name: 4 if name == SL1 else 0 for name in spec.OPERATORS}
    assert imported.nodes_per_operator() == expected


@pytest.mark.parametrize(
    "change",
    [
        {"attrs": {"reduction": "sum"}},
        {"attrs": {"log_target": 1}},
        {"elem": F64},
        {"shapes": ([], [4, 3], [4, 3])},  # no broadcast
        {"shapes": ([], [2, 4, 3], [1, 3])},  # another rank
        {"shapes": ([1], [4, 3], [1, 3])},  # grad_output of rank 1
    ],
)
def test_signatures_differ_in_attributes_types_ranks_and_broadcasts(change):
    base = {"shapes": ([], [4, 3], [1, 3]), "elem": F32, "attrs": {}}
    first = import_model(single(KL, base["shapes"], base["elem"], **base["attrs"]))
    merged = {**base, **change}
    second = import_model(single(KL, merged["shapes"], merged["elem"], **merged["attrs"]))
    assert list(first.signatures) != list(second.signatures)


@pytest.mark.parametrize(
    "op_type,shapes,patterns",
    [
        (KL, ([], [4, 1], [4, 3]), ((), (None, 1), (None, None))),
        (KL, ([], [1, 3], [1, 3]), ((), (None, None), (None, None))),
        (KL, ([1], [4, 3], [3]), ((1,), (None, None), (None,))),
        (KL, (["N"], [1], [1]), ((None,), (None,), (None,))),  # grad_output is no loop of KL
        (KLT, ([], ["N", 3], [1, 3]), ((), (None, None), (1, None))),
        (KLT, ([], [0, 3], [1, 3]), ((), (None, None), (1, None))),  # 1 against an empty dim
        (SL1, ([5], [1], [1]), ((None,), (1,), (1,))),  # SmoothL1 loops over grad_output too
        (SL1, ([3, 1, 1], [2, 1], [2, 4]), ((None, 1, 1), (None, 1), (None, None))),
    ],
)
def test_broadcast_pattern_keeps_only_broadcast_ones(op_type, shapes, patterns):
    imported = import_model(single(op_type, shapes))
    assert imported.sites[0].signature.patterns == patterns


def test_signature_id_is_readable_and_a_symbol():
    imported = import_model(single(SL1, ([], [4, 3], [3]), F16, reduction="sum", beta=0.125))
    assert list(imported.signatures) == [
        "smooth_l1_loss_backward__f16_f16_f16__0d_dxd_d__sum_beta0p125"
    ]


def test_float_attribute_keeps_the_float32_value_in_the_signature():
    imported = import_model(single(SL1, ([], [3], [3]), beta=0.1))
    assert imported.sites[0].signature.attributes["beta"] == float(np.float32(0.1))


# --------------------------------------------------------------------------- scopes


def if_model() -> onnx.ModelProto:
    then_node = lo.make_node(KL, ["go", "x", "e"], "k", name="kl_then", reduction="sum")
    then = helper.make_graph(
        [helper.make_node("Exp", ["t"], ["e"]), then_node], "then", [], [vi("k", F32, None)]
    )
    else_node = lo.make_node(SL1, ["go", "x", "t"], "s", name="sl1_else")
    other = helper.make_graph([else_node], "else", [], [vi("s", F32, None)])
    node = helper.make_node("If", ["c"], ["y"], name="if1", then_branch=then, else_branch=other)
    inputs = [vi("c", TensorProto.BOOL, []), vi("go", F32, []), vi("x", F32, ["N", 3])]
    return model_of([node], [*inputs, vi("t", F32, [1, 3])], [vi("y", F32, None)])


def test_nodes_in_if_branches_are_found_and_typed():
    imported = import_model(if_model())
    found = {s.location: s.signature.id for s in imported.sites}
    assert found == {
        "if1/then_branch/kl_then": "kl_div_backward__f32_f32_f32__0d_dxd_1xd__sum_log_target0",
        "if1/else_branch/sl1_else": (
            "smooth_l1_loss_backward__f32_f32_f32__0d_dxd_1xd__mean_beta1p0"
        ),
    }
    assert {s.depth for s in imported.sites} == {1}


def loop_model() -> onnx.ModelProto:
    """A Loop whose body reads the loop-carried value (body inputs declared without types)."""
    sl1 = lo.make_node(SL1, ["go", "acc_in", "t"], "grad", name="sl1_in_loop", beta=0.0)
    body = helper.make_graph(
        [sl1, helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.ValueInfoProto(name=n) for n in ("i", "cond_in", "acc_in")],
        [vi("cond_out", TensorProto.BOOL, []), vi("grad", F64, None)],
    )
    loop = helper.make_node("Loop", ["n", "", "x"], ["final"], name="loop1", body=body)
    inputs = [vi("n", TensorProto.INT64, []), vi("go", F64, []), vi("x", F64, [2, 5])]
    return model_of([loop], [*inputs, vi("t", F64, [5])], [vi("final", F64, None)])


def test_nodes_in_loop_bodies_get_the_loop_carried_types():
    (site,) = import_model(loop_model()).sites
    assert site.location == "loop1/body/sl1_in_loop"
    assert site.signature.id == "smooth_l1_loss_backward__f64_f64_f64__0d_dxd_d__mean_beta0p0"


def function_model(second_call_elem: int = F32) -> onnx.ModelProto:
    """A local function whose ai.lossgrad node takes `beta` from the call, called twice."""
    inner = lo.make_node(SL1, ["a", "b", "c"], "o", name="sl1_in_function")
    beta = next(a for a in inner.attribute if a.name == "beta")
    beta.ClearField("f")
    beta.ref_attr_name = "beta"
    function = helper.make_function(
        "local",
        "Grad",
        ["a", "b", "c"],
        ["o"],
        [inner],
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(spec.DOMAIN, 1)],
        attributes=["beta"],
    )
    calls = [
        helper.make_node("Grad", ["go", "x", "t"], ["y1"], domain="local", name="c1", beta=0.25),
        helper.make_node("Grad", ["go2", "x2", "t2"], ["y2"], domain="local", name="c2", beta=0.25),
    ]
    inputs = [vi("go", F32, []), vi("x", F32, [4, 3]), vi("t", F32, [3])]
    inputs += [vi("go2", second_call_elem, []), vi("x2", F32, [7, 3]), vi("t2", F32, [3])]
    outputs = [vi("y1", F32, None), vi("y2", F32, None)]
    return model_of(calls, inputs, outputs, functions=[function])


def test_nodes_in_functions_are_typed_per_call_with_attributes_from_the_call():
    (site,) = import_model(function_model()).sites
    assert site.location == "local.Grad/sl1_in_function"
    assert site.signature.attributes["beta"] == 0.25
    assert site.signature.types == (spec.FLOAT32,) * 3


def test_a_function_called_with_two_signatures_is_rejected_naming_the_node():
    with pytest.raises(
        errors.InvalidArgumentError, match=r"local\.Grad/sl1_in_function.*different"
    ):
        import_model(function_model(second_call_elem=F64))


def test_types_come_from_shape_inference_when_not_declared():
    """self is computed by Relu; the second node reads the first node's result."""
    nodes = [
        helper.make_node("Relu", ["x"], ["rx"]),
        lo.make_node(KL, ["go", "rx", "t"], "g1", name="first"),
        lo.make_node(SL1, ["go", "g1", "t"], "g2", name="second"),
    ]
    inputs = [vi("go", F16, []), vi("x", F16, ["N", 6]), vi("t", F16, [6])]
    imported = import_model(model_of(nodes, inputs, [vi("g2", F16, None)]))
    assert [s.signature.id for s in imported.sites] == [
        "kl_div_backward__f16_f16_f16__0d_dxd_d__mean_log_target0",
        "smooth_l1_loss_backward__f16_f16_f16__0d_dxd_d__mean_beta1p0",
    ]


# --------------------------------------------------------------------------- errors


def raw_node(op_type: str, inputs=("go", "x", "t"), outputs=("y",), **attrs) -> onnx.NodeProto:
    return helper.make_node(
        op_type, list(inputs), list(outputs), name="bad", domain=spec.DOMAIN, **attrs
    )


def raw_model(node, shapes=([], [4, 3], [4, 3]), elems=(F32, F32, F32)):
    inputs = [vi(n, e, s) for n, e, s in zip(("go", "x", "t"), elems, shapes, strict=True)]
    return model_of([node], inputs, [vi(o, F32, None) for o in node.output if o])


def _with_ref_attribute() -> onnx.NodeProto:
    node = raw_node(SL1)
    node.attribute.append(AttributeProto(name="beta", ref_attr_name="b", type=AttributeProto.FLOAT))
    return node


INVALID = {
    "unknown attribute": (
        lambda: raw_model(raw_node(KL, foo=1)),
        errors.AttributeValueError,
        "foo",
    ),
    "attribute type": (
        lambda: raw_model(raw_node(SL1, beta=1)),
        errors.AttributeValueError,
        "beta",
    ),
    "attribute value": (
        lambda: raw_model(raw_node(KL, reduction="avg")),
        errors.AttributeValueError,
        "avg",
    ),
    "negative beta": (
        lambda: raw_model(raw_node(SL1, beta=-1.0)),
        errors.AttributeValueError,
        "beta",
    ),
    "broadcast": (
        lambda: raw_model(raw_node(KL), ([], [4, 3], [5, 3])),
        errors.BroadcastError,
        "do not broadcast",
    ),
    "enlarging grad_output": (
        lambda: raw_model(raw_node(KLT), ([2, 4, 3], [4, 3], [4, 3])),
        errors.BroadcastError,
        "enlarging",
    ),
    "missing input": (
        lambda: raw_model(raw_node(KL, inputs=("go", "", "t")), ([], [4, 3], [4, 3])),
        errors.MissingInputError,
        "self",
    ),
    "two inputs": (
        lambda: model_of(
            [raw_node(KL, inputs=("go", "x"))], [vi("go", F32, []), vi("x", F32, [3])], []
        ),
        errors.MissingInputError,
        "target",
    ),
    "rank 9": (lambda: raw_model(raw_node(KL), ([], [1] * 9, [3])), errors.RankError, "rank"),
    "element type": (
        lambda: raw_model(raw_node(KL), elems=(F32, TensorProto.INT32, F32)),
        errors.ElementTypeError,
        "int32",
    ),
    "unknown rank": (
        lambda: raw_model(raw_node(KL), ([], None, [3])),
        errors.InvalidArgumentError,
        "rank is unknown",
    ),
    "two outputs": (
        lambda: raw_model(raw_node(KL, outputs=("y", "z"))),
        errors.InvalidArgumentError,
        "exactly one output",
    ),
    "unknown operator": (
        lambda: raw_model(raw_node("KlDivForward")),
        errors.InvalidArgumentError,
        "must be one of KlDivBackward",
    ),
    "unbound attribute reference": (
        lambda: raw_model(_with_ref_attribute()),
        errors.AttributeValueError,
        "function attribute",
    ),
}


@pytest.mark.parametrize("via_relu", [False, True], ids=["declared", "inferred"])
@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_invalid_nodes_raise_spec_errors_naming_the_node(case, via_relu):
    build, error, words = INVALID[case]
    model = build()
    # "inferred": self computed by a standard node, so its type comes from shape inference
    if via_relu and case not in ("two inputs", "missing input", "unknown rank"):
        x = next(i for i in model.graph.input if i.name == "x")
        x.name = "x_in"
        model.graph.node.insert(0, helper.make_node("Identity", ["x_in"], ["x"]))
    with pytest.raises(error) as info:
        import_model(model)
    message = str(info.value)
    assert "'bad'" in message and words in message
    assert "\n" not in message
    expected_code = (
        errors.ACLNN_ERR_PARAM_NULLPTR
        if error is errors.MissingInputError
        else errors.ACLNN_ERR_PARAM_INVALID
    )
    assert info.value.code == expected_code
    assert f"aclnn {expected_code}" in message


def test_untyped_input_is_an_error_naming_the_value():
    node = lo.make_node(KL, ["go", "u", "t"], "y", name="bad")
    producer = helper.make_node("Unknown", ["x"], ["u"], domain="elsewhere")
    inputs = [vi("go", F32, []), vi("x", F32, [3]), vi("t", F32, [3])]
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(spec.DOMAIN, 1)]
    opsets.append(helper.make_opsetid("elsewhere", 1))
    model = model_of([producer, node], inputs, [vi("y", F32, None)], opsets=opsets)
    with pytest.raises(errors.InvalidArgumentError, match=r"'bad'.*element type of 'u' is unknown"):
        import_model(model)


def test_unnamed_nodes_are_named_by_position():
    node = raw_node(KL, foo=1)
    node.name = ""
    with pytest.raises(errors.LossGradError, match="node '#0'"):
        import_model(raw_model(node))


# --------------------------------------------------------------------------- level-1 IR


def test_each_signature_becomes_one_verified_function():
    imported = import_model(if_model())
    module = lossgrad_module(imported.signatures.values())
    module.verify()
    functions = list(module.body.block.ops)
    assert [f.sym_name.data for f in functions] == list(imported.signatures)
    kl = next(f for f in functions if f.sym_name.data.startswith("kl_div_backward"))
    assert [str(t) for t in kl.function_type.inputs] == [
        "tensor<f32>",
        "tensor<?x?xf32>",
        "tensor<1x?xf32>",
    ]
    (op, ret) = list(kl.body.block.ops)
    assert op.name == "lossgrad.kl_div_backward" and op.onnx_attributes()["reduction"] == "sum"
    assert ret.name == "func.return"


def test_signature_of_needs_known_ranks():
    call = spec.validate(KL, {n: spec.TensorInfo("float32", None) for n in spec.INPUT_NAMES}, {})
    with pytest.raises(ValueError, match="rank"):
        signature_of(call)


# --------------------------------------------------------------------------- inferred types


def relu_function_model() -> onnx.ModelProto:
    """A model-local function called with a Relu output; its body's node reads another Relu
    output of the body (neither value has a declared type)."""
    body = [
        helper.make_node("Relu", ["a"], ["xr"]),
        lo.make_node(KL, ["go", "xr", "t"], "g", name="kl", reduction="sum"),
    ]
    imports = [helper.make_opsetid("", 21), helper.make_opsetid(spec.DOMAIN, 1)]
    function = helper.make_function("local", "Grad", ["go", "a", "t"], ["g"], body, imports)
    nodes = [
        helper.make_node("Relu", ["x"], ["xa"], name="relu"),
        helper.make_node("Grad", ["go", "xa", "t"], ["y"], domain="local", name="call"),
    ]
    inputs = [vi("go", F32, []), vi("x", F32, ["N", 4]), vi("t", F32, ["N", 4])]
    return model_of(nodes, inputs, [vi("y", F32, ["N", 4])], functions=[function])


def outer_intermediate_if_model() -> onnx.ModelProto:
    """An If branch whose node reads a Relu output of the enclosing graph."""
    inner = lo.make_node(KL, ["go", "xr", "t"], "gi", name="inner", reduction="sum")
    then = helper.make_graph([inner], "then", [], [vi("gi", F32, None)])
    other = helper.make_graph(
        [helper.make_node("Neg", ["xr"], ["ge"])], "else", [], [vi("ge", F32, None)]
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["xr"], name="relu"),
        helper.make_node("If", ["c"], ["y"], name="if1", then_branch=then, else_branch=other),
    ]
    inputs = [vi("c", TensorProto.BOOL, []), vi("go", F32, []), vi("x", F32, ["N", 4])]
    return model_of(nodes, [*inputs, vi("t", F32, ["N", 4])], [vi("y", F32, ["N", 4])])


@pytest.mark.parametrize("mode", ["functions", "inline"])
@pytest.mark.parametrize(
    "make_model", [relu_function_model, outer_intermediate_if_model], ids=["function", "if"]
)
def test_nodes_reading_intermediate_values_get_their_inferred_types(make_model, mode):
    """onnx's shape inference types both values, its checker passes, ONNX Runtime runs the
    compiled model; the result is the contract's."""
    from lossgrad_compiler import reference
    from lossgrad_compiler.driver import compile_model
    from lossgrad_compiler.runtime.ort_io import make_session, run_session

    model = make_model()
    lo.check_model(model)
    (site,) = import_model(model).sites
    assert site.signature.id == "kl_div_backward__f32_f32_f32__0d_dxd_dxd__sum_log_target0"
    rng = np.random.default_rng(0)
    x, t = (
        rng.normal(size=(3, 4)).astype(np.float32),
        rng.uniform(0.1, 1, (3, 4)).astype(np.float32),
    )
    feeds = {"c": np.array(True), "go": np.array(2.0, np.float32), "x": x, "t": t}
    session = make_session(compile_model(model, mode=mode).model)
    got = run_session(
        session, {k: v for k, v in feeds.items() if k in {i.name for i in session.get_inputs()}}
    )
    named = {"grad_output": feeds["go"], "self": np.maximum(x, 0), "target": t}
    expected = reference.evaluate(KL, named, {"reduction": "sum"})
    np.testing.assert_array_equal(got[0], expected)


# --------------------------------------------------------------------------- error locations


def branch_model(inner: onnx.NodeProto, t_elem: int = F32, shapes=(["N", 4], ["N", 4])):
    """`inner` (named "inner", output "gi") in the then-branch of If "if1"; x is also read
    through a Relu in the enclosing graph ("xr")."""
    then = helper.make_graph([inner], "then", [], [vi("gi", F32, None)])
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["ge"])], "else", [], [vi("ge", F32, None)]
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["xr"], name="relu"),
        helper.make_node("If", ["c"], ["y"], name="if1", then_branch=then, else_branch=other),
    ]
    inputs = [vi("c", TensorProto.BOOL, []), vi("go", F32, []), vi("x", F32, shapes[0])]
    return model_of(nodes, [*inputs, vi("t", t_elem, shapes[1])], [vi("y", F32, None)])


BRANCH_ERRORS = {
    "attribute": (dict(reduction="avg"), {}, errors.AttributeValueError, "attribute 'reduction'"),
    "unknown attribute": (dict(colour=3), {}, errors.AttributeValueError, "attribute 'colour'"),
    "element type": (
        {},
        dict(t_elem=TensorProto.INT32),
        errors.ElementTypeError,
        "target: element",
    ),
    "broadcast": ({}, dict(shapes=([2, 4], [3, 4])), errors.BroadcastError, "do not broadcast"),
}


@pytest.mark.parametrize("self_value", ["x", "xr"], ids=["declared", "intermediate"])
@pytest.mark.parametrize("case", list(BRANCH_ERRORS))
def test_errors_inside_if_branches_name_the_node_by_its_path(case, self_value):
    from lossgrad_compiler.driver import compile_model

    attrs, model_args, error, message = BRANCH_ERRORS[case]
    inner = raw_node(KL, inputs=("go", self_value, "t"), outputs=("gi",), **attrs)
    inner.name = "inner"
    model = branch_model(inner, **model_args)
    where = re.escape("KlDivBackward node 'if1/then_branch/inner': ") + ".*" + message
    with pytest.raises(error, match=where):
        compile_model(model)
    with pytest.raises(error, match=where):
        lo.check_model(model)


def test_a_missing_input_inside_an_if_branch_names_the_path():
    from lossgrad_compiler.driver import compile_model

    inner = raw_node(KL, inputs=("go", "", "t"), outputs=("gi",))
    inner.name = "inner"
    with pytest.raises(
        errors.MissingInputError, match="node 'if1/then_branch/inner': self: is required"
    ):
        compile_model(branch_model(inner))


def test_an_error_upstream_of_an_untyped_input_is_reported_first():
    """The function's invalid node leaves its output untyped; the node that reads it comes
    first in the graph, yet the report names the cause."""
    bad = raw_node(KL, inputs=("a", "b", "c"), outputs=("o",), reduction="avg")
    bad.name = "bad"
    imports = [helper.make_opsetid("", 21), helper.make_opsetid(spec.DOMAIN, 1)]
    function = helper.make_function("local", "F", ["a", "b", "c"], ["o"], [bad], imports)
    nodes = [
        helper.make_node("F", ["go", "x", "t"], ["f"], domain="local", name="call"),
        lo.make_node(SL1, ["go", "f", "t"], "y", name="reader"),
    ]
    inputs = [vi("go", F32, []), vi("x", F32, [2]), vi("t", F32, [2])]
    model = model_of(nodes, inputs, [vi("y", F32, None)], functions=[function])
    with pytest.raises(
        errors.AttributeValueError, match=r"node 'local\.F/bad': attribute 'reduction'"
    ):
        import_model(model)


def test_errors_inside_function_bodies_name_the_path_in_both_checkers():
    """onnx's full checker types the body per call and reports the node by name alone."""
    from lossgrad_compiler.driver import compile_model

    body = [lo.make_node(KL, ["a", "b", "c"], "o", name="kl")]
    imports = [helper.make_opsetid("", 21), helper.make_opsetid(spec.DOMAIN, 1)]
    function = helper.make_function("local", "F", ["a", "b", "c"], ["o"], body, imports)
    call = helper.make_node("F", ["go", "x", "t"], ["y"], domain="local", name="call")
    inputs = [vi("go", F32, []), vi("x", F32, [2, 4]), vi("t", F32, [3, 4])]
    model = model_of([call], inputs, [vi("y", F32, [2, 4])], functions=[function])
    where = r"KlDivBackward node 'local\.F/kl': self and target: .* do not broadcast"
    with pytest.raises(errors.BroadcastError, match=where):
        compile_model(model)
    with pytest.raises(errors.BroadcastError, match=where):
        lo.check_model(model)
