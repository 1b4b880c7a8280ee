"""Kernel structure and buffers of the `ascendc` dialect: the kernel, its tile loop and queue
protocol, UB queues and calc buffers, data movement, and Init-time scalar reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Operation,
    Region,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.traits import HasParent, IsolatedFromAbove, NoTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from lossgrad_compiler.dialects.ascendc.types import (
    CalcBufferType,
    GlobalTensorType,
    LocalTensorType,
    Position,
    PositionAttr,
    QueueType,
)


def stage_of(op: Operation) -> str | None:
    """'copy_in', 'compute' or 'copy_out' for an op inside a tile_loop stage; 'init' for an
    op directly in a kernel body; None elsewhere."""
    parent = op.parent_op()
    if isinstance(parent, KernelOp):
        return "init"
    if isinstance(parent, TileLoopOp):
        region = op.parent_region()
        for stage in TileLoopOp.STAGES:
            if getattr(parent, stage) is region:
                return stage
    return None


def local_type(value: SSAValue, what: str, op: Operation) -> LocalTensorType:
    if not isinstance(value.type, LocalTensorType):
        raise VerifyException(f"'{op.name}' {what} must be a !ascendc.local tile")
    return value.type


def require_stage(op: Operation, allowed: Sequence[str]) -> None:
    stage = stage_of(op)
    if stage not in allowed:
        where = " or ".join(allowed)
        raise VerifyException(f"'{op.name}' is only allowed in the {where} stage, not {stage}")


# --------------------------------------------------------------------------- kernel structure


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One AI Core vector kernel. Block arguments: the global tensors (inputs, then the
    output) and the tiling scalars, named by `arg_names`. The body declares buffers,
    computes loop-invariant scalars (Init) and ends in one `ascendc.tile_loop` (Process).

    `tile_length`, `ub_bytes` and `ub_capacity` are 0 until `ascendc-plan-buffers` runs.
    """

    name = "ascendc.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    arg_names = prop_def(ArrayAttr[StringAttr])
    num_inputs = prop_def(IntegerAttr[i64])
    tile_length = prop_def(IntegerAttr[i64], default_value=IntegerAttr(0, i64))
    tile_align = prop_def(IntegerAttr[i64], default_value=IntegerAttr(64, i64))
    ub_bytes = prop_def(IntegerAttr[i64], default_value=IntegerAttr(0, i64))
    ub_capacity = prop_def(IntegerAttr[i64], default_value=IntegerAttr(0, i64))
    ub_reserved = prop_def(IntegerAttr[i64], default_value=IntegerAttr(0, i64))
    soc = opt_prop_def(StringAttr)

    body = region_def("single_block")

    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface(), NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$sym_name attr-dict-with-keyword $body"

    def __init__(self, sym_name: str, args: Sequence[tuple[str, Attribute]], num_inputs: int):
        block = Block(arg_types=[t for _, t in args])
        for arg, (name, _) in zip(block.args, args, strict=True):
            arg.name_hint = name
        super().__init__(
            regions=[Region(block)],
            properties={
                "sym_name": StringAttr(sym_name),
                "arg_names": ArrayAttr([StringAttr(n) for n, _ in args]),
                "num_inputs": IntegerAttr(num_inputs, i64),
            },
        )

    @property
    def entry(self) -> Block:
        return self.body.block

    @property
    def global_args(self) -> list[SSAValue]:
        return [a for a in self.entry.args if isinstance(a.type, GlobalTensorType)]

    @property
    def scalar_args(self) -> list[SSAValue]:
        return [a for a in self.entry.args if not isinstance(a.type, GlobalTensorType)]

    def arg_name(self, value: SSAValue) -> str:
        index = list(self.entry.args).index(value)
        return self.arg_names.data[index].data

    @property
    def loop(self) -> TileLoopOp:
        last = self.entry.last_op
        assert isinstance(last, TileLoopOp)
        return last

    def verify_(self) -> None:
        args = list(self.entry.args)
        if len(self.arg_names) != len(args):
            raise VerifyException("'ascendc.kernel' needs one name per block argument")
        n_global = len(self.global_args)
        if any(isinstance(a.type, GlobalTensorType) for a in args[n_global:]):
            raise VerifyException("'ascendc.kernel' global tensors must precede the scalars")
        if not 0 < self.num_inputs.value.data < n_global:
            raise VerifyException("'ascendc.kernel' needs at least one input and one output")
        if not isinstance(self.entry.last_op, TileLoopOp):
            raise VerifyException("'ascendc.kernel' must end in an ascendc.tile_loop")
        if sum(isinstance(op, TileLoopOp) for op in self.entry.ops) != 1:
            raise VerifyException("'ascendc.kernel' must hold exactly one ascendc.tile_loop")
        tile = self.tile_length.value.data
        if tile and tile % self.tile_align.value.data:
            raise VerifyException(
                f"'ascendc.kernel' tile_length {tile} is not a multiple of tile_align"
            )


@irdl_op_definition
class TileLoopOp(IRDLOperation):
    """Process(): for each tile of this core's share, CopyIn, Compute, CopyOut.

    Each stage is a block with arguments (%offset, %count): the tile's element offset in the
    core's share and its element count (the last tile may be shorter and unaligned). Tiles
    travel between stages only through queues; the verifier checks every stage's queue
    protocol (AllocTensor → EnQue in the producer stage, DeQue → FreeTensor in the consumer,
    each buffer freed after its last use).
    """

    name = "ascendc.tile_loop"
    STAGES: ClassVar[tuple[str, str, str]] = ("copy_in", "compute", "copy_out")

    copy_in = region_def("single_block")
    compute = region_def("single_block")
    copy_out = region_def("single_block")

    traits = traits_def(NoTerminator(), HasParent(KernelOp))

    assembly_format = "`copy_in` $copy_in `compute` $compute `copy_out` $copy_out attr-dict"

    def __init__(self) -> None:
        regions = [Region(Block(arg_types=[IndexType(), IndexType()])) for _ in range(3)]
        for region in regions:
            region.block.args[0].name_hint = "offset"
            region.block.args[1].name_hint = "count"
        super().__init__(regions=regions)

    def stage(self, name: str) -> Block:
        return getattr(self, name).block

    def verify_(self) -> None:
        for name in self.STAGES:
            block = self.stage(name)
            if len(block.args) != 2 or not all(isinstance(a.type, IndexType) for a in block.args):
                raise VerifyException(
                    f"'ascendc.tile_loop' stage {name} takes (%offset: index, %count: index)"
                )
            _verify_queue_protocol(name, block)


_PRODUCER = {Position.VECIN: "copy_in", Position.VECOUT: "compute"}
_CONSUMER = {Position.VECIN: "compute", Position.VECOUT: "copy_out"}


def _verify_queue_protocol(stage: str, block: Block) -> None:
    ops = list(block.ops)
    index = {op: i for i, op in enumerate(ops)}
    for i, op in enumerate(ops):
        if isinstance(op, AllocOp | DequeOp):
            role = "alloc" if isinstance(op, AllocOp) else "deque"
            closer = EnqueOp if role == "alloc" else FreeOp
            closers = [u.operation for u in op.result.uses if isinstance(u.operation, closer)]
            what = "enqueued" if role == "alloc" else "freed"
            if len(closers) != 1 or closers[0].parent_block() is not block:
                raise VerifyException(
                    f"'{op.name}' in stage {stage}: the tile must be {what} exactly once "
                    "in the same stage"
                )
            last = max(index.get(u.operation, -1) for u in op.result.uses)
            if index[closers[0]] != last or index[closers[0]] < i:
                raise VerifyException(
                    f"'{op.name}' in stage {stage}: the tile is used after it is {what}"
                )
            if closers[0].queue != op.queue:
                raise VerifyException(f"'{op.name}' in stage {stage}: {what} to another queue")


# --------------------------------------------------------------------------- buffers


def _elements_prop() -> object:
    return opt_prop_def(IntegerAttr[i64])


@irdl_op_definition
class QueueOp(IRDLOperation):
    """TQue<position, depth> with `buffers` UB buffers of one tile each (pipe.InitBuffer).

    %q = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
    """

    name = "ascendc.queue"

    result = result_def(QueueType)
    position = prop_def(PositionAttr)
    depth = prop_def(IntegerAttr[i64])
    buffers = prop_def(IntegerAttr[i64])

    traits = traits_def(HasParent(KernelOp))

    assembly_format = "$position `depth` $depth `buffers` $buffers attr-dict `:` type($result)"

    def __init__(self, position: Position, element: Attribute, depth: int = 1, buffers: int = 2):
        super().__init__(
            result_types=[QueueType(element)],
            properties={
                "position": PositionAttr(position),
                "depth": IntegerAttr(depth, i64),
                "buffers": IntegerAttr(buffers, i64),
            },
        )

    @property
    def element_type(self) -> Attribute:
        assert isinstance(self.result.type, QueueType)
        return self.result.type.element_type

    def verify_(self) -> None:
        if not 1 <= self.buffers.value.data <= 64:
            raise VerifyException("'ascendc.queue' buffers must be in [1, 64] (InitBuffer num)")
        if self.depth.value.data < 1:
            raise VerifyException("'ascendc.queue' depth must be at least 1")


@irdl_op_definition
class TBufOp(IRDLOperation):
    """TBuf<VECCALC>: UB scratch of one tile (or `elements` elements when given).

    %b = ascendc.tbuf : !ascendc.tbuf<f32>
    """

    name = "ascendc.tbuf"

    result = result_def(CalcBufferType)
    elements = _elements_prop()

    traits = traits_def(HasParent(KernelOp))

    assembly_format = "(`elements` $elements^)? attr-dict `:` type($result)"

    def __init__(self, element: Attribute, elements: int | None = None):
        props = {} if elements is None else {"elements": IntegerAttr(elements, i64)}
        super().__init__(result_types=[CalcBufferType(element)], properties=props)

    @property
    def element_type(self) -> Attribute:
        assert isinstance(self.result.type, CalcBufferType)
        return self.result.type.element_type


@irdl_op_definition
class TempOp(IRDLOperation):
    """A tile of UB not yet placed: `ascendc-plan-buffers` replaces it by a queue buffer
    or a TBuf view. `elements` fixes its size; without it, it holds one tile.

    %t = ascendc.temp : !ascendc.local<f32>
    """

    name = "ascendc.temp"

    result = result_def(LocalTensorType)
    elements = _elements_prop()

    assembly_format = "(`elements` $elements^)? attr-dict `:` type($result)"

    def __init__(self, element: Attribute, elements: int | None = None):
        props = {} if elements is None else {"elements": IntegerAttr(elements, i64)}
        super().__init__(result_types=[LocalTensorType(element)], properties=props)


@irdl_op_definition
class GetOp(IRDLOperation):
    """TBuf::Get<T>(): the buffer as one tile.

    %l = ascendc.get %b : !ascendc.tbuf<f32> -> !ascendc.local<f32>
    """

    name = "ascendc.get"

    buffer = operand_def(CalcBufferType)
    result = result_def(LocalTensorType)

    assembly_format = "$buffer attr-dict `:` type($buffer) `->` type($result)"

    def __init__(self, buffer: SSAValue):
        assert isinstance(buffer.type, CalcBufferType)
        super().__init__(
            operands=[buffer], result_types=[LocalTensorType(buffer.type.element_type)]
        )

    def verify_(self) -> None:
        assert isinstance(self.buffer.type, CalcBufferType)
        assert isinstance(self.result.type, LocalTensorType)
        if self.buffer.type.element_type != self.result.type.element_type:
            raise VerifyException("'ascendc.get' must keep the element type")


class _QueueOpBase(IRDLOperation):
    """Shared checks of alloc/enque/deque/free: element type and stage of the queue."""

    ROLE: ClassVar[str]

    def _queue_op(self) -> QueueOp:
        queue = self.operands[0]
        owner = queue.owner
        if not isinstance(owner, QueueOp):
            raise VerifyException(f"'{self.name}' needs a queue defined by ascendc.queue")
        return owner

    def _check(self, tile: SSAValue) -> None:
        queue = self._queue_op()
        local = local_type(tile, "tile", self)
        if local.element_type != queue.element_type:
            raise VerifyException(f"'{self.name}' tile and queue element types differ")
        position = queue.position.data
        stage = _PRODUCER[position] if self.ROLE == "producer" else _CONSUMER[position]
        require_stage(self, [stage])


@irdl_op_definition
class AllocOp(_QueueOpBase):
    """AllocTensor: take a free buffer of the queue.

    %l = ascendc.alloc %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    """

    name = "ascendc.alloc"
    ROLE: ClassVar[str] = "producer"

    queue = operand_def(QueueType)
    result = result_def(LocalTensorType)

    assembly_format = "$queue attr-dict `:` type($queue) `->` type($result)"

    def __init__(self, queue: SSAValue):
        assert isinstance(queue.type, QueueType)
        super().__init__(operands=[queue], result_types=[LocalTensorType(queue.type.element_type)])

    def verify_(self) -> None:
        self._check(self.result)


@irdl_op_definition
class EnqueOp(_QueueOpBase):
    """EnQue: hand a filled tile to the next stage.

    ascendc.enque %q, %l : !ascendc.queue<f32>, !ascendc.local<f32>
    """

    name = "ascendc.enque"
    ROLE: ClassVar[str] = "producer"

    queue = operand_def(QueueType)
    tile = operand_def(LocalTensorType)

    assembly_format = "$queue `,` $tile attr-dict `:` type($queue) `,` type($tile)"

    def __init__(self, queue: SSAValue, tile: SSAValue):
        super().__init__(operands=[queue, tile])

    def verify_(self) -> None:
        self._check(self.tile)


@irdl_op_definition
class DequeOp(_QueueOpBase):
    """DeQue: receive the tile the previous stage enqueued.

    %l = ascendc.deque %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    """

    name = "ascendc.deque"
    ROLE: ClassVar[str] = "consumer"

    queue = operand_def(QueueType)
    result = result_def(LocalTensorType)

    assembly_format = "$queue attr-dict `:` type($queue) `->` type($result)"

    def __init__(self, queue: SSAValue):
        assert isinstance(queue.type, QueueType)
        super().__init__(operands=[queue], result_types=[LocalTensorType(queue.type.element_type)])

    def verify_(self) -> None:
        self._check(self.result)


@irdl_op_definition
class FreeOp(_QueueOpBase):
    """FreeTensor: give the buffer back to its queue.

    ascendc.free %q, %l : !ascendc.queue<f32>, !ascendc.local<f32>
    """

    name = "ascendc.free"
    ROLE: ClassVar[str] = "consumer"

    queue = operand_def(QueueType)
    tile = operand_def(LocalTensorType)

    assembly_format = "$queue `,` $tile attr-dict `:` type($queue) `,` type($tile)"

    def __init__(self, queue: SSAValue, tile: SSAValue):
        super().__init__(operands=[queue, tile])

    def verify_(self) -> None:
        self._check(self.tile)


# --------------------------------------------------------------------------- data movement


def _check_copy(op: Operation, local: SSAValue, gm: SSAValue) -> None:
    tile = local_type(local, "tile", op)
    assert isinstance(gm.type, GlobalTensorType)
    if tile.element_type != gm.type.element_type:
        raise VerifyException(f"'{op.name}' tile and global tensor element types differ")


@irdl_op_definition
class CopyInOp(IRDLOperation):
    """DataCopy GM → UB of `count` elements at `offset` of this core's share. With `pad`,
    the 32-byte aligned prefix uses DataCopy and the rest one DataCopyPad block; without
    it, count·sizeof(T) must be a multiple of 32 bytes (checked by the emulation).

    ascendc.copy_in %l, %gm[%offset], %count pad : !ascendc.local<f32>, !ascendc.gm<f32>
    """

    name = "ascendc.copy_in"

    dst = operand_def(LocalTensorType)
    src = operand_def(GlobalTensorType)
    offset = operand_def(IndexType)
    count = operand_def(IndexType)
    pad = opt_prop_def(UnitAttr)

    assembly_format = (
        "$dst `,` $src `[` $offset `]` `,` $count (`pad` $pad^)? attr-dict"
        " `:` type($dst) `,` type($src)"
    )

    def __init__(self, dst: SSAValue, src: SSAValue, offset: SSAValue, count: SSAValue, pad: bool):
        super().__init__(
            operands=[dst, src, offset, count], properties={"pad": UnitAttr()} if pad else {}
        )

    def verify_(self) -> None:
        _check_copy(self, self.dst, self.src)
        require_stage(self, ["copy_in"])


@irdl_op_definition
class CopyOutOp(IRDLOperation):
    """DataCopy UB → GM (DataCopyPad for an unaligned remainder when `pad` is set).

    ascendc.copy_out %gm[%offset], %l, %count pad : !ascendc.gm<f32>, !ascendc.local<f32>
    """

    name = "ascendc.copy_out"

    dst = operand_def(GlobalTensorType)
    offset = operand_def(IndexType)
    src = operand_def(LocalTensorType)
    count = operand_def(IndexType)
    pad = opt_prop_def(UnitAttr)

    assembly_format = (
        "$dst `[` $offset `]` `,` $src `,` $count (`pad` $pad^)? attr-dict"
        " `:` type($dst) `,` type($src)"
    )

    def __init__(self, dst: SSAValue, offset: SSAValue, src: SSAValue, count: SSAValue, pad: bool):
        super().__init__(
            operands=[dst, offset, src, count], properties={"pad": UnitAttr()} if pad else {}
        )

    def verify_(self) -> None:
        _check_copy(self, self.src, self.dst)
        require_stage(self, ["copy_out"])


@irdl_op_definition
class GetValueOp(IRDLOperation):
    """GlobalTensor::GetValue(0): read a one-element input as a scalar (in Init).

    %g = ascendc.get_value %go : !ascendc.gm<f16> -> f16
    """

    name = "ascendc.get_value"

    source = operand_def(GlobalTensorType)
    result = result_def()

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue):
        assert isinstance(source.type, GlobalTensorType)
        super().__init__(operands=[source], result_types=[source.type.element_type])

    def verify_(self) -> None:
        assert isinstance(self.source.type, GlobalTensorType)
        if self.result.type != self.source.type.element_type:
            raise VerifyException("'ascendc.get_value' result must be the element type")
        require_stage(self, ["init"])


@irdl_op_definition
class ReadLocalOp(IRDLOperation):
    """LocalTensor::GetValue(0): element 0 of a tile as a scalar (Init-time results of
    vector instructions on scalars, e.g. exp of a one-element input).

    %s = ascendc.read_local %l : !ascendc.local<f32> -> f32
    """

    name = "ascendc.read_local"

    source = operand_def(LocalTensorType)
    result = result_def()

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue):
        assert isinstance(source.type, LocalTensorType)
        super().__init__(operands=[source], result_types=[source.type.element_type])

    def verify_(self) -> None:
        assert isinstance(self.source.type, LocalTensorType)
        if self.result.type != self.source.type.element_type:
            raise VerifyException("'ascendc.read_local' result must be the element type")


@irdl_op_definition
class AlignUpOp(IRDLOperation):
    """`value` rounded up to a multiple of `multiple` (Compare's 256-byte count rule).

    %n64 = ascendc.align_up %count, 64
    """

    name = "ascendc.align_up"

    value = operand_def(IndexType)
    multiple = prop_def(IntegerAttr[i64])
    result = result_def(IndexType)

    assembly_format = "$value `,` $multiple attr-dict"

    def __init__(self, value: SSAValue, multiple: int):
        super().__init__(
            operands=[value],
            result_types=[IndexType()],
            properties={"multiple": IntegerAttr(multiple, i64)},
        )

    def verify_(self) -> None:
        if self.multiple.value.data < 1:
            raise VerifyException("'ascendc.align_up' multiple must be positive")


@irdl_op_definition
class TileLengthOp(IRDLOperation):
    """The tile length ascendc-plan-buffers chose (tiling data `tileLength`): the count of
    Init-time instructions that fill whole loop-invariant tiles.

    %n = ascendc.tile_length
    """

    name = "ascendc.tile_length"

    result = result_def(IndexType)

    assembly_format = "attr-dict"

    def __init__(self) -> None:
        super().__init__(result_types=[IndexType()])

    def verify_(self) -> None:
        require_stage(self, ["init"])
