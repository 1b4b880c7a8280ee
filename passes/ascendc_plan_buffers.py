"""`ascendc-plan-buffers`: place every `ascendc.temp` in UB and pick the tile length.

Compute temporaries are placed by liveness (a linear scan over the Compute stage): a temp
goes into a buffer whose current values are dead by the time it is written, preferring
the input tiles already dequeued (the KL ports do this too), then the output tile before
its final write, then an existing TBuf, and only then a new TBuf. An instruction may
write the buffer it reads (full overlap is allowed for the elementwise API). Init-time
temps (loop-invariant splats and scratch) each get their own TBuf.

Each queue then gets the buffers its position allows: the double buffering it asks for
while every queue of the position can have it, else one buffer each, since Ascend C allows
at most 8 queue buffers per position (a kernel reading 5 tiles takes 5, not 10); a kernel
that needs more than 8 queues at a position, or more than 64 buffers in all, is refused.

The tile length is then the largest multiple of `tile_align` (256 bytes of f32, Compare's
rule, which also satisfies DataCopy's 32 bytes) whose buffers fit the UB: every queue
with its planned buffers, each buffer rounded up to 32 bytes, the fixed-size buffers, and
the 8 KiB Select scratch when the kernel selects (dialects/ascendc/ub.py; docs/ascend-c.md,
"Tiling").
Options: `soc` (dialects/ascendc/soc.py) and `ub_bytes` to override its UB size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.dialects.ascendc.soc import soc
from lossgrad_compiler.dialects.ascendc.ub import (
    MAX_PIPE_BUFFERS,
    MAX_QUEUE_BUFFERS_PER_POSITION,
    largest_tile,
    queue_buffers,
    ub_layout,
)


@dataclass(frozen=True)
class AscendcPlanBuffersPass(ModulePass):
    """Place temporaries and choose the tile length of every ascendc.kernel."""

    name = "ascendc-plan-buffers"

    soc: str = "ascend910b"
    ub_bytes: int = 0  # 0: the SoC's UB size

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        chip = soc(self.soc)
        capacity = self.ub_bytes or chip.ub_bytes
        for kernel in [k for k in op.walk() if isinstance(k, asc.KernelOp)]:
            place_temps(kernel)
            plan_queue_buffers(kernel)
            choose_tile_length(kernel, capacity, chip.select_scratch, chip.name)


# --------------------------------------------------------------------------- placement


@dataclass
class Slot:
    """A UB buffer and the compute-stage intervals [first, last] its values occupy."""

    value: SSAValue | None  # the tile it is known by (None: a TBuf not created yet)
    element: Attribute
    busy: list[tuple[int, int]] = field(default_factory=list)

    def accepts(self, start: int, end: int, ops: list[Operation]) -> bool:
        for first, last in self.busy:
            if end < first or start > last:
                continue
            if last == start and _in_place(ops[start]):
                continue
            if first == end and _in_place(ops[end]):
                continue
            return False
        return True


def _in_place(op: Operation) -> bool:
    """Elementwise instructions may write the buffer they read (full overlap)."""
    return isinstance(op, asc.VectorOp)


def _interval(value: SSAValue, index: dict[Operation, int]) -> tuple[int, int]:
    uses = [
        index[_stage_op(u.operation, index)]
        for u in value.uses
        if not isinstance(u.operation, asc.FreeOp | asc.EnqueOp)
    ]
    return (min(uses), max(uses)) if uses else (0, -1)


def _stage_op(op: Operation, index: dict[Operation, int]) -> Operation:
    """The Compute-stage op that holds `op` (an element loop reads tiles inside its body)."""
    while op not in index:
        parent = op.parent_op()
        assert parent is not None, op
        op = parent
    return op


def place_temps(kernel: asc.KernelOp) -> None:
    loop = kernel.loop
    compute = loop.stage("compute")
    ops = list(compute.ops)
    index = {op: i for i, op in enumerate(ops)}
    slots: list[Slot] = []
    for op in ops:
        if isinstance(op, asc.DequeOp | asc.AllocOp):
            slot = Slot(op.result, _element(op.result))
            first, last = _interval(op.result, index)
            if isinstance(op, asc.DequeOp):  # the input is live from DeQue on
                first = index[op]
            if last >= first:
                slot.busy.append((first, last))
            slots.append(slot)
    new_buffers: list[Slot] = []
    temps = sorted(
        (op for op in ops if isinstance(op, asc.TempOp) and op.elements is None),
        key=lambda t: _interval(t.result, index)[0],
    )
    for temp in temps:
        start, end = _interval(temp.result, index)
        element = _element(temp.result)
        candidates = [s for s in slots + new_buffers if s.element == element]
        chosen = next((s for s in candidates if s.accepts(start, end, ops)), None)
        if chosen is None:
            chosen = Slot(None, element)
            new_buffers.append(chosen)
        chosen.busy.append((start, end))
        _assign(temp, chosen, kernel, compute)
    for op in list(kernel.entry.ops):
        if isinstance(op, asc.TempOp):
            elements = None if op.elements is None else op.elements.value.data
            buffer = _new_tbuf(kernel, _element(op.result), elements)
            get = asc.GetOp(buffer)
            Rewriter.insert_op(get, InsertPoint.before(op))
            op.result.replace_all_uses_with(get.result)
            Rewriter.erase_op(op)
    if any(isinstance(op, asc.TempOp) for op in compute.ops):
        raise PassFailedException("ascendc-plan-buffers: fixed-size temps belong in Init")


def _assign(temp: asc.TempOp, slot: Slot, kernel: asc.KernelOp, compute: Block) -> None:
    if slot.value is None:
        buffer = _new_tbuf(kernel, _element(temp.result), None)
        get = asc.GetOp(buffer)
        first = compute.first_op
        assert first is not None
        Rewriter.insert_op(get, InsertPoint.before(_after_queue_ops(compute) or first))
        slot.value = get.result
    temp.result.replace_all_uses_with(slot.value)
    Rewriter.erase_op(temp)


def _after_queue_ops(compute: Block) -> Operation | None:
    """The first op of the stage that is not a DeQue/AllocTensor/Get (views go after them)."""
    for op in compute.ops:
        if not isinstance(op, asc.DequeOp | asc.AllocOp | asc.GetOp):
            return op
    return None


def _new_tbuf(kernel: asc.KernelOp, element: Attribute, elements: int | None) -> SSAValue:
    op = asc.TBufOp(element, elements)
    Rewriter.insert_op(op, InsertPoint.before(_first_non_buffer(kernel)))
    return op.result


def _first_non_buffer(kernel: asc.KernelOp) -> Operation:
    for op in kernel.entry.ops:
        if not isinstance(op, asc.QueueOp | asc.TBufOp):
            return op
    raise AssertionError("a kernel ends in its tile loop")


def _element(value: SSAValue) -> Attribute:
    t = value.type
    assert isinstance(t, asc.LocalTensorType | asc.QueueType | asc.CalcBufferType)
    return t.element_type


# --------------------------------------------------------------------------- queue buffers


def plan_queue_buffers(kernel: asc.KernelOp) -> None:
    """Fit every position's queue buffers into its limit, and all buffers into the TPipe's."""
    queues = [op for op in kernel.entry.ops if isinstance(op, asc.QueueOp)]
    for position in asc.Position:
        at = [q for q in queues if q.position.data is position]
        for queue in at:
            buffers = queue_buffers(queue.buffers.value.data, len(at))
            if buffers == 0:
                raise PassFailedException(
                    f"ascendc-plan-buffers: kernel @{kernel.sym_name.data} needs {len(at)} "
                    f"{position} queues, more than the {MAX_QUEUE_BUFFERS_PER_POSITION} queue "
                    "buffers Ascend C allows at one position"
                )
            queue.buffers = IntegerAttr(buffers, i64)
    tbufs = sum(isinstance(op, asc.TBufOp) for op in kernel.entry.ops)
    total = tbufs + sum(q.buffers.value.data for q in queues)
    if total > MAX_PIPE_BUFFERS:
        raise PassFailedException(
            f"ascendc-plan-buffers: kernel @{kernel.sym_name.data} needs {total} buffers, "
            f"more than the {MAX_PIPE_BUFFERS} one TPipe holds"
        )


# --------------------------------------------------------------------------- tile length


def choose_tile_length(kernel: asc.KernelOp, capacity: int, scratch: int, soc_name: str) -> None:
    layout = ub_layout(kernel)
    reserved = scratch if layout.selects else 0
    align = kernel.tile_align.value.data
    tile = largest_tile(layout, capacity - reserved, align)
    if tile == 0:
        raise PassFailedException(
            f"ascendc-plan-buffers: kernel @{kernel.sym_name.data} does not fit a UB of "
            f"{capacity} bytes"
        )
    kernel.tile_length = IntegerAttr(tile, i64)
    kernel.ub_bytes = IntegerAttr(layout.bytes_for(tile), i64)
    kernel.ub_capacity = IntegerAttr(capacity, i64)
    kernel.ub_reserved = IntegerAttr(reserved, i64)
    kernel.soc = StringAttr(soc_name)
