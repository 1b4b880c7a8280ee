"""Every validation row of docs/operators.md, through spec.validate and through reference.evaluate,
and the spec helpers (types, broadcasting with symbolic dims, reduction scale)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch

from lossgrad_compiler import errors, reference, spec
from tests.helpers.divisors import reduction_scale

KL = spec.KL_DIV_BACKWARD.name
KLT = spec.KL_DIV_TARGET_BACKWARD.name
SL1 = spec.SMOOTH_L1_LOSS_BACKWARD.name
HUBER = spec.HUBER_LOSS_BACKWARD.name
CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
F32 = np.dtype(np.float32)

# (shape, dtype) of one input; None is a missing input.
Input = tuple[tuple[int, ...], Any] | None


@dataclass(frozen=True)
class Invalid:
    """One rejected call and what the error must say."""

    name: str
    op: str
    error: type[errors.LossGradError]
    argument: str  # must appear in err.argument
    rule: str  # must appear in err.rule
    grad_output: Input = ((), F32)
    self: Input = ((2, 3), F32)
    target: Input = ((2, 3), F32)
    attrs: dict[str, Any] = field(default_factory=dict)

    def infos(self) -> dict[str, spec.TensorInfo | None]:
        return {n: None if i is None else spec.TensorInfo(i[1], i[0]) for n, i in self._inputs()}

    def arrays(self) -> dict[str, np.ndarray | None]:
        return {n: None if i is None else np.zeros(i[0], i[1]) for n, i in self._inputs()}

    def _inputs(self) -> list[tuple[str, Input]]:
        return list(zip(spec.INPUT_NAMES, (self.grad_output, self.self, self.target), strict=True))


INVALID: list[Invalid] = [
    # a required input is missing: 161001
    *(
        Invalid(f"missing-{n}-{op}", op, errors.MissingInputError, n, "required", **{n: None})
        for op in (KL, KLT, SL1)
        for n in ("grad_output", "self", "target")
    ),
    # element type outside the four float types: 161002
    Invalid(
        "int32-self",
        KL,
        errors.ElementTypeError,
        "self",
        "float16, bfloat16",
        self=((2, 3), np.int32),
    ),
    Invalid(
        "int64-go",
        SL1,
        errors.ElementTypeError,
        "grad_output",
        "got int64",
        grad_output=((), np.int64),
    ),
    Invalid(
        "bool-target", KLT, errors.ElementTypeError, "target", "got bool", target=((2, 3), np.bool_)
    ),
    Invalid(
        "float8-target",
        KLT,
        errors.ElementTypeError,
        "target",
        "float8_e4m3fn",
        target=((2, 3), ml_dtypes.float8_e4m3fn),
    ),
    Invalid(
        "complex-self",
        SL1,
        errors.ElementTypeError,
        "self",
        "complex64",
        self=((2, 3), np.complex64),
    ),
    Invalid(
        "uint8-go", KL, errors.ElementTypeError, "grad_output", "uint8", grad_output=((), np.uint8)
    ),
    # rank above 8
    Invalid("rank9-self", KL, errors.RankError, "self", "at most 8, got 9", self=((1,) * 9, F32)),
    Invalid("rank9-target", KLT, errors.RankError, "target", "at most 8", target=((1,) * 9, F32)),
    Invalid(
        "rank9-go", SL1, errors.RankError, "grad_output", "at most 8", grad_output=((1,) * 9, F32)
    ),
    # shapes that do not broadcast
    *(
        Invalid(
            f"self-target-{op}",
            op,
            errors.BroadcastError,
            "target",
            "do not broadcast",
            self=((2, 3), F32),
            target=((4, 3), F32),
        )
        for op in (KL, KLT, SL1)
    ),
    Invalid(
        "go-no-broadcast-kl",
        KL,
        errors.BroadcastError,
        "grad_output",
        "do not broadcast",
        grad_output=((5,), F32),
    ),
    Invalid(
        "go-no-broadcast-sl1",
        SL1,
        errors.BroadcastError,
        "grad_output",
        "do not broadcast",
        grad_output=((2, 5), F32),
    ),
    Invalid(
        "empty-vs-2",
        SL1,
        errors.BroadcastError,
        "target",
        "do not broadcast",
        self=((0,), F32),
        target=((2,), F32),
    ),
    # grad_output that would enlarge B (KL ops only)
    Invalid(
        "go-enlarges-rank-kl",
        KL,
        errors.BroadcastError,
        "grad_output",
        "without enlarging",
        grad_output=((4, 2, 3), F32),
    ),
    Invalid(
        "go-enlarges-axis-klt",
        KLT,
        errors.BroadcastError,
        "grad_output",
        "without enlarging",
        grad_output=((4, 3), F32),
        self=((1, 3), F32),
        target=((1, 3), F32),
    ),
    Invalid(
        "go-enlarges-scalar-b-kl",
        KL,
        errors.BroadcastError,
        "grad_output",
        "without enlarging",
        grad_output=((1,), F32),
        self=((), F32),
        target=((), F32),
    ),
    # reduction outside its range for the op
    Invalid(
        "batchmean-sl1",
        SL1,
        errors.AttributeValueError,
        "reduction",
        "'none', 'mean', 'sum'",
        attrs={"reduction": "batchmean"},
    ),
    Invalid(
        "avg-kl",
        KL,
        errors.AttributeValueError,
        "reduction",
        "got 'avg'",
        attrs={"reduction": "avg"},
    ),
    Invalid(
        "uppercase-klt",
        KLT,
        errors.AttributeValueError,
        "reduction",
        "got 'MEAN'",
        attrs={"reduction": "MEAN"},
    ),
    # beta < 0 or NaN
    Invalid("beta-negative", SL1, errors.AttributeValueError, "beta", ">= 0", attrs={"beta": -1.0}),
    Invalid(
        "beta-tiny-negative",
        SL1,
        errors.AttributeValueError,
        "beta",
        ">= 0",
        attrs={"beta": -1e-300},
    ),
    Invalid(
        "beta-minus-inf", SL1, errors.AttributeValueError, "beta", ">= 0", attrs={"beta": -math.inf}
    ),
    Invalid(
        "beta-nan", SL1, errors.AttributeValueError, "beta", "not NaN", attrs={"beta": math.nan}
    ),
    # delta <= 0 or NaN (an exclusive bound: delta = 0 is refused, unlike beta = 0)
    *(
        Invalid(
            f"delta-{name}", HUBER, errors.AttributeValueError, "delta", "> 0", attrs={"delta": v}
        )
        for name, v in (
            ("zero", 0.0),
            ("minus-zero", -0.0),
            ("int-zero", 0),
            ("negative", -1.0),
            ("tiny-negative", -5e-324),
            ("minus-inf", -math.inf),
        )
    ),
    Invalid(
        "delta-nan",
        HUBER,
        errors.AttributeValueError,
        "delta",
        "not NaN",
        attrs={"delta": math.nan},
    ),
    # attributes of the wrong type
    Invalid(
        "beta-str",
        SL1,
        errors.AttributeValueError,
        "beta",
        "must be a float, got str",
        attrs={"beta": "1.0"},
    ),
    Invalid(
        "beta-bool",
        SL1,
        errors.AttributeValueError,
        "beta",
        "must be a float, got bool",
        attrs={"beta": True},
    ),
    Invalid(
        "log_target-float",
        KL,
        errors.AttributeValueError,
        "log_target",
        "must be an int",
        attrs={"log_target": 1.0},
    ),
    Invalid(
        "log_target-str",
        KLT,
        errors.AttributeValueError,
        "log_target",
        "must be an int",
        attrs={"log_target": "1"},
    ),
    Invalid(
        "log_target-2",
        KLT,
        errors.AttributeValueError,
        "log_target",
        "one of 0, 1",
        attrs={"log_target": 2},
    ),
    Invalid(
        "reduction-int",
        KL,
        errors.AttributeValueError,
        "reduction",
        "must be a string, got int",
        attrs={"reduction": 1},
    ),
    Invalid(
        "reduction-int-sl1",
        SL1,
        errors.AttributeValueError,
        "reduction",
        "must be a string",
        attrs={"reduction": 0},
    ),
    # unknown attributes
    Invalid(
        "unknown-attr",
        KL,
        errors.AttributeValueError,
        "foo",
        "is not an attribute",
        attrs={"foo": 1},
    ),
    Invalid(
        "beta-on-kl",
        KLT,
        errors.AttributeValueError,
        "beta",
        "is not an attribute",
        attrs={"beta": 1.0},
    ),
    Invalid(
        "log_target-on-sl1",
        SL1,
        errors.AttributeValueError,
        "log_target",
        "is not an attribute",
        attrs={"log_target": 0},
    ),
]


def _check_error(err: errors.LossGradError, case: Invalid) -> None:
    """Class, aclnn code, and a one-line message that names op, argument and rule."""
    assert isinstance(err, case.error)
    expected_code = (
        errors.ACLNN_ERR_PARAM_NULLPTR
        if case.error is errors.MissingInputError
        else errors.ACLNN_ERR_PARAM_INVALID
    )
    assert err.code == expected_code
    assert err.op == case.op
    assert case.argument in err.argument
    assert case.rule in err.rule
    message = str(err)
    assert message.startswith(f"{case.op}: {err.argument}: ")
    assert case.rule in message
    assert f"[aclnn {expected_code} " in message
    assert "\n" not in message


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_spec_validate_rejects(case: Invalid) -> None:
    with pytest.raises(case.error) as info:
        spec.validate(case.op, case.infos(), case.attrs)
    _check_error(info.value, case)


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_reference_rejects_with_the_same_error(case: Invalid) -> None:
    arrays = case.arrays()
    snapshot = {n: None if a is None else a.copy() for n, a in arrays.items()}
    with pytest.raises(case.error) as info:
        reference.evaluate(case.op, arrays, case.attrs)
    _check_error(info.value, case)
    with pytest.raises(case.error) as direct:
        spec.validate(case.op, case.infos(), case.attrs)
    assert str(info.value) == str(direct.value)
    for n, a in arrays.items():  # a rejected call touches nothing
        assert a is None or np.array_equal(a, snapshot[n])


def test_missing_key_is_a_missing_input() -> None:
    arrays = {"grad_output": np.zeros(()), "self": np.zeros(3)}
    with pytest.raises(errors.MissingInputError) as info:
        reference.evaluate(KL, arrays, {})
    assert info.value.argument == "target" and info.value.code == errors.ACLNN_ERR_PARAM_NULLPTR


def test_unknown_input_and_unknown_op_are_rejected() -> None:
    arrays = {n: np.zeros(3, np.float32) for n in spec.INPUT_NAMES}
    with pytest.raises(errors.InvalidArgumentError) as info:
        reference.evaluate(KL, {**arrays, "weight": np.zeros(3)}, {})
    assert info.value.argument == "weight" and info.value.code == errors.ACLNN_ERR_PARAM_INVALID
    with pytest.raises(errors.InvalidArgumentError) as info:
        reference.evaluate("KlDiv", arrays, {})
    assert "op_type" in info.value.argument and KL in info.value.rule


def test_validation_order_follows_cann() -> None:
    """null before element type before rank before broadcast before attributes."""
    f32 = spec.TensorInfo(F32, (2, 3))
    i32 = spec.TensorInfo(np.int32, (1,) * 9)
    bad = {"reduction": "avg"}
    with pytest.raises(errors.MissingInputError):
        spec.validate(KL, {"grad_output": None, "self": i32, "target": f32}, bad)
    with pytest.raises(errors.ElementTypeError):
        spec.validate(KL, {"grad_output": f32, "self": i32, "target": f32}, bad)
    rank9 = spec.TensorInfo(F32, (1,) * 9)
    with pytest.raises(errors.RankError):
        spec.validate(
            KL, {"grad_output": f32, "self": rank9, "target": spec.TensorInfo(F32, (4,))}, bad
        )
    no_bc = spec.TensorInfo(F32, (4, 3))
    with pytest.raises(errors.BroadcastError):
        spec.validate(KL, {"grad_output": f32, "self": f32, "target": no_bc}, bad)
    with pytest.raises(errors.AttributeValueError):
        spec.validate(KL, {"grad_output": f32, "self": f32, "target": f32}, bad)


# --------------------------------------------------------------------------- valid edges


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        (SL1, {"beta": math.inf}),
        (SL1, {"beta": 0}),  # an int is a valid float attribute
        (SL1, {"beta": np.float32(0.5)}),
        (SL1, {"beta": 0.0, "reduction": "none"}),
        (KL, {"reduction": b"batchmean"}),  # ONNX string attributes arrive as bytes
        (KLT, {"log_target": np.int64(1)}),
        (KLT, {"reduction": None}),  # None means "not given": the default applies
        (KL, {}),
    ],
)
def test_valid_attribute_edges(op: str, attrs: dict[str, Any]) -> None:
    checked = spec.validate(op, _infos((), (2, 3), (2, 3)), attrs)
    assert set(checked.attrs) == {a.name for a in checked.op.attributes}
    arrays = {
        n: np.ones(s, np.float32)
        for n, s in zip(spec.INPUT_NAMES, ((), (2, 3), (2, 3)), strict=True)
    }
    assert reference.evaluate(op, arrays, attrs).shape == (2, 3)


def _float_bounds() -> list[tuple[str, spec.AttributeSpec]]:
    """Every FLOAT attribute with a lower bound, of every operator, as the spec has them."""
    return [
        (op.name, a)
        for op in spec.OPERATORS.values()
        for a in op.attributes
        if a.kind is spec.AttrKind.FLOAT and a.minimum is not None
    ]


def test_the_exclusive_bounds_are_the_known_ones() -> None:
    """delta > 0 is the one exclusive bound; a bound that stops being exclusive (delta = 0
    accepted) or a new one is a change of the contract, and this test names it."""
    exclusive = {(op, a.name) for op, a in _float_bounds() if a.exclusive}
    assert exclusive == {(HUBER, "delta")}
    assert {(op, a.name) for op, a in _float_bounds()} == {
        (SL1, "beta"),
        (HUBER, "delta"),
        (CE, "label_smoothing"),
    }
    upper = {(op, a.name) for op, a in _float_bounds() if a.maximum is not None}
    assert upper == {(CE, "label_smoothing")}


def _bounded_call(op: str) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
    """Valid float32 inputs of an operator and its result's shape."""
    if spec.operator(op).has_classes:
        arrays = {
            "grad_output": np.ones((), np.float32),
            "self": np.zeros((2, 3), np.float32),
            "target": np.zeros(2, np.int64),
        }
        return arrays, (2, 3)
    shapes = ((), (2, 3), (2, 3))
    return {n: np.ones(s, np.float32) for n, s in zip(spec.INPUT_NAMES, shapes, strict=True)}, (
        2,
        3,
    )


@pytest.mark.parametrize(
    ("op", "attribute"),
    [(op, a) for op, a in _float_bounds() if a.maximum is not None],
    ids=lambda v: getattr(v, "name", v),
)
def test_each_upper_bound_as_the_spec_states_it(op: str, attribute: spec.AttributeSpec) -> None:
    """At its maximum an attribute is valid; one step above it (and inf) never is."""
    assert attribute.maximum is not None
    arrays, shape = _bounded_call(op)
    highest = attribute.maximum
    above = float(np.nextafter(highest, math.inf))
    for value, valid in [(highest, True), (above, False), (math.inf, False)]:
        attrs = {attribute.name: value}
        if valid:
            assert reference.evaluate(op, arrays, attrs).shape == shape
            continue
        with pytest.raises(errors.AttributeValueError) as err:
            reference.evaluate(op, arrays, attrs)
        assert attribute.rule() in str(err.value), (value, str(err.value))


@pytest.mark.parametrize(("op", "attribute"), _float_bounds(), ids=lambda v: getattr(v, "name", v))
def test_each_lower_bound_as_the_spec_states_it(op: str, attribute: spec.AttributeSpec) -> None:
    """At its minimum an attribute is valid unless the bound is exclusive; one step below it
    (and -inf, NaN) never is, one step above it always is. Through spec.validate and
    reference.evaluate (the fast paths; the generated C++ checks read the same table)."""
    assert attribute.minimum is not None
    lowest = attribute.minimum
    below = float(np.nextafter(lowest, -math.inf))
    above = float(np.nextafter(lowest, math.inf))
    cases = [(lowest, not attribute.exclusive), (below, False), (above, True)]
    cases += [(-math.inf, False), (math.nan, False)]
    cases += [(math.inf, attribute.maximum is None)]
    if lowest == 0.0:
        cases.append((-0.0, not attribute.exclusive))  # -0.0 == 0.0
    arrays, shape = _bounded_call(op)
    infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in arrays.items()}
    for value, valid in cases:
        attrs = {attribute.name: value}
        if valid:
            spec.validate(op, infos, attrs)
            assert reference.evaluate(op, arrays, attrs).shape == shape
            continue
        for check in (
            lambda a=attrs: spec.validate(op, infos, a),
            lambda a=attrs: reference.evaluate(op, arrays, a),
        ):
            with pytest.raises(errors.AttributeValueError) as err:
                check()
            assert err.value.code == errors.ACLNN_ERR_PARAM_INVALID, value
            assert attribute.rule() in str(err.value), (value, str(err.value))


def test_defaults_come_from_the_spec() -> None:
    assert spec.validate(SL1, _infos((), (3,), (3,)), {}).attrs == {
        "reduction": "mean",
        "beta": 1.0,
    }
    assert spec.validate(KL, _infos((), (3,), (3,)), {}).attrs == {
        "reduction": "mean",
        "log_target": 0,
    }
    assert (
        spec.validate(KL, _infos((), (3,), (3,)), {"reduction": b"sum"}).attrs["reduction"] == "sum"
    )


def test_smooth_l1_grad_output_may_enlarge() -> None:
    checked = spec.validate(SL1, _infos((4, 1, 3), (2, 3), (3,)), {})
    assert checked.iteration_shape == (4, 2, 3) and checked.result_shape == (4, 2, 3)
    assert checked.broadcast_shape == (2, 3)


def test_kl_grad_output_may_broadcast_without_enlarging() -> None:
    for go in [(), (1,), (3,), (1, 3), (2, 1), (2, 3)]:
        checked = spec.validate(KL, _infos(go, (2, 3), (3,)), {})
        assert checked.iteration_shape == (2, 3) and checked.result_shape == (2, 3)


def test_symbolic_shapes_validate() -> None:
    checked = spec.validate(KLT, _infos((), ("n", 3), (1, 3)), {})
    assert checked.broadcast_shape == ("n", 3) and checked.result_shape == (1, 3)
    with pytest.raises(errors.BroadcastError):
        spec.validate(KL, _infos(("m", 4), ("n", 3), (1, 3)), {})
    assert spec.validate(KL, _infos((), None, (3,)), {}).broadcast_shape is None


# --------------------------------------------------------------------------- spec helpers

FLOATS = spec.FLOAT_TYPES
TORCH = {t: getattr(torch, t.name) for t in FLOATS}


@pytest.mark.parametrize("a", FLOATS, ids=lambda t: t.name)
@pytest.mark.parametrize("b", FLOATS, ids=lambda t: t.name)
@pytest.mark.parametrize("c", FLOATS, ids=lambda t: t.name)
def test_promote_types_matches_torch(
    a: spec.FloatType, b: spec.FloatType, c: spec.FloatType
) -> None:
    expected = torch.promote_types(torch.promote_types(TORCH[a], TORCH[b]), TORCH[c])
    promoted = spec.promote_types([a, b, c])
    assert TORCH[promoted] == expected
    assert spec.compute_type(promoted) == (spec.FLOAT32 if promoted.is_half else promoted)


def test_compute_type_widens_only_half_types() -> None:
    assert spec.compute_type(spec.FLOAT16) is spec.FLOAT32
    assert spec.compute_type(spec.BFLOAT16) is spec.FLOAT32
    assert spec.compute_type(spec.FLOAT32) is spec.FLOAT32
    assert spec.compute_type(spec.FLOAT64) is spec.FLOAT64


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("float16", spec.FLOAT16),
        ("bf16", spec.BFLOAT16),
        (1, spec.FLOAT32),
        (11, spec.FLOAT64),
        ("tensor(double)", spec.FLOAT64),
        (np.float32, spec.FLOAT32),
        ("half", spec.FLOAT16),
        (ml_dtypes.bfloat16, spec.BFLOAT16),
        (np.dtype("float64"), spec.FLOAT64),
        (spec.FLOAT16, spec.FLOAT16),
        (np.int32, None),
        ("int8", None),
        (True, None),
        (7, None),
        ("tensor(int32)", None),
        (ml_dtypes.float8_e5m2, None),
        (object(), None),
    ],
)
def test_float_type_lookup(key: Any, expected: spec.FloatType | None) -> None:
    assert spec.float_type(key) is expected


@pytest.mark.parametrize(
    ("shapes", "expected"),
    [
        ([(2, 3), (3,)], (2, 3)),
        ([(), (4, 1)], (4, 1)),
        ([(0, 3), (1, 3)], (0, 3)),
        ([(0,), ()], (0,)),
        ([("n", 3), (1, 3)], ("n", 3)),
        ([("n",), (4,)], (4,)),  # a static size wins; "n" must equal 4 at run time
        ([("n",), ("n",)], ("n",)),
        ([("n",), ("m",)], (None,)),  # two names: unknown
        ([(None, 2), (3, 1)], (3, 2)),
        ([(1,), ("k",)], ("k",)),
        ([(2, 1, 4), (3, 1)], (2, 3, 4)),
    ],
)
def test_broadcast_shapes(shapes: list[spec.Shape], expected: spec.Shape) -> None:
    named = [(f"in{i}", s) for i, s in enumerate(shapes)]
    assert spec.broadcast_shapes("Op", named) == expected
    if all(isinstance(d, int) for s in shapes for d in s):
        assert expected == np.broadcast_shapes(*shapes)


def test_broadcast_shapes_names_the_clash() -> None:
    with pytest.raises(errors.BroadcastError) as info:
        spec.broadcast_shapes("Op", [("left", (2, 3)), ("right", (4, 3))])
    assert info.value.argument == "left and right"
    assert "axis -2: 2 vs 4" in info.value.rule


@pytest.mark.parametrize(
    ("reduction", "self_shape", "b", "expected"),
    [
        ("none", (4, 3), (4, 3), 1.0),
        ("sum", (4, 3), (4, 3), 1.0),
        ("mean", (4, 3), (4, 3), 1 / 12),
        ("mean", (3,), (4, 3), 1 / 12),  # numel of B, not of self
        ("batchmean", (4, 3), (4, 3), 1 / 4),
        ("batchmean", (1, 3), (4, 3), 1.0),  # self's dim 0 (PyTorch), not B's (CANN)
        ("batchmean", (3,), (4, 3), 1 / 3),
        ("batchmean", (), (4, 3), 1.0),  # 0-d self: no division
        ("mean", (0, 3), (0, 3), math.inf),  # empty: nothing is scaled
        ("batchmean", (0, 3), (0, 3), math.inf),
        ("mean", (), (), 1.0),
    ],
)
def test_reduction_scale(
    reduction: str, self_shape: tuple[int, ...], b: tuple[int, ...], expected: float
) -> None:
    assert reduction_scale(reduction, self_shape, b) == expected


def test_reductions_and_codes() -> None:
    assert [r.aclnn_code for r in spec.KL_DIV_BACKWARD.reductions] == [0, 1, 2, 3]
    assert [r.value for r in spec.SMOOTH_L1_LOSS_BACKWARD.reductions] == ["none", "mean", "sum"]
    assert spec.KL_DIV_TARGET_BACKWARD.reductions == spec.KL_DIV_BACKWARD.reductions


def test_result_type_and_shape_rules() -> None:
    infos = {
        "grad_output": spec.TensorInfo(np.float16, ()),
        "self": spec.TensorInfo(ml_dtypes.bfloat16, (3,)),
        "target": spec.TensorInfo(np.float64, (2, 3)),
    }
    kl = spec.validate(KL, infos, {})
    assert (kl.result_type, kl.result_shape, kl.compute) == (spec.BFLOAT16, (3,), spec.FLOAT64)
    klt = spec.validate(KLT, infos, {})
    assert (klt.result_type, klt.result_shape) == (spec.FLOAT64, (2, 3))
    sl1 = spec.validate(SL1, infos, {})
    assert (sl1.result_type, sl1.result_shape) == (spec.FLOAT64, (2, 3))
    halves = {**infos, "target": spec.TensorInfo(np.float16, (2, 3))}
    sl1_half = spec.validate(SL1, halves, {})
    assert (sl1_half.promoted, sl1_half.compute) == (spec.FLOAT32, spec.FLOAT32)


def _infos(go: Any, x: Any, t: Any) -> dict[str, spec.TensorInfo]:
    return {n: spec.TensorInfo(F32, s) for n, s in zip(spec.INPUT_NAMES, (go, x, t), strict=True)}
