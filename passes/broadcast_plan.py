"""Where each operand sits in the iteration space of a lowered lossgrad op (docs/level2.md).

Pure shape logic, no IR: which loop feeds each operand dimension (or the constant 0 of a
broadcast 1), which loops are summed away, where the dynamic sizes of the output and the
element count of the reduction scale are read from. One plan serves every op with the same
shapes and divisor, so the pass computes it once per signature.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from lossgrad_compiler import spec

GRAD_OUTPUT, SELF, TARGET = range(3)  # operand positions (every operator's first inputs)

IndexMap = tuple[int | None, ...]
"""Per operand dimension: the loop index that reads it, or None for the constant 0."""

DimSource = tuple[int, int]
"""(operand position, dimension) whose `tensor.dim` gives a size known only at run time."""


@dataclass(frozen=True)
class ScaleCount:
    """The divisor n of the reduction scale 1/n: a static factor times run-time sizes."""

    static_factor: int
    dynamic: tuple[DimSource, ...]

    @property
    def is_static(self) -> bool:
        return not self.dynamic


@dataclass(frozen=True)
class LoweringPlan:
    """Everything about a lowering that depends on shapes and the divisor only."""

    loops: int  # rank of the iteration space
    input_maps: tuple[IndexMap, ...]  # per present input, in the operator's order
    output_map: IndexMap  # the result (or accumulator) in the iteration space
    reduction_loops: tuple[bool, ...]  # per loop: summed over (absent from the output map)
    output_shape: tuple[int | None, ...]  # the op's result shape; None = dynamic
    output_dim_sources: tuple[DimSource, ...]  # one per dynamic output dimension, in order
    scale: ScaleCount | None  # None: no scale (none, sum, batchmean of a 0-d self)

    @property
    def accumulates(self) -> bool:
        """The result is summed over broadcast loops (KL ops with a self/target smaller than B)."""
        return any(self.reduction_loops)


def operand_map(shape: spec.Shape, iteration: spec.Shape) -> IndexMap:
    """Right-aligned map of an operand into the iteration space; a static 1 facing a loop
    that is not a static 1 is a broadcast and reads index 0."""
    offset = len(iteration) - len(shape)
    return tuple(
        None if d == 1 and iteration[offset + j] != 1 else offset + j for j, d in enumerate(shape)
    )


def _dynamic_source(
    axis: int, rank: int, shapes: tuple[spec.Shape, ...], order: tuple[int, ...]
) -> DimSource:
    """The first operand (in `order`) whose dimension on iteration axis `axis` is dynamic:
    a dynamic dimension is never a broadcast, so it equals the loop size at run time."""
    for position in order:
        shape = shapes[position]
        j = axis - (rank - len(shape))
        if j >= 0 and shape[j] is None:
            return position, j
    raise ValueError(f"axis {axis} is dynamic but no operand has a dynamic size there")


def _scale_count(
    divisor: spec.Divisor | None, shapes: tuple[spec.Shape, ...], base: tuple[int, ...]
) -> ScaleCount | None:
    """n as a static factor times run-time sizes, for the divisor spec.validate resolved
    (numel(B) is numel of the broadcast of the `base` operands: self and target, or self)."""
    if divisor is spec.Divisor.NUMEL:
        b = spec.broadcast_shapes("", [(str(k), shapes[k]) for k in base])
        factor = 1
        dynamic: list[DimSource] = []
        for axis, d in enumerate(b):
            if isinstance(d, int):
                factor *= d
            else:
                dynamic.append(_dynamic_source(axis, len(b), shapes, base))
        return ScaleCount(factor, tuple(dynamic))
    if divisor is spec.Divisor.BATCH:
        first = shapes[SELF][0]
        return ScaleCount(1, ((SELF, 0),)) if first is None else ScaleCount(first, ())
    return None


@cache
def plan_lowering(
    op_type: str,
    names: tuple[str, ...],
    shapes: tuple[spec.Shape, ...],
    divisor: spec.Divisor | None,
) -> LoweringPlan:
    """The plan for a validated call: `names` are the present inputs in the operator's order
    and `shapes` theirs (None = dynamic)."""
    op = spec.operator(op_type)
    position = {name: k for k, name in enumerate(names)}
    base = tuple(position[n] for n in op.base_inputs)
    b = spec.broadcast_shapes(op.name, [(names[k], shapes[k]) for k in base])
    iteration = b
    for k, name in enumerate(names):
        if op.input(name).broadcast is spec.Broadcast.ENLARGES:
            iteration = spec.broadcast_shapes(op.name, [(name, shapes[k]), ("B", iteration)])
    loops = len(iteration)
    input_maps = tuple(operand_map(s, iteration) for s in shapes)
    if op.differentiates:
        result = position[op.differentiates]
        output_map = input_maps[result]
        output_shape = shapes[result]
        sources = tuple((result, j) for j, d in enumerate(output_shape) if d is None)
    else:
        output_map = tuple(range(loops))
        output_shape = iteration
        order = (*base, *(k for k in range(len(names)) if k not in base))
        sources = tuple(
            _dynamic_source(a, loops, shapes, order) for a, d in enumerate(iteration) if d is None
        )
    present = set(output_map)
    return LoweringPlan(
        loops=loops,
        input_maps=input_maps,
        output_map=output_map,
        reduction_loops=tuple(i not in present for i in range(loops)),
        output_shape=tuple(output_shape),
        output_dim_sources=sources,
        scale=_scale_count(divisor, shapes, base),
    )
