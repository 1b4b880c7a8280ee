"""Input generators shared by every test that runs the operators.

A `Case` is one call (op_type, ONNX-named inputs, ONNX-style attributes). The reference
tests, the ONNX Runtime tests, the native-kernel tests and the emulator tests draw their
inputs from here, so they cover the same broadcast patterns, attributes and element types:

    for case in standard_cases("KlDivBackward", dtype=np.float32):
        expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
        assert_close(run_my_backend(case), expected, compute=case.compute_dtype, tight=True)

Values are drawn from numpy generators seeded per case, so every case is reproducible
from its label.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lossgrad_compiler import spec

OP_TYPES: tuple[str, ...] = tuple(spec.BROADCAST_OPERATORS)
DTYPES: tuple[np.dtype, ...] = tuple(t.dtype for t in spec.FLOAT_TYPES)
SPECIAL_VALUES: tuple[float, ...] = (0.0, -0.0, np.inf, -np.inf, np.nan)
BETAS: tuple[float, ...] = (0.0, 1e-6, 0.5, 1.0, 2.5)
# Exactly float32 values: an ONNX FLOAT attribute holds 32 bits, and delta multiplies the
# gradient, so a double the model cannot hold would not compare with the reference.
DELTAS: tuple[float, ...] = (2.0**-20, 0.5, 1.0, 2.5)
FLOAT_SAMPLES: dict[str, tuple[float, ...]] = {"beta": BETAS, "delta": DELTAS}
"""The values the matrices try for each FLOAT attribute."""

Shape = tuple[int, ...]

FULL_MATRIX_ENV = "LOSSGRAD_FULL_MATRIX"


def full_matrix() -> bool:
    """Whether the larger per-operator matrices run (LOSSGRAD_FULL_MATRIX=1): every input
    type combination of the operators with optional inputs, and more hypothesis examples.
    By default each matrix still covers every operator, type and optional input."""
    return os.environ.get(FULL_MATRIX_ENV, "") not in ("", "0")


def in_turn(cases: Sequence[Any], turn: int) -> list[Any]:
    """Every other case, from `turn` % 2 on (a test over type groups gives each group a turn,
    so each case meets half of the groups); every case with LOSSGRAD_FULL_MATRIX=1. For the
    matrices whose every case costs a compile of its own (IREE, AscendNPU IR)."""
    return list(cases) if full_matrix() else list(cases[turn % 2 :: 2])


def operator_type_variant_matrix(
    op_types: Sequence[str], groups: Sequence[str], variants: Sequence[Any]
) -> list[tuple[str, str, Any]]:
    """The parameters of a test over operator x type group x variant (static or dynamic
    shapes, an ONNX mode): by default every (operator, type group) pair once, its variant
    taken in turn, so that every operator and every type group still meets every variant;
    with LOSSGRAD_FULL_MATRIX=1 the whole cross product."""
    if full_matrix():
        return list(itertools.product(op_types, groups, variants))
    return [
        (op, group, variants[(i + j) % len(variants)])
        for i, op in enumerate(op_types)
        for j, group in enumerate(groups)
    ]


@dataclass(frozen=True)
class BroadcastPattern:
    """Shapes of self and target; B = broadcast(self, target)."""

    name: str
    self_shape: Shape
    target_shape: Shape

    @property
    def b(self) -> Shape:
        return tuple(np.broadcast_shapes(self.self_shape, self.target_shape))


BROADCAST_PATTERNS: tuple[BroadcastPattern, ...] = (
    BroadcastPattern("same", (2, 3), (2, 3)),
    BroadcastPattern("target_row", (4, 3), (3,)),
    BroadcastPattern("target_column", (4, 3), (4, 1)),
    BroadcastPattern("self_row", (3,), (4, 3)),
    BroadcastPattern("self_column", (4, 1), (4, 3)),
    BroadcastPattern("self_ones", (1, 1), (2, 3)),  # every dimension broadcast, not 0-d
    BroadcastPattern("target_ones", (2, 3), (1, 1)),
    BroadcastPattern("both", (2, 1, 4), (3, 1)),
    BroadcastPattern("self_scalar", (), (2, 3)),
    BroadcastPattern("target_scalar", (2, 3), ()),
    BroadcastPattern("scalars", (), ()),
    BroadcastPattern("rank1", (5,), (5,)),
    BroadcastPattern("rank8", (2, 1, 2, 1, 2, 1, 2, 1), (1, 2, 1, 2, 1, 2, 1, 2)),
    BroadcastPattern("empty", (0, 3), (3,)),
    BroadcastPattern("empty_b", (1, 3), (0, 3)),
    BroadcastPattern("empty_self_leading", (0, 3), (2, 1, 3)),
)
PATTERNS_BY_NAME: dict[str, BroadcastPattern] = {p.name: p for p in BROADCAST_PATTERNS}


def attribute_grid(op_type: str) -> list[dict[str, Any]]:
    """Every combination of the op's attribute values: each choice of a STRING or INT
    attribute (reduction, log_target), each sample of a FLOAT one (FLOAT_SAMPLES)."""
    op = spec.operator(op_type)
    values = [a.choices if a.choices is not None else FLOAT_SAMPLES[a.name] for a in op.attributes]
    names = [a.name for a in op.attributes]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def fits(op_type: str, name: str) -> bool:
    """Whether an input must broadcast to B without enlarging it."""
    return spec.operator(op_type).input(name).broadcast is spec.Broadcast.FITS


def pattern_valid(op_type: str, pattern: BroadcastPattern) -> bool:
    """Whether the op takes these self and target shapes (a target that fits into self)."""
    if not fits(op_type, "target"):
        return True
    return _fits_into(pattern.target_shape, pattern.self_shape)


def _fits_into(shape: Shape, b: Shape) -> bool:
    if len(shape) > len(b):
        return False
    tail = b[len(b) - len(shape) :]
    return all(d in (1, e) for d, e in zip(shape, tail, strict=True))


def optional_shapes(name: str, b: Shape) -> dict[str, Shape]:
    """Shapes of an optional input (weight, pos_weight) that broadcast to B, by name: `full`
    is B, `row` its last axis (pos_weight's usual form: one per class), `scalar` 0-d."""
    shapes: dict[str, Shape] = {"full": b}
    if b:
        shapes["row"] = b[-1:]
    if name == "weight":
        shapes["scalar"] = ()
    return shapes


def optional_variants(op_type: str, b: Shape) -> list[dict[str, Shape]]:
    """Which optional inputs are given, with what shapes: every subset of the op's optional
    inputs (none given first), each given input cycling through its shapes."""
    names = spec.operator(op_type).optional_inputs
    variants: list[dict[str, Shape]] = []
    for k in range(len(names) + 1):
        for subset in itertools.combinations(names, k):
            choices = [list(optional_shapes(n, b).values()) for n in subset]
            width = max((len(c) for c in choices), default=1)
            for j in range(width):
                variants.append({n: c[j % len(c)] for n, c in zip(subset, choices, strict=True)})
    return variants


def grad_output_shapes(op_type: str, b: Shape) -> dict[str, Shape]:
    """The grad_output shapes the op accepts for B, by name.

    "full" is B (what autograd gives for reduction none), "scalar" is 0-d (what autograd
    gives for the other reductions); "one" is [1], "partial" is B with its first axis 1;
    "enlarging" (SmoothL1LossBackward only, B of rank < 8) adds a leading axis of 3 to B."""
    op = spec.operator(op_type)
    shapes: dict[str, Shape] = {"full": b, "scalar": ()}
    if len(b) >= 1 or op.grad_output_may_enlarge:
        shapes["one"] = (1,)
    if len(b) >= 2 and b[0] != 1:
        shapes["partial"] = (1, *b[1:])
    if op.grad_output_may_enlarge and len(b) < spec.MAX_RANK:
        shapes["enlarging"] = (3, *b)
    return shapes


def random_array(
    rng: np.random.Generator,
    shape: Shape,
    dtype: Any,
    *,
    positive: bool = False,
    center: float = 0.0,
    specials: float = 0.0,
    interval: tuple[float, float] | None = None,
) -> np.ndarray:
    """Values of magnitude around 1 (normal around `center`, or in [0.05, 3) when
    `positive`, or uniform in `interval`), with a fraction `specials` replaced by 0, -0,
    +-inf and NaN."""
    if interval is not None:
        values = rng.uniform(*interval, size=shape)
    elif positive:
        values = rng.uniform(0.05, 3.0, size=shape)
    else:
        values = rng.normal(center, 1.0, size=shape)
    if specials > 0.0:
        mask = rng.random(size=shape) < specials
        values[mask] = rng.choice(np.array(SPECIAL_VALUES), size=int(mask.sum()))
    return np.asarray(values).astype(dtype)


@dataclass(frozen=True)
class Case:
    """One call of an operator; `label` says how it was made (and reproduces it)."""

    op_type: str
    inputs: dict[str, np.ndarray]
    attrs: dict[str, Any]
    label: str = ""
    checked: spec.CheckedCall = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in self.inputs.items()}
        object.__setattr__(self, "checked", spec.validate(self.op_type, infos, self.attrs))

    @property
    def compute_dtype(self) -> np.dtype:
        return self.checked.compute.dtype

    @property
    def result_dtype(self) -> np.dtype:
        return self.checked.result_type.dtype

    @property
    def result_shape(self) -> Shape:
        return tuple(self.checked.result_shape)  # type: ignore[arg-type]


# Where an operator's formula is meant to be read: probabilities for binary cross entropy's
# self, labels in [0, 1] for the binary cross entropies' targets, positive weights.
_INTERVALS: dict[tuple[str, str], tuple[float, float]] = {
    (spec.BINARY_CROSS_ENTROPY_BACKWARD.name, "self"): (0.02, 0.98),
    (spec.BINARY_CROSS_ENTROPY_BACKWARD.name, "target"): (0.0, 1.0),
    (spec.BINARY_CROSS_ENTROPY_BACKWARD.name, "weight"): (0.1, 2.0),
    (spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name, "target"): (0.0, 1.0),
    (spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name, "weight"): (0.1, 2.0),
    (spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name, "pos_weight"): (0.1, 4.0),
}


def make_case(
    op_type: str,
    attrs: dict[str, Any],
    self_shape: Shape,
    target_shape: Shape,
    grad_output_shape: Shape,
    dtypes: Sequence[Any] | Any = np.float32,
    *,
    seed: int = 0,
    specials: float = 0.0,
    label: str = "",
    optional: dict[str, Shape] | None = None,
) -> Case:
    """A case with random values; `dtypes` is one dtype or one per present input
    (grad_output, self, target, then the `optional` inputs given, in the op's order).

    Targets of KlDivTargetBackward without log_target are positive (the domain of ln);
    log-targets are centred at -1 like log-probabilities; binary cross entropy reads
    probabilities and labels (`_INTERVALS`)."""
    op = spec.operator(op_type)
    optional = optional or {}
    given = [n for n in op.optional_inputs if n in optional]
    types = _dtypes(dtypes, 3 + len(given))
    rng = np.random.default_rng(seed)
    log_target = bool(attrs.get("log_target", 0))
    positive_target = op_type == spec.KL_DIV_TARGET_BACKWARD.name and not log_target
    shapes = {"grad_output": grad_output_shape, "self": self_shape, "target": target_shape}
    shapes.update({n: optional[n] for n in given})
    inputs = {}
    for (name, shape), dtype in zip(shapes.items(), types, strict=True):
        inputs[name] = random_array(
            rng,
            shape,
            dtype,
            positive=name == "target" and positive_target,
            center=-1.0 if name == "target" and log_target else 0.0,
            specials=specials,
            interval=_INTERVALS.get((op_type, name)),
        )
    if not label:
        names = "-".join(np.dtype(d).name for d in types)
        extra = "".join(f"-{n}{list(optional[n])}" for n in given)
        label = (
            f"{op_type}-{_attrs_label(attrs)}-self{list(self_shape)}-target{list(target_shape)}"
            f"-go{list(grad_output_shape)}{extra}-{names}-seed{seed}"
        )
    return Case(op_type, inputs, dict(attrs), label)


def standard_cases(
    op_type: str, dtype: Any = np.float32, *, seed: int = 0, specials: float = 0.0
) -> list[Case]:
    """The shared matrix for one op and one element type (or one per input, required ones
    first): every broadcast pattern the op takes with every grad_output shape it accepts,
    the attribute combinations and the optional inputs (absent, and present in each of
    their shapes) assigned round-robin so that each of them appears several times."""
    grid = attribute_grid(op_type)
    pairs = [
        (pattern, go_name, go_shape)
        for pattern in BROADCAST_PATTERNS
        if pattern_valid(op_type, pattern)
        for go_name, go_shape in grad_output_shapes(op_type, pattern.b).items()
    ]
    n_optional = len(optional_variants(op_type, (2, 3)))
    cases = []
    for k in range(max(len(pairs), len(grid), n_optional)):
        pattern, go_name, go_shape = pairs[k % len(pairs)]
        attrs = grid[k % len(grid)]
        variants = optional_variants(op_type, pattern.b)
        optional = variants[k % len(variants)]
        types = _dtypes(dtype, 3 + len(optional))
        names = "-".join(np.dtype(d).name for d in types)
        extra = "".join(f"-{n}{list(shape)}" for n, shape in optional.items())
        cases.append(
            make_case(
                op_type,
                attrs,
                pattern.self_shape,
                pattern.target_shape,
                go_shape,
                types,
                seed=seed + k,
                specials=specials,
                label=f"{op_type}-{pattern.name}-go_{go_name}{extra}-{_attrs_label(attrs)}-{names}",
                optional=optional,
            )
        )
    return cases


def _dtypes(dtypes: Sequence[Any] | Any, count: int) -> tuple[Any, ...]:
    """`count` dtypes: one given for all, or a sequence (the optional inputs' default to the
    last required one's type when not given)."""
    if isinstance(dtypes, (tuple, list)):
        given = tuple(dtypes)
        return (given + (given[-1],) * count)[:count]
    return (dtypes,) * count


def _attrs_label(attrs: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in attrs.items())


def mixed_dtype_combinations() -> list[tuple[np.dtype, np.dtype, np.dtype]]:
    """(grad_output, self, target) dtype triples that are not all equal, each type pair once."""
    combos = []
    for a, b in itertools.permutations(DTYPES, 2):
        combos.append((a, b, a))
    for a, b in itertools.combinations(DTYPES, 2):
        combos.append((a, a, b))
    return combos


SHORT_NAMES: dict[str, str] = {
    "grad_output": "go",
    "self": "x",
    "target": "t",
    "weight": "w",
    "pos_weight": "pw",
}
"""The value names the test models give each input (a suffix makes them unique)."""


def node_inputs(case: Case, suffix: str = "") -> tuple[list[str], dict[str, str]]:
    """(the node's input list, {value name: spec input name} of the present inputs): an
    absent optional input is "" where a later one is given, and left out at the end."""
    present = set(case.checked.present)
    names = [
        f"{SHORT_NAMES[n]}{suffix}" if n in present else ""
        for n in spec.operator(case.op_type).input_names
    ]
    while names[-1] == "":
        names.pop()
    op_names = [n for n in spec.operator(case.op_type).input_names if n in present]
    return names, dict(zip([n for n in names if n], op_names, strict=True))
