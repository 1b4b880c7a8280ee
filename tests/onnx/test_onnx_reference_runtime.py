"""onnx's ReferenceEvaluator running ai.lossgrad models with lossgrad_compiler's kernels:
results equal reference.evaluate bit for bit (the kernels must pass inputs, attributes and
types through unchanged), and invalid calls raise spec's errors with the aclnn code."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import AttributeProto, TensorProto, helper
from onnx.reference import ReferenceEvaluator

from lossgrad_compiler import examples, reference, spec
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
from tests.helpers.cases import (
    DTYPES,
    Case,
    make_case,
    mixed_dtype_combinations,
    node_inputs,
    standard_cases,
)
from tests.helpers.tolerances import TIGHT, assert_matches, bits

KL, KLT, SL1 = "KlDivBackward", "KlDivTargetBackward", "SmoothL1LossBackward"
NAMES = ("go", "x", "t")


def symbolic(shape: tuple[int, ...], prefix: str) -> list[str | int]:
    """The shape with every dimension other than 1 made symbolic (one model, many sizes)."""
    return [d if d == 1 else f"{prefix}{i}" for i, d in enumerate(shape)]


def case_model(case: Case, *, symbolic_dims: bool = True):
    names, by_value = node_inputs(case)
    node = lo.make_node(case.op_type, names, "g", name="n", **case.attrs)
    inputs = []
    for value, name in by_value.items():
        array = case.inputs[name]
        shape = symbolic(array.shape, f"{value}_") if symbolic_dims else list(array.shape)
        inputs.append((value, array.dtype, shape))
    # outputs with static sizes: symbolic inputs would give the output unrelated names
    result = (case.result_dtype, list(case.result_shape))
    return lo.make_model(lo.make_graph([node], inputs, [("g", *result)]))


def run_case(case: Case, **kwargs) -> np.ndarray:
    feeds = {value: case.inputs[name] for value, name in node_inputs(case)[1].items()}
    return lo.run_reference(case_model(case, **kwargs), feeds)["g"]


def assert_bit_identical(actual: np.ndarray, expected: np.ndarray, label: str) -> None:
    assert actual.dtype == expected.dtype, label
    assert actual.shape == expected.shape, label
    np.testing.assert_array_equal(bits(actual), bits(expected), err_msg=label)


def _cases() -> list[Case]:
    """The elementwise operators' cases (the classification ones: test_onnx_classification.py)."""
    cases = []
    for op_type in spec.BROADCAST_OPERATORS:
        for dtype in DTYPES:
            # every pattern and attribute combination appears; every third case keeps it short
            cases += standard_cases(op_type, dtype, seed=7, specials=0.1)[::3]
        for k, triple in enumerate(mixed_dtype_combinations()):
            cases += [standard_cases(op_type, triple, seed=k)[k]]
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_evaluator_equals_reference(case: Case):
    expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
    assert_bit_identical(run_case(case), expected, case.label)


def test_case_matrix_covers_every_op_dtype_and_attribute():
    covered = {(c.op_type, c.result_dtype.name) for c in CASES}
    for op_type in spec.BROADCAST_OPERATORS:
        for t in spec.FLOAT_TYPES:
            assert (op_type, t.name) in covered
    assert {c.attrs["reduction"] for c in CASES} == {r.value for r in spec.Reduction}
    assert any(len({a.dtype for a in c.inputs.values()}) > 1 for c in CASES)


def test_bfloat16_is_ml_dtypes_in_and_out():
    case = make_case(SL1, {"reduction": "none", "beta": 0.5}, (2, 3), (3,), (), ml_dtypes.bfloat16)
    result = run_case(case)
    assert result.dtype == np.dtype(ml_dtypes.bfloat16)
    d = case.inputs["self"].astype(np.float32) - case.inputs["target"].astype(np.float32)
    expected = case.inputs["grad_output"].astype(np.float32) * np.clip(d / 0.5, -1, 1)
    assert_matches(
        result,
        expected.astype(ml_dtypes.bfloat16),
        SL1,
        case.inputs,
        case.attrs,
        tolerance=TIGHT,
        context=case.label,
    )


def test_float_attribute_is_the_float32_value():
    """beta = 0.1 travels as float32 0.1 (0.10000000149...), widened exactly."""
    case = make_case(SL1, {"reduction": "none", "beta": 0.1}, (50,), (50,), (), np.float64)
    expected = reference.evaluate(SL1, case.inputs, {**case.attrs, "beta": float(np.float32(0.1))})
    assert_bit_identical(run_case(case), expected, case.label)
    assert not np.array_equal(expected, reference.evaluate(SL1, case.inputs, case.attrs))


def test_one_model_runs_for_several_batch_sizes():
    model = examples.example_model()
    for batch in (0, 1, 3):
        feeds = examples.example_feeds(batch)
        got = lo.run_reference(model, feeds)
        assert got["grad_student_logp"].shape == (batch, examples.CLASSES)
        assert got["grad_class_prior"].dtype == np.dtype(ml_dtypes.bfloat16)
        assert got["grad_box_pred"].shape == (batch, examples.BOX)
        node = model.graph.node[2]
        expected = reference.evaluate(
            node.op_type,
            {
                "grad_output": feeds["grad_box"],
                "self": feeds["box_pred"],
                "target": feeds["box_anchor"],
            },
            {"reduction": "none", "beta": 0.5},
        )
        assert_bit_identical(got["grad_box_pred"], expected, f"N={batch}")


def test_against_torch_autograd():
    """One independent check of the whole path (model → evaluator → reference) per op."""
    pytest.importorskip("torch", reason="needs PyTorch, a test extra: pip install -e '.[test]'")
    from tests.helpers import torch_oracle

    for op_type, attrs in [
        (KL, {"reduction": "batchmean", "log_target": 1}),
        (KLT, {"reduction": "sum", "log_target": 0}),
        (SL1, {"reduction": "mean", "beta": 0.5}),
    ]:
        case = make_case(op_type, attrs, (4, 3), (3,), (), np.float64, seed=3)
        expected = torch_oracle.oracle(op_type, case.inputs, case.attrs)
        assert_matches(run_case(case), expected, op_type, case.inputs, attrs, context=case.label)


# --------------------------------------------------------------------------- function bodies


def test_linked_attributes_inside_a_function():
    """A model-local function calling the op with attribute references: the values come
    from the calling node, read through the function's attributes. (onnx's own
    ReferenceEvaluator(model, new_ops=...) does not pass new_ops to function bodies;
    run_reference does.)"""
    inner = helper.make_node(SL1, ["go", "x", "t"], ["g"], domain=spec.DOMAIN, name="inner")
    for name, kind in (("reduction", AttributeProto.STRING), ("beta", AttributeProto.FLOAT)):
        inner.attribute.append(AttributeProto(name=name, ref_attr_name=name, type=kind))
    function = helper.make_function(
        "local",
        "Wrapped",
        ["go", "x", "t"],
        ["g"],
        [inner],
        opset_imports=lo.opset_imports(),
        attributes=["reduction", "beta"],
    )
    call = helper.make_node("Wrapped", ["a", "b", "c"], ["out"], domain="local", beta=0.25)
    call.attribute.append(helper.make_attribute("reduction", "sum"))
    graph = lo.make_graph(
        [call],
        [("a", "float32", []), ("b", "float32", [5]), ("c", "float32", [5])],
        [("out", "float32", [5])],
    )
    model = lo.make_model(graph, functions=[function])
    model.opset_import.append(helper.make_opsetid("local", 1))
    case = make_case(SL1, {"reduction": "sum", "beta": 0.25}, (5,), (5,), (), np.float32)
    feeds = dict(zip("abc", (case.inputs[n] for n in spec.INPUT_NAMES), strict=True))
    got = lo.run_reference(model, feeds)["out"]
    assert_bit_identical(got, reference.evaluate(SL1, case.inputs, case.attrs), "linked")


# --------------------------------------------------------------------------- errors


def one_node_model(op_type, attrs, inputs=NAMES, typed=True):
    """A model whose node is built with onnx.helper (lo.make_node refuses invalid ones)."""
    node = helper.make_node(op_type, list(inputs), ["g"], name="n", domain=spec.DOMAIN, **attrs)
    elem = TensorProto.FLOAT if typed else TensorProto.UNDEFINED
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(v, elem, None) for v in NAMES],
        [helper.make_tensor_value_info("g", elem, None)],
    )
    return lo.make_model(graph)


F = np.float32
GOOD = {"go": np.array(1, F), "x": np.ones((2, 3), F), "t": np.ones(3, F)}


@pytest.mark.parametrize(
    ("op_type", "attrs", "feeds", "inputs", "error", "message"),
    [
        (KL, {}, {"x": np.ones((2, 3), F), "t": np.ones(4, F)}, NAMES, BroadcastError,
         r"self and target: shapes self \[2, 3\], target \[4\] do not broadcast"),
        (KLT, {}, {"go": np.ones((5, 2, 3), F)}, NAMES, BroadcastError,
         "grad_output: shape .* without enlarging it"),
        (SL1, {}, {"go": np.ones(4, F)}, NAMES, BroadcastError, "do not broadcast"),
        (SL1, {}, {"x": np.ones((2, 3), np.int32)}, NAMES, ElementTypeError,
         "self: element type must be one of float16, bfloat16, float32, float64, got int32"),
        (KL, {}, {"go": np.array(True)}, NAMES, ElementTypeError, "grad_output: .* got bool"),
        (KL, {}, {"t": np.ones([1] * 9, F)}, NAMES, RankError, "target: rank must be at most 8"),
        (KL, {}, {}, ("go", "", "t"), MissingInputError, "self: is required"),
        (SL1, {}, {}, ("go", "x"), MissingInputError, "target: is required"),
        (KL, {"reduction": "avg"}, {}, NAMES, AttributeValueError, "got 'avg'"),
        (SL1, {"reduction": "batchmean"}, {}, NAMES, AttributeValueError, "got 'batchmean'"),
        (KLT, {"log_target": 2}, {}, NAMES, AttributeValueError, "must be one of 0, 1, got 2"),
        (SL1, {"beta": -1.0}, {}, NAMES, AttributeValueError, "must be a float >= 0"),
        (SL1, {"beta": float("nan")}, {}, NAMES, AttributeValueError, "got nan"),
        (SL1, {"beta": 1}, {}, NAMES, AttributeValueError, "must be an ONNX FLOAT attribute"),
        (KL, {"log_target": 1.0}, {}, NAMES, AttributeValueError, "must be an ONNX INT"),
        (SL1, {"foo": 1.0}, {}, NAMES, AttributeValueError, "'foo': is not an attribute"),
        (KL, {}, {}, ("go", "x", "t", "t"), InvalidArgumentError, "input 3: is not an input"),
    ],
)  # fmt: skip
def test_evaluator_errors(op_type, attrs, feeds, inputs, error, message):
    evaluator = ReferenceEvaluator(
        one_node_model(op_type, attrs, inputs), new_ops=lo.reference_ops()
    )
    with pytest.raises(error, match=message) as info:
        evaluator.run(None, {**GOOD, **feeds})
    err = info.value
    assert isinstance(err, LossGradError)
    assert (err.op, err.node) == (op_type, "n")
    assert str(err).startswith(f"{op_type} node 'n': ")
    assert str(err).endswith(f"[aclnn {err.code} {spec_code_name(err.code)}]")
    assert err.code == (161001 if error is MissingInputError else 161002)


def spec_code_name(code: int) -> str:
    from lossgrad_compiler.errors import ACLNN_CODE_NAMES

    return ACLNN_CODE_NAMES[code]


def test_symbolic_batch_mismatch_at_run_time():
    """The model is valid for any N; feeds whose sizes disagree fail when the node runs."""
    model = examples.example_model()
    feeds = examples.example_feeds(4)
    feeds["teacher_logp"] = feeds["teacher_logp"][:3]
    with pytest.raises(BroadcastError, match="KlDivBackward node 'kl_student': self and target"):
        lo.run_reference(model, feeds)
