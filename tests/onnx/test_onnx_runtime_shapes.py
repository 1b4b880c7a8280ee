"""Compiled standard ONNX fed run-time shapes that contradict the declared ones.

One compiled body serves a signature in which every dimension is dynamic except a broadcast
static 1, and level-2 IR takes the sizes of one axis from whichever operand it likes (the
scale of `mean` from self, the result's shape from target...), because a dynamic dimension
is never broadcast at run time. ONNX Runtime compares no symbolic dimensions, so before the
size check a call with x (1, 4) and t (3, 4), both declared ("N", 4), returned numbers for
other shapes. Now every call either keeps the assumption and returns the contract's result, or
fails in ONNX Runtime (and in onnx's ReferenceEvaluator for inline models) at the size
check, whose node name says what was wrong."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import reference, spec
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.runtime.ort_io import make_session, run_session
from tests.helpers.cases import make_case
from tests.helpers.tolerances import TIGHT, assert_matches

MODES = ("functions", "inline")
CHECK_MESSAGE = "check that the dynamic dimensions of"
STATIC_SIZE = 3
DTYPES = (np.float32, np.float64, np.float16, ml_dtypes.bfloat16)

Dim = tuple[str, int]  # ("full", axis): the axis's size; ("one", axis): a static 1


@dataclass(frozen=True)
class Declared:
    """A model's declared shapes: per axis of a rank-n frame a symbol or a static size, and
    per input the axes it covers (right-aligned) with its static 1s."""

    op_type: str
    attrs: tuple[tuple[str, Any], ...]
    axes: tuple[str | int, ...]  # symbol "N<k>" or STATIC_SIZE
    dims: tuple[tuple[Dim, ...], tuple[Dim, ...], tuple[Dim, ...]]  # grad_output, self, target
    dtypes: tuple[Any, Any, Any]

    def shape(self, i: int) -> list[str | int]:
        return [self.axes[k] if kind == "full" else 1 for kind, k in self.dims[i]]


def _input_dims(draw: st.DrawFn, n: int, allowed: set[int] | None = None) -> tuple[Dim, ...]:
    """Dims of one input of rank <= n (mostly n); with `allowed`, full only on those axes."""
    rank = draw(st.sampled_from([n, n, max(n - 1, 0), 0]))
    dims = []
    for k in range(n - rank, n):
        full = draw(st.sampled_from([True, True, False])) and (allowed is None or k in allowed)
        dims.append(("full" if full else "one", k))
    return tuple(dims)


@st.composite
def declared_models(
    draw: st.DrawFn, op_type: str, reduction: str, shared_axis: bool = False
) -> Declared:
    """A declaration; with `shared_axis`, self and target share a symbolic axis."""
    op = spec.operator(op_type)
    attrs: dict[str, Any] = {"reduction": reduction}
    samples = {"beta": [0.0, 0.5], "delta": [0.5, 1.0]}
    for a in op.attributes[1:]:  # reduction first, as the parameter gives it
        attrs[a.name] = draw(st.sampled_from(list(a.choices or samples[a.name])))
    n = draw(st.sampled_from([2, 1, 3] if shared_axis else [2, 1, 3, 0]))
    axes = [draw(st.sampled_from([f"N{k}", f"N{k}", STATIC_SIZE])) for k in range(n)]
    x, t = _input_dims(draw, n), _input_dims(draw, n)
    if op.input("target").broadcast is spec.Broadcast.FITS:  # B is self: target fits into it
        t = _fitting(draw, n, x)
    if shared_axis:
        k = draw(st.integers(0, n - 1))
        axes[k] = f"N{k}"
        x, t = _full_at(x, n, k), _full_at(t, n, k)
    if op.grad_output_may_enlarge:
        go = _input_dims(draw, n)
    else:  # grad_output of the KL ops (and the binary cross entropies) must not enlarge B
        go = _fitting(draw, n, x, t if op.input("target").broadcast is spec.Broadcast.BASE else ())
    dtypes = tuple(draw(st.sampled_from(DTYPES)) for _ in range(3))
    return Declared(op_type, tuple(attrs.items()), tuple(axes), (go, x, t), dtypes)  # type: ignore[arg-type]


def _fitting(draw: st.DrawFn, n: int, *base: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """Dims that broadcast to the broadcast of `base` without enlarging it."""
    covered = {k for dims in base for kind, k in dims if kind == "full"}
    dims = _input_dims(draw, n, covered)
    return dims[len(dims) - min(len(dims), max(len(d) for d in base)) :]


def _full_at(dims: tuple[Dim, ...], n: int, k: int) -> tuple[Dim, ...]:
    """`dims` extended to cover axis k (new leading axes a static 1), full on axis k."""
    first = min(n - len(dims), k)
    padded = [("one", a) for a in range(first, n - len(dims))] + list(dims)
    return tuple(("full", a) if a == k else (kind, a) for kind, a in padded)


@st.composite
def run_time_shapes(
    draw: st.DrawFn, declared: Declared, contradict: bool = False
) -> tuple[tuple[int, ...], ...]:
    """Shapes that keep the static sizes (ORT enforces those at the graph inputs). Symbolic
    sizes are one value per axis; with `contradict`, one per occurrence, and self and
    target differ on the first axis they share."""
    per_axis = [draw(st.integers(0, 3)) for _ in declared.axes]
    sizes: dict[tuple[int, int], int] = {}
    for i, dims in enumerate(declared.dims):
        for kind, k in dims:
            if kind == "full" and declared.axes[k] != STATIC_SIZE:
                sizes[(i, k)] = draw(st.integers(0, 3)) if contradict else per_axis[k]
    if contradict:
        k = min(k for i, k in sizes if i == 1 and (2, k) in sizes)
        sizes[(1, k)] = draw(st.integers(0, 3))
        sizes[(2, k)] = (sizes[(1, k)] + draw(st.integers(1, 3))) % 4
    return tuple(
        tuple(
            1 if kind == "one" else sizes.get((i, k), STATIC_SIZE) for kind, k in declared.dims[i]
        )
        for i in range(3)
    )


def keeps_the_signature(declared: Declared, shapes: tuple[tuple[int, ...], ...]) -> bool:
    """Every axis has one size among the dims declared with its symbol or static size."""
    sizes: dict[int, set[int]] = {}
    for dims, shape in zip(declared.dims, shapes, strict=True):
        for (kind, k), size in zip(dims, shape, strict=True):
            if kind == "full":
                sizes.setdefault(k, set()).add(size)
    return all(len(s) == 1 for s in sizes.values())


_COMPILED: dict[tuple[Declared, str], tuple[onnx.ModelProto, ort.InferenceSession]] = {}


def compiled(declared: Declared, mode: str) -> tuple[onnx.ModelProto, ort.InferenceSession]:
    key = (declared, mode)
    if key not in _COMPILED:
        node = lo.make_node(declared.op_type, ["go", "x", "t"], "g", **dict(declared.attrs))
        inputs = [
            (name, np.dtype(dtype), declared.shape(i))
            for i, (name, dtype) in enumerate(zip(("go", "x", "t"), declared.dtypes, strict=True))
        ]
        model = lo.make_model(lo.make_graph([node], inputs, ["g"]))
        result = compile_model(model, mode=mode).model
        _COMPILED[key] = (result, make_session(result))
    return _COMPILED[key]


def check_call(declared: Declared, shapes: tuple[tuple[int, ...], ...], mode: str) -> None:
    go_shape, x_shape, t_shape = shapes
    attrs = dict(declared.attrs)
    try:
        case = make_case(declared.op_type, attrs, x_shape, t_shape, go_shape, declared.dtypes)
    except LossGradError:
        case = None  # the shapes do not broadcast: the contract has no result
    inputs = dict(zip(("go", "x", "t"), _arrays(declared, shapes, case), strict=True))
    model, session = compiled(declared, mode)
    runners = [("onnxruntime", lambda: run_session(session, inputs)[0])]
    if mode == "inline":
        runners.append(("ReferenceEvaluator", lambda: _reference_evaluator(model, inputs)))
    for runtime, run in runners:
        context = f"{runtime}, {mode}: {declared} fed {shapes}"
        if keeps_the_signature(declared, shapes):
            assert case is not None, context
            expected = reference.evaluate(declared.op_type, case.inputs, attrs)
            got = run()
            assert_matches(got, expected, declared.op_type, case.inputs, attrs, tolerance=TIGHT)
        else:
            with pytest.raises(Exception) as raised:
                got = run()
                pytest.fail(f"{context}: returned {got!r} instead of failing")
            if runtime == "onnxruntime":
                assert CHECK_MESSAGE in str(raised.value), context


def _arrays(declared: Declared, shapes: tuple[tuple[int, ...], ...], case: Any) -> list[Any]:
    if case is not None:
        return [case.inputs[n] for n in case.checked.present]
    rng = np.random.default_rng(0)
    return [
        rng.uniform(0.1, 2.0, shape).astype(dtype)
        for shape, dtype in zip(shapes, declared.dtypes, strict=True)
    ]


def _reference_evaluator(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> np.ndarray:
    return lo.run_reference(model, inputs)["g"]


OP_REDUCTIONS = [
    (op.name, reduction.value)
    for op in spec.BROADCAST_OPERATORS.values()  # declared shapes that broadcast
    for reduction in op.reductions
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_type,reduction", OP_REDUCTIONS)
@settings(max_examples=12, derandomize=True)
@given(data=st.data())
def test_run_time_shapes_that_keep_the_declaration_compute_spec_results(
    op_type: str, reduction: str, mode: str, data: st.DataObject
) -> None:
    declared = data.draw(declared_models(op_type, reduction), label="declared")
    shapes = data.draw(run_time_shapes(declared), label="shapes")
    assert keeps_the_signature(declared, shapes)
    check_call(declared, shapes, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_type,reduction", OP_REDUCTIONS)
@settings(max_examples=12, derandomize=True)
@given(data=st.data())
def test_contradicting_run_time_shapes_fail_at_the_size_check(
    op_type: str, reduction: str, mode: str, data: st.DataObject
) -> None:
    declared = data.draw(declared_models(op_type, reduction, shared_axis=True), label="declared")
    shapes = data.draw(run_time_shapes(declared, contradict=True), label="shapes")
    assert not keeps_the_signature(declared, shapes)
    check_call(declared, shapes, mode)


# The three calls of the report, declared x, t: ["N", 4].
ISSUE_CALLS = [
    ("KlDivBackward", {"reduction": "none"}, (2, 4), (3, 4)),  # returned a (3, 4) result
    ("SmoothL1LossBackward", {"reduction": "mean"}, (1, 4), (3, 4)),  # 3x too large
    ("KlDivTargetBackward", {"reduction": "mean"}, (2, 4), (3, 4)),  # internal ORT message
    ("KlDivBackward", {"reduction": "mean"}, (3, 4), (1, 4)),  # self's shape, unread
    ("SmoothL1LossBackward", {"reduction": "none"}, (1, 4), (3, 4)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_type,attrs,x_shape,t_shape", ISSUE_CALLS)
def test_symbolic_dimensions_that_differ_at_run_time_fail_at_the_size_check(
    op_type: str, attrs: dict[str, Any], x_shape: tuple[int, ...], t_shape: tuple[int, ...], mode
) -> None:
    node = lo.make_node(op_type, ["go", "x", "t"], "g", **attrs)
    inputs = [("go", "float32", []), ("x", "float32", ["N", 4]), ("t", "float32", ["N", 4])]
    model = compile_model(lo.make_model(lo.make_graph([node], inputs, ["g"])), mode=mode).model
    rng = np.random.default_rng(1)
    feeds = {
        "go": np.array(1.0, np.float32),
        "x": rng.uniform(0.1, 1.0, x_shape).astype(np.float32),
        "t": rng.uniform(0.1, 1.0, t_shape).astype(np.float32),
    }
    with pytest.raises(Exception, match=CHECK_MESSAGE + " self, target agree"):
        run_session(make_session(model), feeds)
    good = {**feeds, "x": rng.uniform(0.1, 1.0, t_shape).astype(np.float32)}
    got = run_session(make_session(model), good)[0]
    named = {"grad_output": good["go"], "self": good["x"], "target": good["t"]}
    expected = reference.evaluate(op_type, named, attrs)
    assert_matches(got, expected, op_type, named, attrs, tolerance=TIGHT)
