"""The reduction scale for concrete shapes, from the reduction itself: the tests' oracle
for what the library resolves once (spec.validate → CheckedCall.divisor → level 2)."""

from __future__ import annotations

from collections.abc import Sequence

from lossgrad_compiler import spec


def reduction_divisor(
    reduction: spec.Reduction | str, self_shape: Sequence[int], b: Sequence[int]
) -> int | None:
    """n of the scale 1/n (None: nothing is scaled)."""
    return spec.divisor_count(spec.divisor_rule(reduction, len(self_shape)), self_shape, b)


def reduction_scale(
    reduction: spec.Reduction | str, self_shape: Sequence[int], b: Sequence[int]
) -> float:
    """The scale s = 1/n (inf when n is 0; 1 where nothing is scaled)."""
    return spec.divisor_scale(spec.divisor_rule(reduction, len(self_shape)), self_shape, b)
