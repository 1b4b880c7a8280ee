"""End to end: ONNX model with ai.lossgrad nodes → compile_model → stock ONNX Runtime (and
onnx's ReferenceEvaluator) → compared with reference.evaluate.

Tolerance: helpers.tolerances.TIGHT. The compiled graph evaluates the level-2 expressions
in the order reference.py does, in the same compute type, so only three things may differ:
ORT's Exp/Log against numpy's (a few ulp of the compute type; TIGHT allows 4 eps_C of the
magnitude of the terms), ORT's ReduceSum order against the reference's sequential sum (1
eps_C per summed term), and for float16/bfloat16 results the final rounding of values that
differ by those few eps_C (1 ulp of the result type). float64 is thus checked to ~1e-15
relative, float32 to ~5e-7, half types to 1 ulp of the result.

The cross product op × reduction × log_target/beta (0 and 0.5)/delta (0.5 and 2.5) × element
type (float16, bfloat16, float32, float64) is complete; mixed element types take a
round-robin sample. The broadcast patterns of helpers.cases that the op takes are spread
over the configurations (all of them for float32, five per configuration otherwise), each
with a grad_output shape the op accepts and, round-robin, each way of giving the optional
inputs (absent, and present in each of their shapes). Each configuration is compiled in
one of the two modes (functions, inline), in turn; LOSSGRAD_FULL_MATRIX=1 compiles each
in both.

These sweeps are of the broadcasting operators (spec.BROADCAST_OPERATORS); the
classification operators (spec.CLASS_OPERATORS) run end to end, bit-identical to the
reference, in test_onnx_classes_models.py."""

from __future__ import annotations

import itertools
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import reference, spec
from lossgrad_compiler.driver import clear_cache, compile_model
from lossgrad_compiler.runtime.ort_io import make_session, run_session
from tests.helpers.cases import (
    BROADCAST_PATTERNS,
    DTYPES,
    Case,
    full_matrix,
    grad_output_shapes,
    make_case,
    mixed_dtype_combinations,
    optional_variants,
    pattern_valid,
)
from tests.helpers.tolerances import TIGHT, assert_matches, bits

MODES = ("functions", "inline")
NAMES = ("go", "x", "t")
SHORT_NAMES = {"grad_output": "go", "self": "x", "target": "t", "weight": "w", "pos_weight": "pw"}


def attribute_variants(op_type: str) -> list[dict[str, Any]]:
    op = spec.operator(op_type)
    samples = {"beta": (0.0, 0.5), "delta": (0.5, 2.5)}
    values = [a.choices or samples[a.name] for a in op.attributes]
    names = [a.name for a in op.attributes]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def patterns(op_type: str) -> list[Any]:
    """The broadcast patterns the op takes (a target that must fit into self)."""
    return [p for p in BROADCAST_PATTERNS if pattern_valid(op_type, p)]


def _configs() -> list[tuple[str, dict[str, Any], tuple[Any, Any, Any], str]]:
    configs = []
    for op_type in spec.BROADCAST_OPERATORS:
        variants = attribute_variants(op_type)
        for attrs, dtype in itertools.product(variants, DTYPES):
            label = f"{op_type}-{_label(attrs)}-{dtype.name}"
            configs.append((op_type, attrs, (dtype, dtype, dtype), label))
        for k, triple in enumerate(mixed_dtype_combinations()[::3]):
            attrs = variants[k % len(variants)]
            names = "-".join(np.dtype(d).name for d in triple)
            configs.append((op_type, attrs, triple, f"{op_type}-{_label(attrs)}-{names}"))
    return configs


def _label(attrs: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in attrs.items())


CONFIGS = _configs()


def config_cases(index: int) -> list[Case]:
    op_type, attrs, dtypes, _ = CONFIGS[index]
    all_f32 = all(np.dtype(d) == np.float32 for d in dtypes)
    usable = patterns(op_type)
    count = len(usable) if all_f32 else 5
    cases = []
    for k in range(count):
        pattern = usable[(index * 5 + k) % len(usable)]
        go_shapes = list(grad_output_shapes(op_type, pattern.b).values())
        go_shape = go_shapes[(index + k) % len(go_shapes)]
        variants = optional_variants(op_type, pattern.b)
        cases.append(
            make_case(
                op_type,
                attrs,
                pattern.self_shape,
                pattern.target_shape,
                go_shape,
                dtypes,
                seed=1000 * index + k,
                specials=0.05 if k % 2 else 0.0,
                optional=variants[(index + k) % len(variants)],
            )
        )
    return cases


def symbolic(shape: tuple[int, ...], prefix: str) -> list[int | str]:
    """Every dimension other than 1 symbolic: the compiled file serves every size."""
    return [d if d == 1 else f"{prefix}{i}" for i, d in enumerate(shape)]


def cases_model(
    cases: list[Case], static: bool = False
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One model with one node per case (each with its own inputs), and its feeds; shapes are
    symbolic (except the broadcast 1s `symbolic` keeps) unless `static`."""
    nodes, inputs, outputs, feeds = [], [], [], {}
    for k, case in enumerate(cases):
        given = case.checked.present
        names = [
            f"{SHORT_NAMES[n]}{k}" if n in given else ""
            for n in spec.operator(case.op_type).input_names
        ]
        while names[-1] == "":
            names.pop()  # ONNX: a trailing optional input is left out
        nodes.append(lo.make_node(case.op_type, names, f"g{k}", name=f"n{k}", **case.attrs))
        for name, input_name in zip([n for n in names if n], given, strict=True):
            array = case.inputs[input_name]
            shape = list(array.shape) if static else symbolic(array.shape, f"{name}_")
            inputs.append((name, array.dtype, shape))
            feeds[name] = array
        rank = len(case.result_shape)
        result_shape = list(case.result_shape) if static else [f"g{k}_{i}" for i in range(rank)]
        outputs.append((f"g{k}", case.result_dtype, result_shape))
    return lo.make_model(lo.make_graph(nodes, inputs, outputs)), feeds


def check_outputs(outputs: list[np.ndarray], cases: list[Case], context: str) -> None:
    assert len(outputs) == len(cases)
    for out, case in zip(outputs, cases, strict=True):
        expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
        assert_matches(
            out,
            expected,
            case.op_type,
            case.inputs,
            case.attrs,
            tolerance=TIGHT,
            context=f"{context}: {case.label}",
        )


def _config_modes() -> list[Any]:
    """Every configuration in both modes with LOSSGRAD_FULL_MATRIX=1; by default each one in
    one mode, in turn, so that each operator, attribute variant and element type meets both
    (the mode alternates along the configurations and again along the element types)."""
    every = len(DTYPES)
    return [
        pytest.param(index, mode, id=f"{CONFIGS[index][3]}-{mode}")
        for index in range(len(CONFIGS))
        for k, mode in enumerate(MODES)
        if full_matrix() or k == (index + index // every) % len(MODES)
    ]


@pytest.mark.parametrize(("index", "mode"), _config_modes())
def test_compiled_model_matches_reference_in_onnxruntime(index: int, mode: str):
    cases = config_cases(index)
    model, feeds = cases_model(cases)
    compiled = compile_model(model, mode=mode).model
    onnx.checker.check_model(compiled, full_check=True)
    results = {}
    for threads in (1, 2):
        results[threads] = run_session(make_session(compiled, threads), feeds)
        check_outputs(results[threads], cases, f"{mode}, {threads} threads")
    for one, two in zip(results[1], results[2], strict=True):
        np.testing.assert_array_equal(bits(one), bits(two), err_msg="1 vs 2 threads")


@pytest.mark.parametrize("index", range(0, len(CONFIGS), 4), ids=[c[3] for c in CONFIGS[::4]])
def test_functions_model_runs_in_reference_evaluator(index: int):
    """The function bodies alone (no custom kernels) in onnx's ReferenceEvaluator.

    One node per model: onnx 1.23's evaluator looks functions up by (domain, name) and
    ignores `overload`, so it cannot tell two signatures of one operator apart."""
    for case in config_cases(index):
        model, feeds = cases_model([case])
        compiled = compile_model(model, mode="functions").model
        outputs = ReferenceEvaluator(compiled).run(None, feeds)
        check_outputs(outputs, [case], "ReferenceEvaluator")


def test_cross_product_is_complete():
    seen = {(op, _label(attrs), dtypes[0].name) for op, attrs, dtypes, _ in CONFIGS}
    for op_type in spec.BROADCAST_OPERATORS:
        for attrs in attribute_variants(op_type):
            for dtype in DTYPES:
                assert (op_type, _label(attrs), dtype.name) in seen
    assert any(len({np.dtype(d) for d in c[2]}) > 1 for c in CONFIGS)
    for op_type in spec.BROADCAST_OPERATORS:
        indices = [i for i, c in enumerate(CONFIGS) if c[0] == op_type]
        op_cases = [case for i in indices for case in config_cases(i)]
        used = {(case.inputs["self"].shape, case.inputs["target"].shape) for case in op_cases}
        assert used == {(p.self_shape, p.target_shape) for p in patterns(op_type)}, op_type
        present = {case.checked.present for case in op_cases}
        optional = spec.operator(op_type).optional_inputs
        for r in range(len(optional) + 1):
            for subset in itertools.combinations(optional, r):
                assert (*spec.INPUT_NAMES, *subset) in present, (op_type, subset)


def batch_go_shape(attrs: dict[str, Any]) -> list[int | str]:
    """grad_output as autograd gives it: per row for reduction none, else 0-d."""
    return ["N", 1] if attrs["reduction"] == "none" else []


def batch_model(op_type: str, attrs: dict[str, Any], dtype: Any) -> onnx.ModelProto:
    """self [N, 4], target [1, 4] (broadcast), grad_output [N, 1] or 0-d: N symbolic."""
    node = lo.make_node(op_type, list(NAMES), "g", name="n", **attrs)
    inputs = [("go", dtype, batch_go_shape(attrs)), ("x", dtype, ["N", 4]), ("t", dtype, [1, 4])]
    out_shape = [1, 4] if op_type == "KlDivTargetBackward" else ["N", 4]
    return lo.make_model(lo.make_graph([node], inputs, [("g", dtype, out_shape)]))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "op_type,attrs",
    [
        ("KlDivBackward", {"reduction": "batchmean", "log_target": 1}),
        ("KlDivTargetBackward", {"reduction": "mean", "log_target": 0}),
        ("SmoothL1LossBackward", {"reduction": "mean", "beta": 0.5}),
        ("SmoothL1LossBackward", {"reduction": "none", "beta": 0.0}),
        ("MseLossBackward", {"reduction": "mean"}),
        ("HuberLossBackward", {"reduction": "mean", "delta": 0.5}),
        ("SoftMarginLossBackward", {"reduction": "mean"}),
        ("BinaryCrossEntropyBackward", {"reduction": "mean"}),
        ("BinaryCrossEntropyWithLogitsBackward", {"reduction": "none"}),
    ],
)
def test_one_compiled_file_runs_every_batch_size(op_type: str, attrs: dict, mode: str):
    dtype = np.float32
    compiled = compile_model(batch_model(op_type, attrs, dtype), mode=mode).model
    session = make_session(compiled.SerializeToString())
    rng = np.random.default_rng(3)
    for batch in (0, 1, 3, 17):
        go_shape = tuple(batch if d == "N" else d for d in batch_go_shape(attrs))
        inputs = {
            "grad_output": rng.normal(size=go_shape).astype(dtype),
            "self": rng.normal(size=(batch, 4)).astype(dtype),
            "target": rng.uniform(0.1, 2, size=(1, 4)).astype(dtype),
        }
        got = run_session(session, dict(zip(NAMES, inputs.values(), strict=True)))[0]
        expected = reference.evaluate(op_type, inputs, attrs)
        assert_matches(got, expected, op_type, inputs, attrs, tolerance=TIGHT, context=f"N={batch}")


def surrounded_model() -> onnx.ModelProto:
    """ai.lossgrad nodes among standard nodes, with an initializer, value_info and metadata."""
    scale = helper.make_tensor("scale", onnx.TensorProto.FLOAT, [4], [0.5, 1.0, 1.5, 2.0])
    nodes = [
        helper.make_node("Mul", ["x", "scale"], ["xs"], name="pre"),
        lo.make_node("SmoothL1LossBackward", ["go", "xs", "t"], "g1", name="sl1", beta=0.25),
        lo.make_node("KlDivBackward", ["go", "xs", "t"], "g2", name="kl", reduction="sum"),
        helper.make_node("Add", ["g1", "g2"], ["y"], name="post"),
    ]
    graph = lo.make_graph(
        nodes,
        [("go", "float32", []), ("x", "float32", ["N", 4]), ("t", "float32", [1, 4])],
        [("y", "float32", ["N", 4])],
        name="surrounded",
        initializers=[scale],
    )
    graph.value_info.append(helper.make_tensor_value_info("xs", onnx.TensorProto.FLOAT, ["N", 4]))
    graph.doc_string = "a graph"
    model = lo.make_model(graph, doc="a model")
    helper.set_model_props(model, {"author": "tests", "purpose": "preservation"})
    model.producer_version = "7.7"
    model.model_version = 42
    return model


@pytest.mark.parametrize("mode", MODES)
def test_everything_else_in_the_model_is_kept(mode: str):
    source = surrounded_model()
    before = source.SerializeToString()
    compiled = compile_model(source, mode=mode).model
    assert source.SerializeToString() == before, "the input model was modified"
    onnx.checker.check_model(compiled, full_check=True)
    for field in ("doc_string", "producer_name", "producer_version", "model_version", "domain"):
        assert getattr(compiled, field) == getattr(source, field), field
    assert list(compiled.metadata_props) == list(source.metadata_props)
    for field in ("name", "doc_string", "input", "output", "initializer", "value_info"):
        assert getattr(compiled.graph, field) == getattr(source.graph, field), field
    kept = [n for n in compiled.graph.node if n.name in ("pre", "post")]
    assert kept == [n for n in source.graph.node if n.name in ("pre", "post")]
    lossgrad = [n for n in compiled.graph.node if n.domain == spec.DOMAIN]
    if mode == "functions":
        assert [n.name for n in lossgrad] == ["sl1", "kl"]
        for new, old in zip(lossgrad, source.graph.node[1:3], strict=True):
            assert (new.input, new.output, new.attribute) == (old.input, old.output, old.attribute)
            assert new.overload
    else:
        assert lossgrad == []
        assert spec.DOMAIN not in {o.domain for o in compiled.opset_import}
    feeds = {
        "go": np.array(0.5, np.float32),
        "x": np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4),
        "t": np.array([[0.1, 0.2, 0.3, 0.4]], np.float32),
    }
    xs = feeds["x"] * np.array([0.5, 1.0, 1.5, 2.0], np.float32)
    inputs = {"grad_output": feeds["go"], "self": xs, "target": feeds["t"]}
    expected = reference.evaluate(
        "SmoothL1LossBackward", inputs, {"beta": 0.25}
    ) + reference.evaluate("KlDivBackward", inputs, {"reduction": "sum"})
    got = run_session(make_session(compiled), feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_ten_thousand_identical_nodes_compile_one_signature():
    count = 10_000
    nodes = [
        lo.make_node("KlDivBackward", ["go", "x", "t"], f"g{i}", name=f"n{i}", reduction="sum")
        for i in range(count)
    ]
    graph = helper.make_graph(
        nodes,
        "many",
        [
            helper.make_tensor_value_info("go", onnx.TensorProto.FLOAT, []),
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 8]),
            helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, ["N", 8]),
        ],
        [
            helper.make_tensor_value_info(f"g{i}", onnx.TensorProto.FLOAT, ["N", 8])
            for i in range(count)
        ],
    )
    clear_cache()
    result = compile_model(lo.make_model(graph))
    assert result.report.nodes_per_operator["KlDivBackward"] == count
    assert len(result.report.signatures) == 1
    assert result.report.compiled == result.report.signatures
    assert len(result.model.functions) == 1
    overloads = {n.overload for n in result.model.graph.node}
    assert overloads == {result.model.functions[0].overload}
    again = compile_model(lo.make_model(graph), mode="inline")
    assert again.report.compiled == [] and again.report.cached == result.report.signatures
    assert len(again.model.graph.node) == count * len(result.model.functions[0].node)


def test_bfloat16_outputs_come_back_as_bfloat16():
    case = make_case(
        "KlDivTargetBackward",
        {"reduction": "mean", "log_target": 1},
        (3, 4),
        (4,),
        (),
        ml_dtypes.bfloat16,
    )
    model, feeds = cases_model([case])
    for mode in MODES:
        out = run_session(make_session(compile_model(model, mode=mode).model), feeds)[0]
        assert out.dtype == np.dtype(ml_dtypes.bfloat16)
        check_outputs([out], [case], mode)


EMPTY_PATTERNS = [p for p in BROADCAST_PATTERNS if 0 in p.self_shape + p.target_shape]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["float16", "float32"])
@pytest.mark.parametrize("op_type", spec.BROADCAST_OPERATORS)
def test_static_empty_dimensions_keep_their_size(op_type: str, dtype: Any, mode: str):
    """Regression: with static shapes ORT's ExpandElimination took a target size 0 for 1 and
    returned a (1, 3) result where (0, 3) was due (float16 KlDivBackward, mean)."""
    cases = []
    for pattern in [p for p in EMPTY_PATTERNS if pattern_valid(op_type, p)]:
        for attrs in attribute_variants(op_type)[::3]:
            for go_shape in grad_output_shapes(op_type, pattern.b).values():
                cases.append(
                    make_case(
                        op_type, attrs, pattern.self_shape, pattern.target_shape, go_shape, dtype
                    )
                )
    model, feeds = cases_model(cases, static=True)
    compiled = compile_model(model, mode=mode).model
    check_outputs(run_session(make_session(compiled), feeds), cases, mode)
