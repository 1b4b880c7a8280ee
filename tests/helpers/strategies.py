"""Hypothesis strategies for valid calls of the operators.

`calls()` draws an op, a broadcast pattern (shapes derived from a common B by dropping
leading axes and turning sizes into 1, including size-0 axes), a grad_output shape the op
accepts, which optional inputs are given (and shapes for them), attributes, element types
and a seed for the values. Values come from numpy
generators (helpers.cases.random_array), not from hypothesis: the search explores
structure, and the data stays in the ranges the tolerances are made for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from lossgrad_compiler import spec

from .cases import DTYPES, FLOAT_SAMPLES, OP_TYPES, Case, fits, make_case

Shape = tuple[int, ...]


@st.composite
def broadcast_shapes(draw: st.DrawFn, max_rank: int = 5, max_dim: int = 4) -> Shape:
    """A shape B; now and then with a size-0 axis, now and then of rank up to 8."""
    if draw(st.integers(0, 9)) == 0:
        rank, max_dim = draw(st.integers(6, spec.MAX_RANK)), 2
    else:
        rank = draw(st.integers(0, max_rank))
    dims = draw(st.lists(st.integers(1, max_dim), min_size=rank, max_size=rank))
    if rank and draw(st.integers(0, 7)) == 0:
        dims[draw(st.integers(0, rank - 1))] = 0
    return tuple(dims)


@st.composite
def shape_broadcasting_to(draw: st.DrawFn, b: Shape) -> Shape:
    """A shape that broadcasts to `b` without enlarging it."""
    drop = draw(st.integers(0, len(b)))
    kept = b[drop:]
    ones = draw(st.lists(st.booleans(), min_size=len(kept), max_size=len(kept)))
    return tuple(1 if one else d for d, one in zip(kept, ones, strict=True))


def attributes(op_type: str) -> st.SearchStrategy[dict[str, Any]]:
    """Every attribute of the op: a choice, or for a FLOAT one its samples and any value of
    its valid range up to 10."""
    strategies: dict[str, st.SearchStrategy[Any]] = {}
    for a in spec.operator(op_type).attributes:
        if a.choices is not None:
            strategies[a.name] = st.sampled_from(list(a.choices))
            continue
        low = a.minimum if a.minimum is not None else -10.0
        # beta as before; a new FLOAT attribute as a float32, which an ONNX node holds
        width = 64 if a.name == "beta" else 32
        values = st.floats(low, 10.0, exclude_min=a.exclusive, width=width)
        strategies[a.name] = st.one_of(st.sampled_from(FLOAT_SAMPLES[a.name]), values)
    return st.fixed_dictionaries(strategies)


@st.composite
def calls(
    draw: st.DrawFn,
    ops: Sequence[str] = OP_TYPES,
    dtypes: Sequence[Any] = DTYPES,
    specials: Sequence[float] = (0.0, 0.0, 0.1, 0.3),
    reductions: Sequence[str] | None = None,
) -> Case:
    """A valid call; `dtypes` are drawn per input (mixed types included)."""
    op_type = draw(st.sampled_from(list(ops)))
    b = draw(broadcast_shapes())
    self_shape = draw(shape_broadcasting_to(b))
    if fits(op_type, "target"):  # B is self: the target fits into it
        b = self_shape
    target_shape = draw(shape_broadcasting_to(b))
    b = tuple(np.broadcast_shapes(self_shape, target_shape))
    go_shape = draw(shape_broadcasting_to(b))
    optional = {
        name: draw(shape_broadcasting_to(b))
        for name in spec.operator(op_type).optional_inputs
        if draw(st.booleans())
    }
    if spec.operator(op_type).grad_output_may_enlarge and len(b) < spec.MAX_RANK:
        extra = draw(st.lists(st.integers(1, 3), max_size=min(2, spec.MAX_RANK - len(b))))
        go_shape = (*extra, *b) if extra and len(go_shape) == len(b) else go_shape
    attrs = draw(attributes(op_type))
    if reductions is not None:
        attrs["reduction"] = draw(
            st.sampled_from([r for r in reductions if r in _reductions(op_type)])
        )
    types = tuple(draw(st.sampled_from(list(dtypes))) for _ in range(3 + len(optional)))
    seed = draw(st.integers(0, 2**32 - 1))
    fraction = draw(st.sampled_from(list(specials)))
    return make_case(
        op_type,
        attrs,
        self_shape,
        target_shape,
        go_shape,
        types,
        seed=seed,
        specials=fraction,
        optional=optional,
    )


def _reductions(op_type: str) -> list[str]:
    return [r.value for r in spec.operator(op_type).reductions]
