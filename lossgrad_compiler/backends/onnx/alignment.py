"""Where a value's dimensions sit in a generic's iteration space, for ONNX broadcasting.

Inside a body a value of rank r covers the trailing r iteration axes (ONNX aligns trailing
dimensions). The elementwise operators' maps are right-aligned already
(`level2.is_right_aligned`), so their operands enter unchanged. A classification operator's
maps keep the loops' order but skip some (target [N] read on d0 of [N, C], weight [C] on d1
of [N, C, H, W]): such an operand gets size-1 dimensions at the loops it skips (an
`Unsqueeze`; the size-1 dimensions its map reads with the constant 0 are `Squeeze`d first),
and `linalg.index k` is a `Range` over loop k's size, placed on axis k the same way."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.linalg.ops import IndexOp

from lossgrad_compiler import level2
from lossgrad_compiler.backends.onnx.state import Translation
from lossgrad_compiler.backends.onnx.values import IndexProduct, ShapeEntry, Tensor
from lossgrad_compiler.errors import UnsupportedByBackendError


def aligned_operand(t: Translation, name: str, index_map: level2.IndexMap, loops: int) -> Tensor:
    """The operand `name` (read through `index_map`) as a value on the trailing iteration
    axes from its first loop on; unchanged when its map is right-aligned."""
    axes = frozenset(loop for loop in index_map if loop is not None)
    if level2.is_right_aligned(index_map, loops):
        return Tensor(name, len(index_map), axes)
    constant_dims = [j for j, loop in enumerate(index_map) if loop is None]
    if constant_dims:
        name = t.sink.add("Squeeze", [name, t.sink.int64s(constant_dims)], "aligned")
    first = min(axes)  # a map that reads no loop is right-aligned
    skipped = [k - first for k in range(first, loops) if k not in axes]
    if skipped:
        name = t.sink.add("Unsqueeze", [name, t.sink.int64s(skipped)], "aligned")
    return Tensor(name, loops - first, axes)


def loop_position(t: Translation, op: IndexOp) -> Tensor:
    """`linalg.index k`: 0 .. size-1 along axis k (int64, ONNX's index type), size 1 along
    the later axes; one Range per loop and generic."""
    sizes = t.loop_sizes
    k = op.dim.value.data
    if sizes is None:
        raise level2.Level2ContractError(op, "linalg.index is legal in a linalg.generic body only")
    if not 0 <= k < len(sizes):
        raise level2.Level2ContractError(op, f"loop {k} is not a loop of the generic")
    limit = _size_scalar(t, sizes[k])
    zero, one = (t.sink.constant(np.array(v, np.int64), "index") for v in (0, 1))
    name = t.sink.add_shared("Range", [zero, limit, one], "position")
    rank = len(sizes) - k
    if rank > 1:
        name = t.sink.add_shared("Unsqueeze", [name, t.sink.int64s(range(1, rank))], "position")
    return Tensor(name, rank, frozenset({k}))


def _size_scalar(t: Translation, size: ShapeEntry) -> str:
    """A rank-0 int64 holding a loop's size."""
    if isinstance(size, int):
        return t.sink.constant(np.array(size, np.int64), "index")
    return t.sink.element_count(IndexProduct(1, (size,)))


def check_output_map(index_map: level2.IndexMap, loops: int) -> None:
    """Results are built on the trailing axes: an output map that skips a loop before one it
    reads (valid level 2, emitted by no lowering yet) is refused, not mistranslated."""
    if not level2.is_right_aligned(index_map, loops):
        raise UnsupportedByBackendError(
            "linalg.generic",
            "output indexing map",
            f"{index_map} over {loops} loops is not right-aligned; the standard-ONNX backend "
            "writes right-aligned outputs only (the reference and the interpreter run it)",
        )
