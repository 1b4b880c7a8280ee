"""The native ORT kernels against reference.evaluate, across threads, and against the ONNX
function path: every operator x reduction x log_target/beta x broadcast pattern x element
type, with special values, empty and 0-d tensors, on 1 and 2 intra-op threads."""

from __future__ import annotations

import itertools
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest

from lossgrad_compiler import reference, spec
from lossgrad_compiler.evaluation.ort import prepare_model, run_native, session
from lossgrad_compiler.runtime.ort_io import run_session
from tests.helpers.cases import DTYPES, OP_TYPES, fits, full_matrix, make_case, standard_cases
from tests.helpers.tolerances import TIGHT, assert_matches
from tests.ort.support import (
    case_model,
    feeds_of,
    native_session,
    node_model,
    run,
)

pytestmark = pytest.mark.usefixtures("native_kernels")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op_type", OP_TYPES)
def test_matches_reference_on_one_and_two_threads(op_type: str, dtype: np.dtype) -> None:
    """The shared case matrix (every broadcast pattern, grad_output shape and attribute
    combination), 10% special values; results identical bit for bit across thread counts."""
    for case in standard_cases(op_type, dtype, seed=11, specials=0.1):
        model = case_model(case)
        one = run(native_session(model, threads=1), case.inputs)
        expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
        assert_matches(
            one,
            expected,
            case.op_type,
            case.inputs,
            case.attrs,
            tolerance=TIGHT,
            context=case.label,
        )
        two = run(native_session(model, threads=2), case.inputs)
        assert one.tobytes() == two.tobytes(), case.label


# Large enough for many parallel chunks; the sums exercise both loop orders (innermost axis
# kept or summed) and sums over many terms.
LARGE_SHAPES = [
    ("elementwise", (), (300, 257), (300, 257)),
    ("scalar_go_row_broadcast", (), (300, 257), (257,)),
    ("full_go", (300, 257), (300, 257), (300, 257)),
    ("sum_leading", (), (1, 257), (300, 257)),
    ("sum_inner", (), (300, 1), (300, 257)),
    ("sum_all", (), (), (300, 257)),
    ("sum_mixed", (1, 257), (3, 1, 257), (3, 100, 1)),
]


def large_cases() -> list[Any]:
    """Every op with every large shape it takes: an op whose target fits into self (and so
    never sums) the elementwise ones; the sums swapped for KlDivTargetBackward."""
    found = []
    for op_type in OP_TYPES:
        for name, go, x_shape, t_shape in LARGE_SHAPES:
            if spec.operator(op_type) is spec.KL_DIV_TARGET_BACKWARD and name in (
                "sum_leading",
                "sum_inner",
                "sum_all",
            ):
                x_shape, t_shape = t_shape, x_shape  # KlDivTargetBackward sums into target
            if fits(op_type, "target") and name.startswith("sum"):
                continue
            found.append(pytest.param(op_type, go, x_shape, t_shape, id=f"{name}-{op_type}"))
    return found


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op_type,go,x_shape,t_shape", large_cases())
def test_large_inputs_deterministic_across_threads(
    op_type: str, dtype: np.dtype, go: tuple, x_shape: tuple, t_shape: tuple
) -> None:
    op = spec.operator(op_type)
    attrs = {"reduction": "mean", **({"beta": 0.5} if op is spec.SMOOTH_L1_LOSS_BACKWARD else {})}
    case = make_case(op_type, attrs, x_shape, t_shape, go, dtype, seed=3, specials=0.01)
    model = case_model(case)
    one = run(native_session(model, threads=1), case.inputs)
    two = run(native_session(model, threads=2), case.inputs)
    assert one.tobytes() == two.tobytes()
    expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
    assert_matches(one, expected, op_type, case.inputs, attrs, tolerance=TIGHT, context=case.label)


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_broadcast_grad_output_copies_follow_each_block(op_type: str) -> None:
    """A 0-d grad_output is copied into a block buffer only as far as a block reads it. A task
    (32768 points) that starts 10 points before a row's end reads 10 copies, then full blocks
    that need 1024: the buffer must be refilled, not read past its 10 copies. Two calls with
    different grad_output values on two threads make stale copies show."""
    op = spec.operator(op_type)
    x_shape, t_shape = ((32778,), (3, 32778)) if op is spec.KL_DIV_TARGET_BACKWARD else (
        (3, 32778), (32778,)
    )  # fmt: skip
    session = None
    for k, go in enumerate((3.0, -0.25)):
        case = make_case(op_type, {"reduction": "mean"}, x_shape, t_shape, (), seed=k)
        case.inputs["grad_output"] = np.array(go, np.float32)
        session = session or native_session(case_model(case), threads=2)
        got = run(session, case.inputs)
    expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
    assert_matches(got, expected, op_type, case.inputs, case.attrs, tolerance=TIGHT)


@pytest.mark.parametrize("beta", [0.0, 1e-45, 1e-40, 0.5, 3.0e38, float("inf")])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_beta_forms_follow_rounding_to_compute_type(beta: float, dtype: np.dtype) -> None:
    """beta is a run-time value: beta rounding to 0 in C takes the sign form (never divides),
    an infinite beta divides by inf."""
    case = make_case(
        "SmoothL1LossBackward",
        {"reduction": "sum", "beta": beta},
        (64,),
        (64,),
        (),
        dtype,
        seed=5,
        specials=0.2,
    )
    got = run(native_session(case_model(case)), case.inputs)
    expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
    assert_matches(got, expected, case.op_type, case.inputs, case.attrs, tolerance=TIGHT)


def test_special_values_everywhere() -> None:
    """Every pairing of 0, -0, inf, -inf, NaN and finite values in go, self and target."""
    values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.0, 1e-3])
    go, x, t = np.meshgrid(values, values, values, indexing="ij")
    for op_type in OP_TYPES:
        for attrs in ({"reduction": "none"}, {"reduction": "sum"}):
            for dtype in DTYPES:
                inputs = {
                    "grad_output": go.astype(dtype),
                    "self": x.astype(dtype),
                    "target": t.astype(dtype),
                }
                model = node_model(
                    op_type, attrs, (dtype,) * 3, (go.shape,) * 3, (np.dtype(dtype), go.shape)
                )
                got = run(native_session(model), inputs)
                expected = reference.evaluate(op_type, inputs, attrs)
                assert_matches(got, expected, op_type, inputs, attrs, tolerance=TIGHT)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_native_and_function_paths_agree(dtype: np.dtype) -> None:
    """session() with and without the library: the same model, the same results, and both
    match the reference (the function path ships too: a difference there is a failure)."""
    for op_type in OP_TYPES:
        for case in standard_cases(op_type, dtype, seed=7)[::3]:
            model = case_model(case)
            feeds = feeds_of(case.inputs)
            native = run_session(session(model, intra_op_num_threads=1), feeds)[0]
            function = run_session(session(model, native=False), feeds)[0]
            expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
            check = {"op_type": case.op_type, "inputs": case.inputs, "attrs": case.attrs}
            label = f"{case.label}, native"
            assert_matches(native, expected, **check, tolerance=TIGHT, context=label)
            label = f"{case.label}, function path"
            assert_matches(function, expected, **check, tolerance=TIGHT, context=label)
            label = f"{case.label}, native vs function path"
            assert_matches(native, function, **check, tolerance=TIGHT, context=label)


def _optimized_ops(model: onnx.ModelProto, path: str) -> list[tuple[str, str]]:
    session(model, optimized_model_filepath=path)
    return [(n.domain, n.op_type) for n in onnx.load(path).graph.node]


MIXED_TYPES = [
    types for types in itertools.product(DTYPES, repeat=3) if len(set(map(np.dtype, types))) > 1
]
# (self, target, grad_output) shapes: a summed target, a summed self, a 0-d operand.
MIXED_SHAPES = {
    "KlDivTargetBackward": ((3, 4), (4,), ()),
    "KlDivBackward": ((4,), (3, 4), (1,)),
    "SmoothL1LossBackward": ((), (2, 3), (3,)),
    "MseLossBackward": ((2, 1), (3,), (2, 3)),
    "HuberLossBackward": ((), (2, 3), (3,)),
    "SoftMarginLossBackward": ((2, 3), (1, 3), ()),
    "BinaryCrossEntropyBackward": ((2, 3), (3,), ()),
    "BinaryCrossEntropyWithLogitsBackward": ((2, 3), (2, 1), (1,)),
}
"""(self, target, grad_output) per operator: each broadcasts; another operator takes the
shapes that fit its inputs' broadcast kinds (mixed_shapes)."""


def mixed_shapes(op_type: str) -> tuple[tuple[int, ...], ...]:
    if op_type in MIXED_SHAPES:
        return MIXED_SHAPES[op_type]
    op = spec.operator(op_type)
    if op.grad_output_may_enlarge:
        return ((2, 3), (3,), (2, 1))  # self and target broadcast; grad_output enlarges B
    return ((2, 3), (3,), ())  # target and grad_output fit into self


def mixed_type_cases(op_type: str) -> list[tuple[Any, ...]]:
    """Every combination of the required inputs' types that is not one type; the optional
    inputs (all given) cycle through every type beside them. LOSSGRAD_FULL_MATRIX=1: every
    combination of every input's type."""
    optional = spec.operator(op_type).optional_inputs
    if not optional:
        return list(MIXED_TYPES)
    if full_matrix():
        every = itertools.product(DTYPES, repeat=3 + len(optional))
        return [t for t in every if len(set(map(np.dtype, t))) > 1]
    return [
        (*types, *(DTYPES[(k + j) % len(DTYPES)] for j in range(len(optional))))
        for k, types in enumerate(MIXED_TYPES)
    ]


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_mixed_types_run_natively(op_type: str) -> None:
    """Every combination of different input element types runs the native kernel of its
    promoted type, with its result type, matching the reference (2 threads); optional
    inputs given with every type (see mixed_type_cases)."""
    self_shape, target_shape, go_shape = mixed_shapes(op_type)
    attrs = {"reduction": "mean"}
    optional = {n: self_shape[-1:] for n in spec.operator(op_type).optional_inputs}
    for k, dtypes in enumerate(mixed_type_cases(op_type)):
        case = make_case(
            op_type,
            attrs,
            self_shape,
            target_shape,
            go_shape,
            dtypes,
            seed=k,
            optional=optional,
        )
        got = run(native_session(case_model(case), threads=2), case.inputs)
        expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
        assert_matches(
            got, expected, op_type, case.inputs, attrs, tolerance=TIGHT, context=str(dtypes)
        )


def test_mixed_type_nodes_keep_the_native_kernel(tmp_path) -> None:
    """ORT keeps a mixed-type node as the registered kernel instead of inlining its function
    (the fallback when the library is not registered)."""
    mixed = make_case(
        "KlDivTargetBackward",
        {"reduction": "mean"},
        (3, 4),
        (4,),
        (),
        (np.float32, np.float16, ml_dtypes.bfloat16),
        seed=2,
    )
    assert _optimized_ops(case_model(mixed), str(tmp_path / "mixed.onnx")) == [
        (spec.DOMAIN, "KlDivTargetBackward")
    ]
    session(case_model(mixed), native=False, optimized_model_filepath=str(tmp_path / "f.onnx"))
    inlined = [(n.domain, n.op_type) for n in onnx.load(str(tmp_path / "f.onnx")).graph.node]
    assert (spec.DOMAIN, "KlDivTargetBackward") not in inlined


def test_run_native_runs_the_example_model(tmp_path) -> None:
    """The demo's three-node model (symbolic batch, mixed types, broadcast targets): every
    node runs the native kernel."""
    from lossgrad_compiler.examples import example_feeds, example_model

    model = example_model()
    feeds = example_feeds(batch=5)
    kept = _optimized_ops(model, str(tmp_path / "example.onnx"))
    assert sorted(op for domain, op in kept if domain == spec.DOMAIN) == sorted(
        n.op_type for n in model.graph.node if n.domain == spec.DOMAIN
    )
    native = run_native(model, feeds, threads=2)
    function = run_session(session(model, native=False), feeds)
    assert [a.shape for a in native] == [a.shape for a in function]
    for a, b in zip(native, function, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-2)


def test_prepared_model_keeps_a_function_for_every_node() -> None:
    case = make_case("SmoothL1LossBackward", {"reduction": "none", "beta": 0.5}, (2, 3), (3,), ())
    prepared = prepare_model(case_model(case))
    node = prepared.graph.node[0]
    assert (node.domain, node.op_type) == (spec.DOMAIN, "SmoothL1LossBackward")
    assert any(f.overload == node.overload for f in prepared.functions)
