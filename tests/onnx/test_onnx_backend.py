"""The ONNX backend on its own: level-2 IR (hand-written, or from lower-lossgrad) translated
to standard ONNX, run in ONNX Runtime; minimal graphs; errors for IR outside the op list;
opsets; the functions and inline forms of a model."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from xdsl.dialects import func

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import reference, spec
from lossgrad_compiler.backends.onnx import translate_function
from lossgrad_compiler.backends.onnx.names import UniqueNames
from lossgrad_compiler.backends.onnx.types import element_type_of, static_shape
from lossgrad_compiler.context import make_context, parse_module
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.errors import InvalidArgumentError
from lossgrad_compiler.level2 import Level2ContractError
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from lossgrad_compiler.runtime.ort_io import (
    from_ort_value,
    make_session,
    run_session,
    to_ort_value,
)
from tests.helpers.tolerances import TIGHT, assert_matches


def only_function(text: str, lower: bool = False) -> func.FuncOp:
    module = parse_module(text)
    if lower:
        LowerLossgradPass().apply(make_context(), module)
    (function,) = module.body.block.ops
    assert isinstance(function, func.FuncOp)
    return function


def function_model(function: func.FuncOp) -> onnx.ModelProto:
    """A model computing `function`, with inputs a0, a1, ... and output r."""
    names = [f"a{i}" for i in range(len(function.args))]
    translated = translate_function(function, names, ["r"])
    inputs = [
        helper.make_tensor_value_info(
            name,
            element_type_of(arg.type),
            [d if d is not None else f"{name}_{j}" for j, d in enumerate(static_shape(arg.type))],
        )
        for name, arg in zip(names, function.args, strict=True)
    ]
    (result_type,) = function.function_type.outputs
    rank = len(static_shape(result_type))
    output = helper.make_tensor_value_info(
        "r", element_type_of(result_type), [f"r_{j}" for j in range(rank)]
    )
    graph = helper.make_graph(list(translated.nodes), "f", inputs, [output])
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 21)])
    onnx.checker.check_model(model, full_check=True)
    return model


def run_function(function: func.FuncOp, *arrays: np.ndarray) -> np.ndarray:
    session = make_session(function_model(function))
    return run_session(session, {f"a{i}": a for i, a in enumerate(arrays)})[0]


def op_types(function: func.FuncOp) -> list[str]:
    return [n.op_type for n in translate_function(function, ["a", "b", "c"], ["r"]).nodes]


# --------------------------------------------------------------------------- lowered ops


@pytest.mark.parametrize(
    "op_type,attrs,shapes",
    [
        (
            "SmoothL1LossBackward",
            {"reduction": "mean", "beta": 0.5},
            ((), (4, 3), (1, 3)),
        ),
        ("KlDivBackward", {"reduction": "batchmean", "log_target": 1}, ((1,), (1, 3), (4, 3))),
        ("KlDivTargetBackward", {"reduction": "sum", "log_target": 0}, ((4, 3), (4, 3), (3,))),
    ],
)
def test_static_shapes_fold_the_scale_and_match_the_reference(op_type, attrs, shapes):
    """Fully static IR: the scale is a constant, no Shape node is needed."""
    op = spec.operator(op_type)
    types = [f"tensor<{'x'.join(map(str, s))}{'x' if s else ''}f32>" for s in shapes]
    call = spec.validate(
        op_type,
        {n: spec.TensorInfo("float32", s) for n, s in zip(spec.INPUT_NAMES, shapes, strict=True)},
        attrs,
    )
    result = f"tensor<{''.join(f'{d}x' for d in call.result_shape)}f32>"
    extra = (
        f"log_target = {'true' if attrs.get('log_target') else 'false'}"
        if "log_target" in attrs
        else f"beta = {attrs['beta']}"
    )
    text = f"""
    func.func @f(%a: {types[0]}, %b: {types[1]}, %c: {types[2]}) -> {result} {{
      %r = lossgrad.{op.mnemonic} %a, %b, %c reduction = {attrs["reduction"]} {extra}
           : {types[0]}, {types[1]}, {types[2]} -> {result}
      func.return %r : {result}
    }}"""
    function = only_function(text, lower=True)
    assert "Shape" not in op_types(function)
    rng = np.random.default_rng(0)
    inputs = {
        n: rng.uniform(0.1, 2.0, s).astype(np.float32)
        for n, s in zip(spec.INPUT_NAMES, shapes, strict=True)
    }
    got = run_function(function, *inputs.values())
    expected = reference.evaluate(op_type, inputs, attrs)
    assert_matches(got, expected, op_type, inputs, attrs, tolerance=TIGHT)


LOWERED = """
func.func @f(%a: tensor<{go}>, %b: tensor<{x}>, %c: tensor<{t}>) -> tensor<{r}> {{
  %r = lossgrad.{op} %a, %b, %c reduction = {red}
       : tensor<{go}>, tensor<{x}>, tensor<{t}> -> tensor<{r}>
  func.return %r : tensor<{r}>
}}"""


def lowered(op: str, go: str, x: str, t: str, r: str, red: str = "none") -> func.FuncOp:
    return only_function(LOWERED.format(op=op, go=go, x=x, t=t, r=r, red=red), lower=True)


def test_same_shapes_need_no_broadcast_nodes_after_the_size_check():
    """The three dynamic shapes are compared once (Shape nodes, one Gather that fails on a
    difference); the operands then pass through Reshapes to themselves, and the body is
    the formula alone."""
    f = lowered("smooth_l1_loss_backward", "?x?xf32", "?x?xf32", "?x?xf32", "?x?xf32")
    types = op_types(f)
    gates = len(types) - types[::-1].index("Reshape")
    assert types[:gates].count("Shape") == 3 and types[:gates].count("Gather") == 1
    assert types[gates - 3 : gates] == ["Reshape"] * 3
    assert types[gates:] == [
        "Sub",
        "Constant",
        "Div",
        "Neg",
        "LessOrEqual",
        "Constant",
        "Where",
        "GreaterOrEqual",
        "Where",
        "Mul",
    ]


def test_a_result_wider_than_what_the_body_reads_is_expanded_once():
    """KlDivBackward reads target only; self's shape comes from one Expand."""
    f = lowered("kl_div_backward", "f32", "?x?xf32", "1x?xf32", "?x?xf32")
    assert op_types(f).count("Expand") == 1
    x = np.zeros((3, 2), np.float32)
    t = np.array([[1.0, 2.0]], np.float32)
    np.testing.assert_array_equal(
        run_function(f, np.array(2, np.float32), x, t), -2 * np.tile(t, (3, 1))
    )


def test_mean_scale_reads_the_element_count_once():
    f = lowered("smooth_l1_loss_backward", "f32", "?x?xf32", "?x?xf32", "?x?xf32", red="mean")
    nodes = translate_function(f, ["a", "b", "c"], ["r"]).nodes
    counts = [n for n in nodes if n.op_type == "ReduceProd"]
    shapes = {n.output[0]: n.input[0] for n in nodes if n.op_type == "Shape"}
    assert len(counts) == 1 and shapes[counts[0].input[0]] == "b"
    assert sorted(shapes.values()) == ["b", "c"]  # the size check reads self's Shape too


def test_half_results_are_computed_in_float_and_narrowed_once():
    f = lowered("kl_div_target_backward", "bf16", "?x?xbf16", "1x?xbf16", "1x?xbf16", red="sum")
    types = op_types(f)
    assert types.count("Cast") == 4  # three inputs widened, the sum narrowed
    nodes = translate_function(f, ["a", "b", "c"], ["r"]).nodes
    assert nodes[-1].op_type == "Cast" and nodes[-1].attribute[0].i == TensorProto.BFLOAT16
    go = np.array(1.5, ml_dtypes.bfloat16)
    x = np.linspace(-1, 1, 8).reshape(4, 2).astype(ml_dtypes.bfloat16)
    t = np.array([[0.5, 0.0]], ml_dtypes.bfloat16)
    inputs = {"grad_output": go, "self": x, "target": t}
    attrs = {"reduction": "sum", "log_target": 0}
    expected = reference.evaluate("KlDivTargetBackward", inputs, attrs)
    got = run_function(f, go, x, t)
    assert_matches(got, expected, "KlDivTargetBackward", inputs, attrs, tolerance=TIGHT)


# --------------------------------------------------------------------------- generic forms


def test_reduction_of_a_summand_constant_along_the_reduced_axis_expands_first():
    f = only_function("""
    func.func @f(%a: tensor<?x?xf32>) -> tensor<?xf32> {
      %c1 = arith.constant 1 : index
      %d1 = tensor.dim %a, %c1 : tensor<?x?xf32>
      %e = tensor.empty(%d1) : tensor<?xf32>
      %z = arith.constant 0.0 : f32
      %acc = linalg.fill ins(%z : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
      %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                            affine_map<(d0, d1) -> (d1)>],
                           iterator_types = ["reduction", "parallel"]}
           ins(%a : tensor<?x?xf32>) outs(%acc : tensor<?xf32>) {
      ^bb0(%in: f32, %o: f32):
        %two = arith.constant 2.0 : f32
        %s = arith.addf %o, %two : f32
        linalg.yield %s : f32
      } -> tensor<?xf32>
      func.return %r : tensor<?xf32>
    }""")
    got = run_function(f, np.zeros((5, 3), np.float32))
    np.testing.assert_array_equal(got, np.full(3, 10.0, np.float32))


def test_reduction_into_an_initial_tensor_adds_it_and_drops_leading_axes():
    """Output map (d0, d1, d2) -> (0, d2): d0 is dropped, d1 kept as a size-1 dimension."""
    f = only_function("""
    func.func @f(%a: tensor<?x?x?xf64>, %init: tensor<1x?xf64>) -> tensor<1x?xf64> {
      %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                            affine_map<(d0, d1, d2) -> (0, d2)>],
                           iterator_types = ["reduction", "reduction", "parallel"]}
           ins(%a : tensor<?x?x?xf64>) outs(%init : tensor<1x?xf64>) {
      ^bb0(%in: f64, %o: f64):
        %s = arith.addf %in, %o : f64
        linalg.yield %s : f64
      } -> tensor<1x?xf64>
      func.return %r : tensor<1x?xf64>
    }""")
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    init = np.full((1, 4), 100.0)
    assert "Squeeze" in [n.op_type for n in translate_function(f, ["a", "i"], ["r"]).nodes]
    np.testing.assert_array_equal(run_function(f, a, init), init + a.sum(axis=(0, 1))[None])


PREDICATES = ["oeq", "ogt", "oge", "olt", "ole", "une", "ugt", "uge", "ult", "ule"]
NUMPY_PREDICATES = {
    "oeq": np.equal,
    "ogt": np.greater,
    "oge": np.greater_equal,
    "olt": np.less,
    "ole": np.less_equal,
    "une": lambda a, b: ~np.equal(a, b),
    "ugt": lambda a, b: ~np.less_equal(a, b),
    "uge": lambda a, b: ~np.less(a, b),
    "ult": lambda a, b: ~np.greater_equal(a, b),
    "ule": lambda a, b: ~np.greater(a, b),
}


@pytest.mark.parametrize("predicate", PREDICATES)
def test_comparison_predicates_follow_ordered_and_unordered_nan_rules(predicate):
    f = only_function(f"""
    func.func @f(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {{
      %c0 = arith.constant 0 : index
      %n = tensor.dim %a, %c0 : tensor<?xf32>
      %e = tensor.empty(%n) : tensor<?xf32>
      %r = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
                                             affine_map<(d0) -> (d0)>],
                            iterator_types = ["parallel"]}}
           ins(%a, %b : tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?xf32>) {{
      ^bb0(%x: f32, %y: f32, %o: f32):
        %p = arith.cmpf {predicate}, %x, %y : f32
        %one = arith.constant 1.0 : f32
        %zero = arith.constant 0.0 : f32
        %s = arith.select %p, %one, %zero : f32
        linalg.yield %s : f32
      }} -> tensor<?xf32>
      func.return %r : tensor<?xf32>
    }}""")
    a = np.array([1, 2, 3, np.nan, 1, np.nan], np.float32)
    b = np.array([2, 2, 1, 1, np.nan, np.nan], np.float32)
    expected = NUMPY_PREDICATES[predicate](a, b).astype(np.float32)
    np.testing.assert_array_equal(run_function(f, a, b), expected)


def test_a_returned_argument_becomes_an_identity():
    f = only_function(
        "func.func @f(%a: tensor<3xf32>) -> tensor<3xf32> {\n  func.return %a : tensor<3xf32>\n}"
    )
    (node,) = translate_function(f, ["a"], ["r"]).nodes
    assert (node.op_type, list(node.input), list(node.output)) == ("Identity", ["a"], ["r"])


# --------------------------------------------------------------------------- errors

IDENTITY_MAPS = "[affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>]"


def generic_text(
    body: str,
    maps: str = IDENTITY_MAPS,
    iterators: str = '["parallel"]',
    in_type: str = "tensor<?xf32>",
    out_type: str = "tensor<?xf32>",
    init: str = "%e",
) -> str:
    return f"""
    func.func @f(%a: {in_type}) -> {out_type} {{
      %c0 = arith.constant 0 : index
      %n = tensor.dim %a, %c0 : {in_type}
      %e = tensor.empty(%n) : {out_type}
      %r = linalg.generic {{indexing_maps = {maps}, iterator_types = {iterators}}}
           ins(%a : {in_type}) outs({init} : {out_type}) {{
      ^bb0(%x: f32, %o: f32):
        {body}
      }} -> {out_type}
      func.return %r : {out_type}
    }}"""


INVALID_IR = {
    "op outside the list": (
        generic_text("%s = math.sqrt %x : f32\n linalg.yield %s : f32"),
        "'math.sqrt': is not in the level-2 op list",
    ),
    "transposing map": (
        generic_text(
            "linalg.yield %x : f32",
            maps="[affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>]",
            iterators='["parallel", "parallel"]',
            in_type="tensor<?x?xf32>",
            out_type="tensor<?x?xf32>",
        ).replace("tensor.empty(%n)", "tensor.empty(%n, %n)"),
        "result 1 must be a loop after the ones before it",
    ),
    "constant 0 on a dimension that is not 1": (
        generic_text(
            "linalg.yield %x : f32",
            maps="[affine_map<(d0) -> (0)>, affine_map<(d0) -> (d0)>]",
        ),
        "or 0 at a size-1 dimension",
    ),
    "reduction without an accumulating addf": (
        generic_text(
            "%s = arith.mulf %x, %o : f32\n linalg.yield %s : f32",
            maps="[affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>]",
            iterators='["reduction"]',
            out_type="tensor<f32>",
        ).replace("tensor.empty(%n)", "tensor.empty()"),
        "a summing body yields `arith.addf %acc, %v`",
    ),
    "parallel loop missing from the output": (
        generic_text(
            "linalg.yield %x : f32",
            maps="[affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>]",
            out_type="tensor<f32>",
        ).replace("tensor.empty(%n)", "tensor.empty()"),
        "loop d0 must be a reduction exactly when the output map does not read it",
    ),
    "reading tensor.empty": (
        generic_text("%s = arith.addf %x, %o : f32\n linalg.yield %s : f32"),
        "an elementwise body does not read its output",
    ),
}


@pytest.mark.parametrize("case", INVALID_IR, ids=list(INVALID_IR))
def test_ir_outside_the_contract_is_an_error_naming_the_op(case):
    text, message = INVALID_IR[case]
    function = only_function(text)
    with pytest.raises(Level2ContractError, match="level 2 @f: ") as info:
        translate_function(function, ["a"], ["r"])
    assert message in str(info.value)


def test_wrong_number_of_names_is_an_error():
    f = lowered("kl_div_backward", "f32", "?xf32", "?xf32", "?xf32")
    with pytest.raises(Level2ContractError, match="3 arguments, 2 names"):
        translate_function(f, ["a", "b"], ["r"])


# --------------------------------------------------------------------------- models


def small_model(opset: int | None = 21, **attrs) -> onnx.ModelProto:
    node = lo.make_node("SmoothL1LossBackward", ["go", "x", "t"], "y", name="n", **attrs)
    graph = lo.make_graph(
        [node],
        [("go", "float32", []), ("x", "float32", ["N"]), ("t", "float32", ["N"])],
        [("y", "float32", ["N"])],
    )
    model = lo.make_model(graph)
    del model.opset_import[:]
    if opset is not None:
        model.opset_import.append(helper.make_opsetid("", opset))
    model.opset_import.append(helper.make_opsetid(spec.DOMAIN, 1))
    return model


FEEDS = {
    "go": np.array(2.0, np.float32),
    "x": np.array([-2.0, -0.25, 0.0, 0.5, 3.0], np.float32),
    "t": np.zeros(5, np.float32),
}


@pytest.mark.parametrize("mode", ["functions", "inline"])
@pytest.mark.parametrize("opset", [13, 17, 21, None])
def test_models_keep_their_ai_onnx_opset(opset, mode):
    compiled = compile_model(small_model(opset, beta=0.5, reduction="none"), mode=mode).model
    onnx.checker.check_model(compiled, full_check=True)
    versions = {o.domain: o.version for o in compiled.opset_import}
    assert versions[""] == (opset or 21)
    if mode == "functions":
        assert {o.version for o in compiled.functions[0].opset_import} == {opset or 21}
    got = run_session(make_session(compiled), FEEDS)[0]
    np.testing.assert_array_equal(got, 2 * np.clip(FEEDS["x"] / 0.5, -1, 1))


@pytest.mark.parametrize("mode", ["functions", "inline"])
def test_a_model_without_lossgrad_nodes_is_left_as_it_is(mode):
    graph = lo.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [("x", "float32", [3])],
        [("y", "float32", [3])],
    )
    model = lo.make_model(graph)
    result = compile_model(model, mode=mode)
    assert result.report.nodes == 0 and result.report.signatures == []
    assert result.model.graph == model.graph and list(result.model.functions) == []


def test_opsets_before_13_are_refused():
    with pytest.raises(InvalidArgumentError, match="opset 12 is too old"):
        compile_model(small_model(12))


def test_functions_mode_writes_overload_and_every_attribute():
    model = small_model()
    node = model.graph.node[0]
    del node.attribute[:]  # every attribute at its default
    compiled = compile_model(model).model
    (node,) = compiled.graph.node
    assert {a.name: helper.get_attribute_value(a) for a in node.attribute} == {
        "reduction": b"mean",
        "beta": 1.0,
    }
    (function,) = compiled.functions
    assert (function.domain, function.name) == (spec.DOMAIN, "SmoothL1LossBackward")
    assert node.overload == function.overload
    assert list(function.input) == list(spec.INPUT_NAMES)
    assert list(function.output) == ["grad_input"]
    assert list(function.attribute) == ["reduction", "beta"]
    assert compiled.ir_version == 10


def test_compiling_a_compiled_model_replaces_its_functions():
    once = compile_model(small_model()).model
    twice = compile_model(once).model
    assert len(twice.functions) == 1
    assert twice.SerializeToString() == once.SerializeToString()


def test_inline_names_never_clash_with_the_models_names():
    nodes = [
        lo.make_node("KlDivBackward", ["go", "x", "t"], "y1", name="n"),
        lo.make_node("KlDivBackward", ["go", "x", "t"], "y2", name="n"),
        lo.make_node("KlDivBackward", ["go", "x", "t"], "y3", name=""),
        helper.make_node("Identity", ["y1"], ["n/t1_shape"], name="taken"),
    ]
    graph = lo.make_graph(
        nodes,
        [("go", "float32", []), ("x", "float32", [3]), ("t", "float32", [3])],
        [("y2", "float32", [3]), ("y3", "float32", [3]), ("n/t1_shape", "float32", [3])],
    )
    compiled = compile_model(lo.make_model(graph), mode="inline").model
    onnx.checker.check_model(compiled, full_check=True)
    outputs = [o for n in compiled.graph.node for o in n.output]
    assert len(outputs) == len(set(outputs))
    prefixes = {n.name.split("/")[0] for n in compiled.graph.node}
    assert prefixes == {"n_1", "n_2", "KlDivBackward", "taken"}  # "n/t1_shape" is taken
    got = run_session(
        make_session(compiled),
        {
            "go": np.array(1, np.float32),
            "x": np.ones(3, np.float32),
            "t": np.arange(3, dtype=np.float32),
        },
    )
    for out in got:
        np.testing.assert_array_equal(out, -np.arange(3, dtype=np.float32) / 3)


def _scope_models() -> list[tuple[onnx.ModelProto, list[dict[str, np.ndarray]]]]:
    from tests.frontend.test_frontend import function_model, if_model

    rng = np.random.default_rng(5)
    go = np.array(0.5, np.float32)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    t = rng.uniform(0.1, 1, size=(1, 3)).astype(np.float32)
    if_feeds = [{"c": np.array(c), "go": go, "x": x, "t": t} for c in (True, False)]
    x2 = rng.normal(size=(7, 3)).astype(np.float32)
    call_feeds = [{"go": go, "x": x, "t": t[0], "go2": go, "x2": x2, "t2": t[0]}]
    return [(if_model(), if_feeds), (function_model(), call_feeds)]


@pytest.mark.parametrize("index", [0, 1], ids=["if", "function"])
def test_inline_mode_reaches_subgraphs_and_functions_and_drops_the_domain(index):
    model, feeds_list = _scope_models()[index]
    inlined = compile_model(model, mode="inline").model
    assert spec.DOMAIN not in str(inlined)
    functions = compile_model(model, mode="functions").model
    for feeds in feeds_list:
        a = run_session(make_session(inlined), feeds)
        b = run_session(make_session(functions), feeds)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_functions_mode_inlines_nodes_inside_model_local_functions():
    """ONNX Runtime 1.31 ignores `overload` on calls made from a function body."""
    model, _ = _scope_models()[1]
    compiled = compile_model(model, mode="functions").model
    (grad,) = [f for f in compiled.functions if f.name == "Grad"]
    assert all(n.domain != spec.DOMAIN for n in grad.node)
    assert [n.op_type for n in compiled.graph.node] == ["Grad", "Grad"]
    assert spec.DOMAIN not in {o.domain for o in compiled.opset_import}


# --------------------------------------------------------------------------- run helpers


@pytest.mark.parametrize("shape", [(), (0,), (2, 3)])
def test_bfloat16_values_round_trip_through_onnxruntime(shape):
    array = (np.arange(np.prod(shape, dtype=int)).reshape(shape) / 3).astype(ml_dtypes.bfloat16)
    back = from_ort_value(to_ort_value(array))
    assert back.dtype == array.dtype and back.shape == array.shape
    np.testing.assert_array_equal(back.view(np.uint16), array.view(np.uint16))


# --------------------------------------------------------------------------- fresh names


class CountingSet(set):
    """A set that counts membership tests (the work of a name search)."""

    probes = 0

    def __contains__(self, item: object) -> bool:
        CountingSet.probes += 1
        return super().__contains__(item)


def test_fresh_prefixes_of_one_base_cost_linear_work():
    """Unnamed nodes of one operator all ask for the base op_type: n prefixes take O(n)
    membership tests, not one search from base_1 each time (O(n^2))."""
    suffixes = ["t1_sub", "t2_mul", "t3_where"]
    names = UniqueNames(CountingSet({"Op_3/t2_mul", "Op_5/other"}))
    CountingSet.probes = 0
    prefixes = [names.prefix_for("Op", suffixes) for _ in range(2000)]
    assert CountingSet.probes <= 2 * len(suffixes) * len(prefixes)
    assert len(set(prefixes)) == len(prefixes)
    assert prefixes[:5] == ["Op/", "Op_1/", "Op_2/", "Op_4/", "Op_5/"]  # Op_3/t2_mul is taken


def test_fresh_prefixes_never_clash_with_names_of_the_model_or_each_other():
    used = {"KlDivBackward/t1_x", "KlDivBackward_1/t1_x", "n/t2_y", "KlDivBackward_2_1/t1_x"}
    names = UniqueNames(set(used))
    requests = [
        ("KlDivBackward", ["t1_x"]),
        ("KlDivBackward", ["t2_y"]),
        ("n", ["t2_y", "t3_z"]),
        ("KlDivBackward_2", ["t1_x"]),
        ("KlDivBackward", ["t1_x", "t2_y"]),
    ]
    made = [names.prefix_for(base, suffixes) + s for base, suffixes in requests for s in suffixes]
    assert not set(made) & used and len(set(made)) == len(made)


@pytest.mark.parametrize("named", [True, False], ids=["named", "unnamed"])
def test_inline_mode_names_every_instance_apart(named: bool):
    nodes = [
        lo.make_node(
            "SmoothL1LossBackward", ["go", "x", "t"], f"g{i}", name=f"n{i}" if named else None
        )
        for i in range(50)
    ]
    inputs = [("go", "float32", []), ("x", "float32", ["n"]), ("t", "float32", ["n"])]
    outputs = [(f"g{i}", "float32", ["n"]) for i in range(50)]
    model = compile_model(lo.make_model(lo.make_graph(nodes, inputs, outputs)), mode="inline")
    onnx.checker.check_model(model.model, full_check=True)  # SSA: every value once
    node_names = [n.name for n in model.model.graph.node]
    assert len(set(node_names)) == len(node_names)
