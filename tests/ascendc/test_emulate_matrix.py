"""The emulated Ascend C kernels against reference.evaluate, with every hardware check of the
emulation on: every operator x reduction x log_target/beta (0 and > 0) x element type x
broadcast pattern, lengths from 1 element (every tail around 32-byte and 256-byte
boundaries) through tile boundaries to millions, on 1 to 48 cores.

Tolerance: TIGHT (tests/helpers/tolerances.py), 4 eps of float32 relative to the terms'
magnitude, plus 1 ulp of a half result type. The kernels evaluate the level-2 expressions
in float32 like the reference, except that a scalar factor (the reduction scale, a
negation, a one-element grad_output) is applied in the multiply that is needed anyway:
(g*t)*s instead of (g*s)*t, at most one extra rounding (1 eps); Exp/Ln come from glibc
instead of numpy (1-2 ulps). The sums over broadcast dimensions run in the same order as
the reference's (row-major, float32), so they add no error of their own."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossgrad_compiler import spec
from lossgrad_compiler.evaluation.ascendc import Call, emulate_calls
from tests.ascendc.support import (
    DTYPES,
    PATTERNS,
    EmulatedCase,
    attribute_grid,
    check,
    make_inputs,
    matrix_cases,
    signature_cases,
)
from tests.helpers.cases import OP_TYPES, mixed_dtype_combinations


def _run(cases: list[EmulatedCase]) -> None:
    outputs = emulate_calls([c.call for c in cases])
    failures = [m for c, out in zip(cases, outputs, strict=True) if (m := check(c, out))]
    assert not failures, f"{len(failures)} of {len(cases)} cases differ:\n" + "\n".join(
        failures[:5]
    )


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("op_type", OP_TYPES)
def test_every_signature_matches_reference(op_type: str, dtype: str) -> None:
    _run(matrix_cases(op_type, [DTYPES[dtype]] * 3))


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_mixed_element_types(op_type: str) -> None:
    """Each input converts on its own (Cast of f16 and bf16 tiles, f32 copied as is): every
    mixed triple of the half and single types, attributes and patterns taken in turn."""
    combos = [c for c in mixed_dtype_combinations() if np.dtype(np.float64) not in c]
    grid, patterns = attribute_grid(op_type), PATTERNS[op_type]
    cases = []
    for k, dtypes in enumerate(combos):
        attrs, pattern = grid[k % len(grid)], patterns[k % len(patterns)]
        cases += signature_cases(op_type, attrs, pattern, dtypes, [(k + 1, 1), (300 + k, 2)], k)
    _run(cases)


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_millions_of_elements_on_48_cores(op_type: str) -> None:
    """3 million elements: 48 cores, several tiles each, an unaligned tail on the last."""
    attrs = {"reduction": "mean"}
    n = 3_000_017
    cases = []
    for k, dtype in enumerate(("f32", "bf16")):
        inputs = make_inputs(op_type, attrs, ((), (n,), (n,)), [DTYPES[dtype]] * 3, 7 + k, 0.01)
        cases.append(EmulatedCase(Call(op_type, inputs, attrs, 48), f"{op_type}-{dtype}-n{n}"))
    _run(cases)


def test_results_do_not_depend_on_the_core_count() -> None:
    """Bit-identical results on 1, 7 and 48 cores (the contract: determinism), sums included."""
    op_type = spec.KL_DIV_TARGET_BACKWARD.name
    attrs = {"reduction": "sum", "log_target": 1}
    inputs = make_inputs(op_type, attrs, ((3, 5001), (3, 5001), (5001,)), [np.float32] * 3, 3, 0.05)
    outs = emulate_calls([Call(op_type, inputs, attrs, cores) for cores in (1, 7, 48)])
    for out in outs[1:]:
        assert out.tobytes() == outs[0].tobytes()


RANDOM_ATTRS = {"reduction": "mean"}


@pytest.fixture(scope="module")
def random_signatures() -> None:
    """Build one runner for every signature the random test can draw."""
    cases = [
        case
        for op_type in OP_TYPES
        for dtype in ("f32", "f16")
        for pattern in PATTERNS[op_type][:2]
        for case in signature_cases(
            op_type, RANDOM_ATTRS, pattern, [DTYPES[dtype]] * 3, [(3, 1)], 0
        )
    ]
    _run(cases)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    op_type=st.sampled_from(OP_TYPES),
    dtype=st.sampled_from(["f32", "f16"]),
    scalar_g=st.booleans(),
    n=st.integers(1, 40_000),
    block_dim=st.integers(1, 48),
    seed=st.integers(0, 2**16),
)
def test_random_lengths_and_core_counts(
    random_signatures: None,
    op_type: str,
    dtype: str,
    scalar_g: bool,
    n: int,
    block_dim: int,
    seed: int,
) -> None:
    """Any length on any core count (one runner holds every signature drawn here)."""
    pattern = PATTERNS[op_type][1 if scalar_g else 0]
    dtypes = [DTYPES[dtype]] * 3
    _run(signature_cases(op_type, RANDOM_ATTRS, pattern, dtypes, [(n, block_dim)], seed))
