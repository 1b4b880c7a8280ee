"""Which outputs the contract check (tests/fusion/contract.py) bounds like the gradient.

An extra graph output that holds the gradient's own values (the same tensor, read through
value-preserving ops) may differ as the gradient may: the fused node adds its terms in
another order. Every other extra output (an intermediate, a value computed from the
gradient) must keep its value exactly. Found by the differential fuzzer: an inline
KlDivBackward whose ReduceSum result was also a graph output."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.fusion import fuse
from tests.fusion.contract import (
    Subject,
    check_fusion,
    gradient_copies,
    meanings,
    run_fused_reference,
)

F64 = onnx.TensorProto.DOUBLE
# terms -go*t that cancel: the order of the additions decides which of the 1s survive
FEEDS = {
    "grad_output": np.array([1e16, 1.0, -1e16, 1.0]),
    "self": np.zeros((1, 1, 1)),
    "target": np.ones((2, 4), np.float16),
}


def _inline_kl(read: str) -> tuple[onnx.ModelProto, str]:
    """The inline form of KlDivBackward (reduction none, self (1, 1, 1) summed from target
    (2, 4)) with one more output `also`: Identity of the ReduceSum's result ("sum"), of its
    input ("term") or Neg of the gradient ("negated"). Returns the model and the sum's name."""
    inputs = [("grad_output", np.float64, [4]), ("self", np.float64, [1, 1, 1])]
    inputs.append(("target", np.float16, [2, 4]))
    node = lo.make_node(
        "KlDivBackward", list(spec.INPUT_NAMES), "y", name="node", reduction="none", log_target=0
    )
    original = lo.make_model(lo.make_graph([node], inputs, ["y"], name="g"), onnx_opset=15)
    model = compile_model(original, target="onnx", mode="inline").model
    total = next(n for n in model.graph.node if n.op_type == "ReduceSum")
    source = {"sum": total.output[0], "term": total.input[0], "negated": "y"}[read]
    op = "Neg" if read == "negated" else "Identity"
    model.graph.node.append(helper.make_node(op, [source], ["also"]))
    model.graph.output.append(helper.make_tensor_value_info("also", F64, None))
    return model, total.output[0]


def _subject(model: onnx.ModelProto) -> Subject:
    names = {n: n for n in spec.INPUT_NAMES}
    attrs = {"reduction": "none", "log_target": 0}
    return Subject(model, "KlDivBackward", attrs, names, np.float64)


def _moved(model: onnx.ModelProto, output: str) -> onnx.ModelProto:
    """`model` with `output` moved one representable value up (a stand-in fused model)."""
    moved = onnx.ModelProto()
    moved.CopyFrom(model)
    for node in moved.graph.node:
        node.output[:] = [f"{o}_before" if o == output else o for o in node.output]
    after = np.nextafter(1.0, 2.0)
    moved.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(after), "up"))
    moved.graph.node.append(helper.make_node("Mul", [f"{output}_before", "up"], [output]))
    return moved


def test_a_read_out_sum_gets_the_gradients_allowance() -> None:
    """The fuzzer's finding: `also` reads the sum the fused node now computes, in another
    order than numpy's ReduceSum; it is the gradient's value and gets its bound."""
    model, _ = _inline_kl("sum")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fused, report = fuse(model)
    assert [f.op_type for f in report.fused] == ["KlDivBackward"], report.lines()
    original = meanings(model, FEEDS, ["y", "also"])[0]
    ran = run_fused_reference(fused, FEEDS)
    # not vacuous: the fused model's sum is another value than the original's
    assert ran[1].ravel()[0] != original[1].ravel()[0]
    assert gradient_copies(model, FEEDS, "y") == {"y", "also"}
    assert not check_fusion(_subject(model), fused, FEEDS)


@pytest.mark.parametrize("read", ["term", "negated"])
def test_another_extra_output_keeps_bound_zero(read: str) -> None:
    """An intermediate before the sum, or a value computed from the gradient, is no copy of
    the gradient: one ulp off is a broken contract, where the gradient's copy may be."""
    model, _ = _inline_kl(read)
    assert gradient_copies(model, FEEDS, "y") == {"y"}
    problems = check_fusion(_subject(model), _moved(model, "also"), FEEDS)
    assert any("output 'also'" in p for p in problems), problems
    copy, _ = _inline_kl("sum")
    assert not check_fusion(_subject(copy), _moved(copy, "also"), FEEDS)


def _chain(ops: list[tuple[str, list[str], dict]]) -> onnx.ModelProto:
    """s = ReduceSum(x) over axis 0 (shape (1, 1, 2)), then `ops`; outputs y and also."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=1, axes=[0])]
    constants = {
        "same": [1, 1, 2],
        "big": [3, 1, 2],
        "zeros": [0, 0, 0],
        "first": [0],
        "flat": [-1, 2],
        "axes": [0, 1, 2],
        "from_last": [0, 0, -1],
        "past_first": [9, 9, -9],
        "backwards": [1, 1, -1],
        "from_second": [0, 0, 1],
    }
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), k) for k, v in constants.items()]
    nodes += [helper.make_node(op, ins, [out], **attrs) for op, (*ins, out), attrs in ops]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F64, [3, 1, 2])],
        [helper.make_tensor_value_info(n, F64, None) for n in ("y", "also")],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize(
    ("ops", "copies"),
    [
        # the inline mode's tail: Expand to self's shape, Slice of all of it
        ([("Expand", ["s", "same", "e"], {}), ("Slice", ["e", "zeros", "same", "y"], {}),
          ("Identity", ["s", "also"], {})], {"y", "also"}),
        ([("Identity", ["s", "y"], {}), ("Reshape", ["s", "flat", "r"], {}),
          ("Unsqueeze", ["r", "first", "u"], {}), ("Squeeze", ["u", "first", "q"], {}),
          ("Flatten", ["q", "also"], {})], {"y", "also"}),
        # a copy of y is one whatever y's chain is
        ([("Neg", ["s", "y"], {}), ("Identity", ["y", "also"], {})], {"y", "also"}),
        # y repeats the sum's elements: the sum is no copy of y
        ([("Expand", ["s", "big", "y"], {}), ("Identity", ["s", "also"], {})], {"y"}),
        ([("Identity", ["s", "y"], {}), ("Expand", ["s", "big", "also"], {})], {"y"}),
        # a Slice that keeps every element but reverses the last axis
        ([("Slice", ["s", "from_last", "past_first", "axes", "backwards", "y"], {}),
          ("Identity", ["s", "also"], {})], {"y"}),
        ([("Identity", ["s", "y"], {}),
          ("Slice", ["s", "from_second", "same", "axes", "also"], {})], {"y"}),
        ([("Identity", ["s", "y"], {}), ("Neg", ["s", "also"], {})], {"y"}),
        ([("Identity", ["s", "y"], {}), ("Identity", ["x", "also"], {})], {"y"}),
        # the sum before or after a Cast to a float type is the same sum
        ([("Cast", ["s", "y"], {"to": onnx.TensorProto.FLOAT16}),
          ("Identity", ["s", "also"], {})], {"y", "also"}),
        ([("Identity", ["s", "y"], {}), ("Cast", ["s", "also"], {"to": onnx.TensorProto.INT64}),
          ], {"y"}),
    ],
)  # fmt: skip
def test_which_outputs_copy_the_gradient(ops: list, copies: set[str]) -> None:
    model = _chain(ops)
    feeds = {"x": np.arange(6.0).reshape(3, 1, 2)}
    ReferenceEvaluator(model).run(None, feeds)  # a valid graph
    assert gradient_copies(model, feeds, "y") == copies


def test_a_read_out_sum_before_the_cast_to_the_result_type_gets_its_allowance() -> None:
    """The fuzzer's second finding: in float16 the inline form sums in float32 and Casts
    the sum to float16; `also` reads the float32 sum, which the fused node computes in
    another order. It is the gradient in float32 and gets the bound for float32."""
    inputs = [("grad_output", np.float16, [1, 1, 1, 4, 1]), ("self", np.float16, [1, 1, 1])]
    inputs.append(("target", np.float16, [2, 1, 1, 4, 1]))
    node = lo.make_node(
        "KlDivBackward", list(spec.INPUT_NAMES), "y", name="node", reduction="none", log_target=0
    )
    original = lo.make_model(lo.make_graph([node], inputs, ["y"], name="g"), onnx_opset=15)
    model = compile_model(original, target="onnx", mode="inline").model
    total = next(n for n in model.graph.node if n.op_type == "ReduceSum").output[0]
    model.graph.node.append(helper.make_node("Identity", [total], ["also"]))
    model.graph.output.append(helper.make_tensor_value_info("also", onnx.TensorProto.FLOAT, None))
    # terms -(2048 * t): +-2^24 and 1s, which float32 keeps or drops by the order
    row = [8192.0, 2.0**-11, -8192.0, 2.0**-11]
    feeds = {
        "grad_output": np.full((1, 1, 1, 4, 1), 2048, np.float16),
        "self": np.zeros((1, 1, 1), np.float16),
        "target": np.array([row, row], np.float16).reshape(2, 1, 1, 4, 1),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fused, report = fuse(model)
    assert [f.op_type for f in report.fused] == ["KlDivBackward"], report.lines()
    assert [n.op_type for n in fused.graph.node if n.output[0] == "y"] == ["Cast"]
    original_also = meanings(model, feeds, ["also"])[0][0]
    assert run_fused_reference(fused, feeds)[1].ravel()[0] != original_also.ravel()[0]
    assert gradient_copies(model, feeds, "y") == {"y", "also"}
    subject = Subject(
        model, "KlDivBackward", {"reduction": "none", "log_target": 0},
        {n: n for n in spec.INPUT_NAMES}, np.float32,
    )  # fmt: skip
    assert not check_fusion(subject, fused, feeds)
