"""Case builders for the Ascend C emulation tests: broadcast patterns of the kernels, the
length schedule (tails around 32-byte and 256-byte boundaries, tile boundaries, several
cores), and the check against reference.evaluate."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from lossgrad_compiler import reference, spec
from lossgrad_compiler.evaluation.ascendc import Call, signature_project
from tests.helpers.cases import make_case, random_array
from tests.helpers.tolerances import TIGHT, assert_matches

KL, KLT, SL1 = (
    spec.KL_DIV_BACKWARD.name,
    spec.KL_DIV_TARGET_BACKWARD.name,
    spec.SMOOTH_L1_LOSS_BACKWARD.name,
)
DTYPES: dict[str, Any] = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
Shapes = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # grad_output, self, target


@dataclass(frozen=True)
class Pattern:
    """Input shapes as a function of a length n (the last axis of the iteration space)."""

    name: str
    shapes: Callable[[int], Shapes]
    optional: Callable[[int], dict[str, tuple[int, ...]]] = lambda n: {}  # given optional inputs


# Per operator: elementwise; one-element grad_output (a scalar multiply in the kernel);
# target broadcast on axis 0 (BroadcastTo; KlDivTargetBackward sums back); and the
# differentiated input smaller than the iteration space (summed by ReduceSum), or for
# SmoothL1LossBackward a self of lower rank.
PATTERNS: dict[str, tuple[Pattern, ...]] = {
    spec.KL_DIV_BACKWARD.name: (
        Pattern("same", lambda n: ((n,), (n,), (n,))),
        Pattern("scalar_g", lambda n: ((), (n,), (n,))),
        Pattern("target_row", lambda n: ((2, n), (2, n), (1, n))),
        Pattern("self_row", lambda n: ((), (1, n), (2, n))),
    ),
    spec.KL_DIV_TARGET_BACKWARD.name: (
        Pattern("same", lambda n: ((n,), (n,), (n,))),
        Pattern("scalar_g", lambda n: ((), (n,), (n,))),
        Pattern("target_row", lambda n: ((2, n), (2, n), (1, n))),
        Pattern("target_rank1", lambda n: ((), (2, n), (n,))),
    ),
    spec.SMOOTH_L1_LOSS_BACKWARD.name: (
        Pattern("same", lambda n: ((n,), (n,), (n,))),
        Pattern("scalar_g", lambda n: ((), (n,), (n,))),
        Pattern("g_column", lambda n: ((2, 1), (2, n), (1, n))),
        Pattern("self_rank1", lambda n: ((), (n,), (2, n))),
    ),
}
# Every operator whose result is broadcast(grad_output, self, target) (grad_output enlarges B,
# three inputs) takes SmoothL1's patterns, a new one included; the binary cross entropies (B is
# self) take their weights as a row or at B's shape.
for _op in spec.BROADCAST_OPERATORS.values():
    if _op.grad_output_may_enlarge and not _op.optional_inputs and not _op.differentiates:
        PATTERNS.setdefault(_op.name, PATTERNS[spec.SMOOTH_L1_LOSS_BACKWARD.name])
PATTERNS[spec.BINARY_CROSS_ENTROPY_BACKWARD.name] = (
    Pattern("same", lambda n: ((n,), (n,), (n,))),
    Pattern("scalar_g", lambda n: ((), (n,), (n,))),
    Pattern("target_row", lambda n: ((2, n), (2, n), (1, n))),
    Pattern("weight_row", lambda n: ((), (2, n), (2, n)), lambda n: {"weight": (n,)}),
    Pattern("weight_full", lambda n: ((2, 1), (2, n), (n,)), lambda n: {"weight": (2, n)}),
)
PATTERNS[spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name] = (
    Pattern("same", lambda n: ((n,), (n,), (n,))),
    Pattern("scalar_g", lambda n: ((), (n,), (n,))),
    Pattern("pos_weight_row", lambda n: ((2, 1), (2, n), (1, n)), lambda n: {"pos_weight": (n,)}),
    Pattern(
        "both_weights",
        lambda n: ((), (2, n), (2, n)),
        lambda n: {"weight": (2, n), "pos_weight": (n,)},
    ),
    Pattern("weight_scalar", lambda n: ((n,), (n,), ()), lambda n: {"weight": ()}),
)

# Every count of elements around the 32-byte (8 f32 / 16 half) and 256-byte (64 f32 / 128
# half) boundaries.
TAIL_LENGTHS: tuple[int, ...] = (
    *range(1, 73),
    *range(120, 137),
    *range(248, 265),
)
BLOCK_DIMS: tuple[int, ...] = tuple(range(1, 49))


def attribute_grid(op_type: str) -> list[dict[str, Any]]:
    """Every reduction with log_target 0/1, beta 0 (the sign form) and 0.5, or delta 0.5
    and 2.5."""
    op = spec.operator(op_type)
    samples = {"beta": (0.0, 0.5), "delta": (0.5, 2.5)}
    values = [a.choices or samples[a.name] for a in op.attributes]
    names = [a.name for a in op.attributes]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


@dataclass(frozen=True)
class EmulatedCase:
    call: Call
    label: str


def make_inputs(
    op_type: str,
    attrs: dict[str, Any],
    shapes: Shapes,
    dtypes: Sequence[Any],
    seed: int,
    specials: float,
    optional: dict[str, tuple[int, ...]] | None = None,
) -> dict[str, np.ndarray]:
    """Random inputs in each op's domain (positive targets for ln, log-targets near -1; the
    loss family as helpers.cases draws them, optional inputs in self's type)."""
    if op_type not in (KL, KLT, SL1):
        types = [*dtypes, *([dtypes[1]] * len(optional or {}))]
        return make_case(
            op_type, attrs, shapes[1], shapes[2], shapes[0], types,
            seed=seed, specials=specials, optional=optional,
        ).inputs  # fmt: skip
    rng = np.random.default_rng(seed)
    log_target = bool(attrs.get("log_target", 0))
    positive = op_type == spec.KL_DIV_TARGET_BACKWARD.name and not log_target
    return {
        "grad_output": random_array(rng, shapes[0], dtypes[0], specials=specials),
        "self": random_array(rng, shapes[1], dtypes[1], specials=specials),
        "target": random_array(
            rng,
            shapes[2],
            dtypes[2],
            positive=positive,
            center=-1.0 if log_target else 0.0,
            specials=specials,
        ),
    }


def tile_length(
    op_type: str,
    attrs: dict[str, Any],
    shapes: Shapes,
    dtypes: Sequence[Any],
    optional: dict[str, tuple[int, ...]] | None = None,
) -> int:
    """The planned tile length of the signature these shapes and types make."""
    infos = {
        n: spec.TensorInfo(np.dtype(d), s)
        for n, s, d in zip(spec.INPUT_NAMES, shapes, dtypes, strict=True)
    }
    infos.update({n: spec.TensorInfo(np.dtype(dtypes[1]), s) for n, s in (optional or {}).items()})
    project = signature_project(spec.validate(op_type, infos, attrs))
    return project.graph.kernel.tile_length.value.data


def signature_cases(
    op_type: str,
    attrs: dict[str, Any],
    pattern: Pattern,
    dtypes: Sequence[Any],
    lengths: Sequence[tuple[int, int]],
    seed: int,
) -> list[EmulatedCase]:
    """One case per (length, block dim); every other case has 5% special values."""
    names = "-".join(np.dtype(d).name for d in dtypes)
    cases = []
    for k, (n, block_dim) in enumerate(lengths):
        s = seed * 1000 + k
        specials = 0.05 if s % 2 else 0.0
        inputs = make_inputs(
            op_type, attrs, pattern.shapes(n), dtypes, s, specials, pattern.optional(n)
        )
        label = f"{op_type}-{pattern.name}-{attrs}-{names}-n{n}-blocks{block_dim}-seed{s}"
        cases.append(EmulatedCase(Call(op_type, inputs, dict(attrs), block_dim), label))
    return cases


def matrix_cases(
    op_type: str, dtypes: Sequence[Any], tails_per_signature: int = 7
) -> list[EmulatedCase]:
    """Every attribute combination x pattern of one op and element type triple, each with a
    share of the tail lengths (all of them across the signatures), lengths around one and
    two tiles on one core, and a length spread over several cores; block dims cycle 1..48."""
    cases: list[EmulatedCase] = []
    tails = itertools.cycle(TAIL_LENGTHS)
    blocks = itertools.cycle(BLOCK_DIMS)
    seed = itertools.count(1)
    for attrs in attribute_grid(op_type):
        for pattern in PATTERNS[op_type]:
            tile = tile_length(op_type, attrs, pattern.shapes(4), dtypes, pattern.optional(4))
            lengths = [(next(tails), next(blocks)) for _ in range(tails_per_signature)]
            lengths += [(tile - 1, 1), (tile, 1), (2 * tile + 17, 1), (5 * tile + 3, next(blocks))]
            cases += signature_cases(op_type, attrs, pattern, dtypes, lengths, next(seed))
    return cases


def check(case: EmulatedCase, actual: np.ndarray) -> str | None:
    """None when the emulated result matches reference.evaluate (TIGHT), else the message."""
    call = case.call
    expected = reference.evaluate(call.op_type, call.inputs, call.attrs)
    try:
        assert_matches(actual, expected, call.op_type, call.inputs, call.attrs,
                       tolerance=TIGHT, context=case.label)  # fmt: skip
    except AssertionError as err:
        return str(err)
    return None
