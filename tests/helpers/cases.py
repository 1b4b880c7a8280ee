"""Input generators shared by every test that runs the three operators.

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lossgrad_compiler import spec

OP_TYPES: tuple[str, ...] = tuple(spec.OPERATORS)
DTYPES: tuple[np.dtype, ...] = tuple(t.dtype for t in spec.FLOAT_TYPES)
SPECIAL_VALUES: tuple[float, ...] = (0.0, -0.0, np.inf, -np.inf, np.nan)
BETAS: tuple[float, ...] = (0.0, 1e-6, 0.5, 1.0, 2.5)

Shape = tuple[int, ...]


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
    """Every reduction of the op with every log_target (KL ops) or every beta in BETAS."""
    op = spec.operator(op_type)
    reductions = [r.value for r in op.reductions]
    if op is spec.SMOOTH_L1_LOSS_BACKWARD:
        return [{"reduction": r, "beta": b} for r, b in itertools.product(reductions, BETAS)]
    return [{"reduction": r, "log_target": lt} for r, lt in itertools.product(reductions, (0, 1))]


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
) -> np.ndarray:
    """Values of magnitude around 1 (normal around `center`, or in [0.05, 3) when
    `positive`), with a fraction `specials` replaced by 0, -0, +-inf and NaN."""
    values = rng.uniform(0.05, 3.0, size=shape) if positive else rng.normal(center, 1.0, size=shape)
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
) -> Case:
    """A case with random values; `dtypes` is one dtype or (grad_output, self, target).

    Targets of KlDivTargetBackward without log_target are positive (the domain of ln);
    log-targets are centred at -1 like log-probabilities."""
    dtypes = _triple(dtypes)
    rng = np.random.default_rng(seed)
    log_target = bool(attrs.get("log_target", 0))
    positive_target = op_type == spec.KL_DIV_TARGET_BACKWARD.name and not log_target
    inputs = {
        "grad_output": random_array(rng, grad_output_shape, dtypes[0], specials=specials),
        "self": random_array(rng, self_shape, dtypes[1], specials=specials),
        "target": random_array(
            rng,
            target_shape,
            dtypes[2],
            positive=positive_target,
            center=-1.0 if log_target else 0.0,
            specials=specials,
        ),
    }
    if not label:
        names = "-".join(np.dtype(d).name for d in dtypes)
        label = (
            f"{op_type}-{_attrs_label(attrs)}-self{list(self_shape)}-target{list(target_shape)}"
            f"-go{list(grad_output_shape)}-{names}-seed{seed}"
        )
    return Case(op_type, inputs, dict(attrs), label)


def standard_cases(
    op_type: str, dtype: Any = np.float32, *, seed: int = 0, specials: float = 0.0
) -> list[Case]:
    """The shared matrix for one op and one element type (or (go, self, target) triple):
    every broadcast pattern with every grad_output shape the op accepts, the attribute
    combinations assigned round-robin so that each of them appears several times."""
    grid = attribute_grid(op_type)
    pairs = [
        (pattern, go_name, go_shape)
        for pattern in BROADCAST_PATTERNS
        for go_name, go_shape in grad_output_shapes(op_type, pattern.b).items()
    ]
    names = "-".join(np.dtype(d).name for d in _triple(dtype))
    cases = []
    for k in range(max(len(pairs), len(grid))):
        pattern, go_name, go_shape = pairs[k % len(pairs)]
        attrs = grid[k % len(grid)]
        cases.append(
            make_case(
                op_type,
                attrs,
                pattern.self_shape,
                pattern.target_shape,
                go_shape,
                dtype,
                seed=seed + k,
                specials=specials,
                label=f"{op_type}-{pattern.name}-go_{go_name}-{_attrs_label(attrs)}-{names}",
            )
        )
    return cases


def _triple(dtypes: Sequence[Any] | Any) -> tuple[Any, Any, Any]:
    if isinstance(dtypes, (tuple, list)):
        return tuple(dtypes)  # type: ignore[return-value]
    return (dtypes, dtypes, dtypes)


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
