"""How a kernel's buffers take the unified buffer (UB), and the largest tile that fits.

InitBuffer rounds every buffer up to 32 bytes; a queue holds `buffers` tiles, a TBuf one
tile or a fixed number of elements. A TPipe holds at most 64 buffers, and at most 8 of them
may be queue buffers of one position (VECIN or VECOUT), so a kernel with many inputs gives
each input queue fewer buffers (`queue_buffers`). `ascendc-plan-buffers` plans with these
rules, and the generated tiling function evaluates the same formula on the platform's UB
size (docs/ascend-c.md, "Tiling").
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Attribute

from lossgrad_compiler.dialects.ascendc.kernel import KernelOp, QueueOp, TBufOp
from lossgrad_compiler.dialects.ascendc.types import element_bits, tile_bytes
from lossgrad_compiler.dialects.ascendc.vector import SelectOp, SelectsOp

UB_ALIGN = 32  # InitBuffer rounds every buffer up to 32 bytes
MAX_QUEUE_BUFFERS_PER_POSITION = 8  # TQue: queue buffers of one TPosition (A2/A3/950)
MAX_PIPE_BUFFERS = 64  # InitBuffer: buffers of one TPipe, queues' and TBufs' together


def align_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


@dataclass(frozen=True)
class UbLayout:
    """The buffers of a kernel: per-tile-element ones and fixed-size ones."""

    per_tile: tuple[tuple[Attribute, int], ...]  # (element type, buffer count)
    fixed_bytes: int
    selects: bool

    def bytes_for(self, tile: int) -> int:
        """UB bytes all buffers take for a tile length (each rounded to 32 bytes)."""
        per = sum(n * align_up(tile_bytes(e, tile), UB_ALIGN) for e, n in self.per_tile)
        return per + self.fixed_bytes


def ub_layout(kernel: KernelOp) -> UbLayout:
    per_tile: list[tuple[Attribute, int]] = []
    fixed = 0
    for op in kernel.entry.ops:
        if isinstance(op, QueueOp):
            per_tile.append((op.element_type, op.buffers.value.data))
        elif isinstance(op, TBufOp):
            if op.elements is None:
                per_tile.append((op.element_type, 1))
            else:
                fixed += align_up(tile_bytes(op.element_type, op.elements.value.data), UB_ALIGN)
    selects = any(isinstance(op, SelectOp | SelectsOp) for op in kernel.walk())
    return UbLayout(tuple(per_tile), fixed, selects)


def queue_buffers(wanted: int, queues: int) -> int:
    """Buffers for each of `queues` queues of one position that want `wanted` each: as many
    as wanted, up to an equal share of the position's limit (a second buffer for only some
    inputs would take UB from the tile while the next tile's CopyIn still waits for the
    others to be freed); 0 when even one buffer per queue exceeds the limit."""
    return min(wanted, MAX_QUEUE_BUFFERS_PER_POSITION // queues) if queues else wanted


def largest_tile(layout: UbLayout, budget: int, align: int) -> int:
    """The largest multiple of `align` whose buffers fit in `budget` bytes (0 if none)."""
    bits = sum(n * element_bits(e) for e, n in layout.per_tile)
    if bits == 0:
        return 0
    tile = max(budget - layout.fixed_bytes, 0) * 8 // bits // align * align
    while tile > 0 and layout.bytes_for(tile) > budget:
        tile -= align
    return max(tile, 0)
