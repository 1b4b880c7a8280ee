"""The `ascendc` dialect: the Ascend C programming model at tile level.

Two layers of ops live here, both produced by `convert-linalg-to-ascendc`:

* host ops on tensors, the aclnn layer's l0 graph: `broadcast_to` (BroadcastTo), `launch`
  (the custom kernel), `reduce_sum` (ReduceSum) and `tensor_cast` (Cast);
* the kernel itself: `ascendc.kernel` holds the global tensors and tiling scalars as block
  arguments, declares UB queues (TQue, VECIN/VECOUT, with depth and buffer count) and calc
  buffers (TBuf), reads one-element inputs as scalars, and ends in a `tile_loop` whose
  three stages are CopyIn, Compute and CopyOut. Vector instructions are in destination
  passing style, as in Ascend C: `ascendc.mul %dst, %a, %b, %count`.

Before `ascendc-plan-buffers` runs, compute temporaries are `ascendc.temp` values (a tile
of UB not yet placed); the pass places them in queue buffers or TBufs and picks the tile
length. Verifiers check what can be checked statically (types, the cast and compare rules,
the queue protocol of each stage); the CPU emulation checks the rest at run time.

    ascendc.kernel @k attributes {arg_names = [...], num_inputs = 3 : i64, ...} {
    ^bb0(%go: !ascendc.gm<f32>, %self: !ascendc.gm<f32>, %t: !ascendc.gm<f32>,
         %out: !ascendc.gm<f32>, %scale: f32):
      %qt = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
      ...
      ascendc.tile_loop copy_in { ^bb0(%off: index, %n: index): ... } compute {...} copy_out {...}
    }
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    i1,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    BaseAttr,
    EqAttrConstraint,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import HasParent, IsolatedFromAbove, NoTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

# --------------------------------------------------------------------------- types

_DATA_TYPES = (Float16Type, BFloat16Type, Float32Type)
"""Element types a global tensor, a queue and a vector tile may hold."""


def is_mask_type(element: Attribute) -> bool:
    """i1 is a bit mask (Compare's output): one bit per element, packed in uint8."""
    return isinstance(element, IntegerType) and element.width.data == 1


def element_bits(element: Attribute) -> int:
    """Bits per element of a tile: 1 for masks, 16 or 32 for the float types."""
    if is_mask_type(element):
        return 1
    return 32 if isinstance(element, Float32Type) else 16


def tile_bytes(element: Attribute, elements: int) -> int:
    """Bytes of UB that `elements` elements take (a mask rounds up to whole bytes)."""
    return (elements * element_bits(element) + 7) // 8


class _ElementTyped(ParametrizedAttribute, TypeAttribute):
    """A type with one element-type parameter, printed `!ascendc.name<f32>`."""

    element_type: Attribute
    ALLOWED: ClassVar[tuple[type[Attribute], ...]] = _DATA_TYPES
    ALLOW_MASK: ClassVar[bool] = False

    def __init__(self, element_type: Attribute) -> None:
        super().__init__(element_type)

    def verify(self) -> None:
        element = self.element_type
        if isinstance(element, self.ALLOWED) or (self.ALLOW_MASK and is_mask_type(element)):
            return
        allowed = "f16, bf16, f32" + (", i1" if self.ALLOW_MASK else "")
        raise VerifyException(f"{self.name} element type must be one of {allowed}, got {element}")


@irdl_attr_definition
class GlobalTensorType(_ElementTyped):
    """A GlobalTensor<T>: a tensor in global memory (GM), addressed by element offset."""

    name = "ascendc.gm"


@irdl_attr_definition
class LocalTensorType(_ElementTyped):
    """A LocalTensor<T>: one tile in the unified buffer (UB); i1 is a packed bit mask."""

    name = "ascendc.local"
    ALLOW_MASK: ClassVar[bool] = True


@irdl_attr_definition
class QueueType(_ElementTyped):
    """A TQue whose buffers hold tiles of the element type."""

    name = "ascendc.queue"


@irdl_attr_definition
class CalcBufferType(_ElementTyped):
    """A TBuf<VECCALC>: UB scratch without queue semantics, viewed as tiles of one type."""

    name = "ascendc.tbuf"
    ALLOW_MASK: ClassVar[bool] = True


# --------------------------------------------------------------------------- enums


class Position(StrEnum):
    """TPosition of a queue: VECIN feeds Compute from CopyIn, VECOUT feeds CopyOut."""

    VECIN = "VECIN"
    VECOUT = "VECOUT"


class CmpMode(StrEnum):
    """CMPMODE of Compare/Compares; every mode but NE is false when an operand is NaN."""

    LT = "LT"
    GT = "GT"
    EQ = "EQ"
    LE = "LE"
    GE = "GE"
    NE = "NE"


class RoundMode(StrEnum):
    """RoundMode of Cast (CAST_NONE: exact when lossless, ties-to-even otherwise)."""

    CAST_NONE = "CAST_NONE"
    CAST_RINT = "CAST_RINT"
    CAST_FLOOR = "CAST_FLOOR"
    CAST_CEIL = "CAST_CEIL"
    CAST_ROUND = "CAST_ROUND"
    CAST_TRUNC = "CAST_TRUNC"
    CAST_ODD = "CAST_ODD"


@irdl_attr_definition
class PositionAttr(EnumAttribute[Position], SpacedOpaqueSyntaxAttribute):
    name = "ascendc.position"


@irdl_attr_definition
class CmpModeAttr(EnumAttribute[CmpMode], SpacedOpaqueSyntaxAttribute):
    name = "ascendc.cmp_mode"


@irdl_attr_definition
class RoundModeAttr(EnumAttribute[RoundMode], SpacedOpaqueSyntaxAttribute):
    name = "ascendc.round_mode"


_NARROWING_MODES = frozenset(
    {
        RoundMode.CAST_RINT,
        RoundMode.CAST_FLOOR,
        RoundMode.CAST_CEIL,
        RoundMode.CAST_ROUND,
        RoundMode.CAST_TRUNC,
    }
)
CAST_MODES: dict[tuple[type[Attribute], type[Attribute]], frozenset[RoundMode]] = {
    (Float16Type, Float32Type): frozenset({RoundMode.CAST_NONE}),
    (BFloat16Type, Float32Type): frozenset({RoundMode.CAST_NONE}),
    (Float32Type, Float16Type): _NARROWING_MODES | {RoundMode.CAST_NONE, RoundMode.CAST_ODD},
    (Float32Type, BFloat16Type): _NARROWING_MODES,  # float→bf16 CAST_NONE is not allowed on A2
}
"""(source, destination) → the round modes Cast accepts on Atlas A2/A3 (ascend-c.md §3.9)."""


# --------------------------------------------------------------------------- helpers


def _enclosing(op: Operation, kind: type[Operation]) -> Operation | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, kind):
        parent = parent.parent_op()
    return parent


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


def _local(value: SSAValue, what: str, op: Operation) -> LocalTensorType:
    if not isinstance(value.type, LocalTensorType):
        raise VerifyException(f"'{op.name}' {what} must be a !ascendc.local tile")
    return value.type


def _require_stage(op: Operation, allowed: Sequence[str]) -> None:
    stage = stage_of(op)
    if stage not in allowed:
        where = " or ".join(allowed)
        raise VerifyException(f"'{op.name}' is only allowed in the {where} stage, not {stage}")


# --------------------------------------------------------------------------- host (l0) ops


@irdl_op_definition
class BroadcastToOp(IRDLOperation):
    """l0 BroadcastTo: expand a tensor to the iteration shape (dynamic sizes as operands).

    %b = ascendc.broadcast_to %t (%d0, %d1) : tensor<1x?xf32> -> tensor<?x?xf32>
    """

    name = "ascendc.broadcast_to"

    source = operand_def(TensorType)
    sizes = var_operand_def(IndexType)
    result = result_def(TensorType)

    assembly_format = "$source (`(` $sizes^ `)`)? attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, sizes: Sequence[SSAValue], result_type: TensorType):
        super().__init__(operands=[source, list(sizes)], result_types=[result_type])

    def verify_(self) -> None:
        src, dst = self.source.type, self.result.type
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        if src.element_type != dst.element_type:
            raise VerifyException("'ascendc.broadcast_to' must keep the element type")
        if src.get_num_dims() > dst.get_num_dims():
            raise VerifyException("'ascendc.broadcast_to' cannot lower the rank")
        if sum(1 for d in dst.get_shape() if d < 0) != len(self.sizes):
            raise VerifyException("'ascendc.broadcast_to' needs one size per dynamic dimension")
        offset = dst.get_num_dims() - src.get_num_dims()
        for j, d in enumerate(src.get_shape()):
            out = dst.get_shape()[offset + j]
            if d >= 0 and d != 1 and out >= 0 and d != out:
                raise VerifyException(f"'ascendc.broadcast_to' cannot turn size {d} into {out}")


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Run a kernel over the iteration space: the l0 custom operator of the aclnn wrapper.

    `maps` are the inputs' indexing maps before any broadcast_to (the tiling function reads
    the iteration shape through them); `scalars` are host values (the reduction scale) the
    tiling function computes and passes in the tiling data.

    %y = ascendc.launch @k(%go, %self, %t) sizes(%d0) scalars(%s : f32)
           maps [affine_map<(d0) -> ()>, ...] : tensor<f32>, ... -> tensor<?xf32>
    """

    name = "ascendc.launch"

    inputs = var_operand_def(TensorType)
    sizes = var_operand_def(IndexType)
    scalars = var_operand_def()
    result = result_def(TensorType)

    kernel = prop_def(SymbolRefAttr)
    maps = prop_def(ArrayAttr[AffineMapAttr])

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = (
        "$kernel `(` $inputs `)` (`sizes` `(` $sizes^ `)`)?"
        " (`scalars` `(` $scalars^ `:` type($scalars) `)`)? `maps` $maps"
        " attr-dict `:` type($inputs) `->` type($result)"
    )

    def __init__(
        self,
        kernel: str,
        inputs: Sequence[SSAValue],
        sizes: Sequence[SSAValue],
        scalars: Sequence[SSAValue],
        maps: Sequence[AffineMapAttr],
        result_type: TensorType,
    ):
        super().__init__(
            operands=[list(inputs), list(sizes), list(scalars)],
            result_types=[result_type],
            properties={"kernel": SymbolRefAttr(kernel), "maps": ArrayAttr(maps)},
        )

    def verify_(self) -> None:
        out = self.result.type
        assert isinstance(out, TensorType)
        if len(self.maps) != len(self.inputs):
            raise VerifyException("'ascendc.launch' needs one indexing map per input")
        for m in self.maps:
            if m.data.num_dims != out.get_num_dims():
                raise VerifyException("'ascendc.launch' maps must range over the result's dims")
        if sum(1 for d in out.get_shape() if d < 0) != len(self.sizes):
            raise VerifyException("'ascendc.launch' needs one size per dynamic result dimension")


@irdl_op_definition
class ReduceSumOp(IRDLOperation):
    """l0 ReduceSum (keepdims, then reshape): sum the iteration space into the result shape.

    `map` is the result's indexing map over the source dims (a dim of the source, or the
    constant 0 for a kept size-1 dim); source dims it does not name are summed.

    %r = ascendc.reduce_sum %y map affine_map<(d0, d1) -> (0, d1)>
           : tensor<?x?xf32> -> tensor<1x?xf32>
    """

    name = "ascendc.reduce_sum"

    source = operand_def(TensorType)
    result = result_def(TensorType)
    map = prop_def(AffineMapAttr)

    assembly_format = "$source `map` $map attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, map_: AffineMapAttr, result_type: TensorType):
        super().__init__(operands=[source], result_types=[result_type], properties={"map": map_})

    def verify_(self) -> None:
        src, dst = self.source.type, self.result.type
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        amap = self.map.data
        if amap.num_dims != src.get_num_dims() or len(amap.results) != dst.get_num_dims():
            raise VerifyException("'ascendc.reduce_sum' map must go from source to result dims")
        if src.element_type != dst.element_type:
            raise VerifyException("'ascendc.reduce_sum' must keep the element type")
        for expr, size in zip(amap.results, dst.get_shape(), strict=True):
            if reduce_map_dim(expr) is None and size != 1:
                raise VerifyException(
                    "'ascendc.reduce_sum' map results must be dims, or 0 for a size-1 dim"
                )


def reduce_map_dim(expr: object) -> int | None:
    """The source dim a map result names (`d3` → 3), or None for the constant 0."""
    position = getattr(expr, "position", None)
    return int(position) if position is not None else None


@irdl_op_definition
class TensorCastOp(IRDLOperation):
    """l0 Cast of a whole tensor (the narrowing of a summed accumulator).

    %h = ascendc.tensor_cast %s CAST_RINT : tensor<1x?xf32> -> tensor<1x?xf16>
    """

    name = "ascendc.tensor_cast"

    source = operand_def(TensorType)
    result = result_def(TensorType)
    round_mode = prop_def(RoundModeAttr)

    assembly_format = "$source $round_mode attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, result_type: TensorType, mode: RoundMode):
        super().__init__(
            operands=[source],
            result_types=[result_type],
            properties={"round_mode": RoundModeAttr(mode)},
        )

    def verify_(self) -> None:
        src, dst = self.source.type, self.result.type
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        if src.get_shape() != dst.get_shape():
            raise VerifyException("'ascendc.tensor_cast' must keep the shape")
        _check_cast(self, src.element_type, dst.element_type, self.round_mode.data)


def _check_cast(op: Operation, src: Attribute, dst: Attribute, mode: RoundMode) -> None:
    modes = CAST_MODES.get((type(src), type(dst)))
    if modes is None:
        raise VerifyException(f"'{op.name}' from {src} to {dst} is not a supported Cast")
    if mode not in modes:
        allowed = ", ".join(sorted(m.value for m in modes))
        raise VerifyException(f"'{op.name}' from {src} to {dst} needs one of {allowed}, got {mode}")


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
        local = _local(tile, "tile", self)
        if local.element_type != queue.element_type:
            raise VerifyException(f"'{self.name}' tile and queue element types differ")
        position = queue.position.data
        stage = _PRODUCER[position] if self.ROLE == "producer" else _CONSUMER[position]
        _require_stage(self, [stage])


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
    tile = _local(local, "tile", op)
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
        _require_stage(self, ["copy_in"])


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
        _require_stage(self, ["copy_out"])


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
        _require_stage(self, ["init"])


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
        _require_stage(self, ["init"])


# --------------------------------------------------------------------------- vector instructions


class VectorOp(IRDLOperation):
    """A vector instruction in count form: writes `count` elements of `dst`. Allowed in
    Compute and in Init (loop-invariant tiles); `dst` is the first operand."""

    ARITHMETIC: ClassVar[bool] = True  # arithmetic: no bf16 on Atlas A2/A3

    def _dst(self) -> LocalTensorType:
        return _local(self.operands[0], "dst", self)

    def _common(self, *sources: SSAValue) -> None:
        _require_stage(self, ["init", "compute"])
        dst = self._dst()
        for src in sources:
            if _local(src, "source", self) != dst:
                raise VerifyException(f"'{self.name}' operands must all be {dst}")
        if is_mask_type(dst.element_type):
            raise VerifyException(f"'{self.name}' does not take masks")
        if self.ARITHMETIC and isinstance(dst.element_type, BFloat16Type):
            raise VerifyException(
                f"'{self.name}' on bf16: the vector unit of Atlas A2/A3 has no bf16 "
                "arithmetic; Cast to f32 first"
            )

    def _scalar(self, scalar: SSAValue) -> None:
        if scalar.type != self._dst().element_type:
            raise VerifyException(f"'{self.name}' scalar must have the tile's element type")


_TILE = VarConstraint("T", BaseAttr(LocalTensorType))
_MASK = EqAttrConstraint(LocalTensorType(i1))


class BinaryVectorOp(VectorOp):
    dst = operand_def(_TILE)
    lhs = operand_def(_TILE)
    rhs = operand_def(_TILE)
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $lhs `,` $rhs `,` $count attr-dict `:` type($dst)"

    def __init__(self, dst: SSAValue, lhs: SSAValue, rhs: SSAValue, count: SSAValue):
        super().__init__(operands=[dst, lhs, rhs, count])

    def verify_(self) -> None:
        self._common(self.lhs, self.rhs)


class ScalarVectorOp(VectorOp):
    dst = operand_def(_TILE)
    src = operand_def(_TILE)
    scalar = operand_def()
    count = operand_def(IndexType)

    assembly_format = (
        "$dst `,` $src `,` $scalar `,` $count attr-dict `:` type($dst) `,` type($scalar)"
    )

    def __init__(self, dst: SSAValue, src: SSAValue, scalar: SSAValue, count: SSAValue):
        super().__init__(operands=[dst, src, scalar, count])

    def verify_(self) -> None:
        self._common(self.src)
        self._scalar(self.scalar)


class UnaryVectorOp(VectorOp):
    dst = operand_def(_TILE)
    src = operand_def(_TILE)
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $src `,` $count attr-dict `:` type($dst)"

    def __init__(self, dst: SSAValue, src: SSAValue, count: SSAValue):
        super().__init__(operands=[dst, src, count])

    def verify_(self) -> None:
        self._common(self.src)


@irdl_op_definition
class AddOp(BinaryVectorOp):
    """Add(dst, a, b, count)."""

    name = "ascendc.add"


@irdl_op_definition
class SubOp(BinaryVectorOp):
    """Sub(dst, a, b, count)."""

    name = "ascendc.sub"


@irdl_op_definition
class MulOp(BinaryVectorOp):
    """Mul(dst, a, b, count)."""

    name = "ascendc.mul"


@irdl_op_definition
class DivOp(BinaryVectorOp):
    """Div(dst, a, b, count): IEEE division."""

    name = "ascendc.div"


@irdl_op_definition
class MaxOp(BinaryVectorOp):
    """Max(dst, a, b, count)."""

    name = "ascendc.max"


@irdl_op_definition
class MinOp(BinaryVectorOp):
    """Min(dst, a, b, count)."""

    name = "ascendc.min"


@irdl_op_definition
class AddsOp(ScalarVectorOp):
    """Adds(dst, src, scalar, count): src + scalar."""

    name = "ascendc.adds"


@irdl_op_definition
class MulsOp(ScalarVectorOp):
    """Muls(dst, src, scalar, count): src * scalar."""

    name = "ascendc.muls"


@irdl_op_definition
class MaxsOp(ScalarVectorOp):
    """Maxs(dst, src, scalar, count)."""

    name = "ascendc.maxs"


@irdl_op_definition
class MinsOp(ScalarVectorOp):
    """Mins(dst, src, scalar, count)."""

    name = "ascendc.mins"


@irdl_op_definition
class ExpOp(UnaryVectorOp):
    """Exp(dst, src, count)."""

    name = "ascendc.exp"


@irdl_op_definition
class LnOp(UnaryVectorOp):
    """Ln(dst, src, count)."""

    name = "ascendc.ln"


@irdl_op_definition
class AbsOp(UnaryVectorOp):
    """Abs(dst, src, count)."""

    name = "ascendc.abs"


@irdl_op_definition
class DuplicateOp(VectorOp):
    """Duplicate(dst, scalar, count): fill with a scalar (bf16 allowed).

    ascendc.duplicate %l, %s, %n : !ascendc.local<f32>, f32
    """

    name = "ascendc.duplicate"
    ARITHMETIC: ClassVar[bool] = False

    dst = operand_def(LocalTensorType)
    scalar = operand_def()
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $scalar `,` $count attr-dict `:` type($dst) `,` type($scalar)"

    def __init__(self, dst: SSAValue, scalar: SSAValue, count: SSAValue):
        super().__init__(operands=[dst, scalar, count])

    def verify_(self) -> None:
        self._common()
        self._scalar(self.scalar)


class _CompareBase(VectorOp):
    def _compare_common(self, *sources: SSAValue) -> LocalTensorType:
        _require_stage(self, ["init", "compute"])
        mask = _local(self.operands[0], "dst", self)
        if not is_mask_type(mask.element_type):
            raise VerifyException(f"'{self.name}' dst must be a mask (!ascendc.local<i1>)")
        src = _local(sources[0], "source", self)
        for other in sources[1:]:
            if _local(other, "source", self) != src:
                raise VerifyException(f"'{self.name}' sources must have one type")
        if not isinstance(src.element_type, Float16Type | Float32Type):
            raise VerifyException(f"'{self.name}' compares f16 or f32 tiles only")
        return src


@irdl_op_definition
class CompareOp(_CompareBase):
    """Compare(mask, a, b, mode, count): one bit per element. count·sizeof(T) must be a
    multiple of 256 bytes (the emulation checks it).

    ascendc.compare %m, %a, %b LT, %n : !ascendc.local<f32>
    """

    name = "ascendc.compare"

    dst = operand_def(_MASK)
    lhs = operand_def(_TILE)
    rhs = operand_def(_TILE)
    mode = prop_def(CmpModeAttr)
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $lhs `,` $rhs $mode `,` $count attr-dict `:` type($lhs)"

    def __init__(self, dst: SSAValue, lhs: SSAValue, rhs: SSAValue, mode: CmpMode, count: SSAValue):
        super().__init__(operands=[dst, lhs, rhs, count], properties={"mode": CmpModeAttr(mode)})

    def verify_(self) -> None:
        self._compare_common(self.lhs, self.rhs)


@irdl_op_definition
class ComparesOp(_CompareBase):
    """Compares(mask, a, scalar, mode, count) (CompareScalar in older CANN).

    ascendc.compares %m, %a, %s NE, %n : !ascendc.local<f32>, f32
    """

    name = "ascendc.compares"

    dst = operand_def(_MASK)
    src = operand_def(LocalTensorType)
    scalar = operand_def()
    mode = prop_def(CmpModeAttr)
    count = operand_def(IndexType)

    assembly_format = (
        "$dst `,` $src `,` $scalar $mode `,` $count attr-dict `:` type($src) `,` type($scalar)"
    )

    def __init__(
        self, dst: SSAValue, src: SSAValue, scalar: SSAValue, mode: CmpMode, count: SSAValue
    ):
        super().__init__(operands=[dst, src, scalar, count], properties={"mode": CmpModeAttr(mode)})

    def verify_(self) -> None:
        src = self._compare_common(self.src)
        if self.scalar.type != src.element_type:
            raise VerifyException(f"'{self.name}' scalar must have the source's element type")


class _SelectBase(VectorOp):
    def _select_common(self, mask: SSAValue, *sources: SSAValue) -> None:
        self._common(*sources)
        if not is_mask_type(_local(mask, "mask", self).element_type):
            raise VerifyException(f"'{self.name}' mask must be !ascendc.local<i1>")


@irdl_op_definition
class SelectOp(_SelectBase):
    """Select(dst, mask, a, b, VSEL_TENSOR_TENSOR_MODE, count): a where the bit is 1.

    ascendc.select %d, %m, %a, %b, %n : !ascendc.local<f32>
    """

    name = "ascendc.select"

    dst = operand_def(_TILE)
    mask = operand_def(_MASK)
    true_value = operand_def(_TILE)
    false_value = operand_def(_TILE)
    count = operand_def(IndexType)

    assembly_format = (
        "$dst `,` $mask `,` $true_value `,` $false_value `,` $count attr-dict `:` type($dst)"
    )

    def __init__(
        self,
        dst: SSAValue,
        mask: SSAValue,
        true_value: SSAValue,
        false_value: SSAValue,
        count: SSAValue,
    ):
        super().__init__(operands=[dst, mask, true_value, false_value, count])

    def verify_(self) -> None:
        self._select_common(self.mask, self.true_value, self.false_value)


@irdl_op_definition
class SelectsOp(_SelectBase):
    """Select(dst, mask, a, scalar, VSEL_TENSOR_SCALAR_MODE, count).

    ascendc.selects %d, %m, %a, %s, %n : !ascendc.local<f32>, f32
    """

    name = "ascendc.selects"

    dst = operand_def(_TILE)
    mask = operand_def(_MASK)
    true_value = operand_def(_TILE)
    false_scalar = operand_def()
    count = operand_def(IndexType)

    assembly_format = (
        "$dst `,` $mask `,` $true_value `,` $false_scalar `,` $count attr-dict"
        " `:` type($dst) `,` type($false_scalar)"
    )

    def __init__(
        self,
        dst: SSAValue,
        mask: SSAValue,
        true_value: SSAValue,
        false_scalar: SSAValue,
        count: SSAValue,
    ):
        super().__init__(operands=[dst, mask, true_value, false_scalar, count])

    def verify_(self) -> None:
        self._select_common(self.mask, self.true_value)
        self._scalar(self.false_scalar)


@irdl_op_definition
class CastOp(VectorOp):
    """Cast(dst, src, round_mode, count) between f16/bf16 and f32.

    ascendc.cast %d, %s CAST_RINT, %n : !ascendc.local<f16>, !ascendc.local<f32>
    """

    name = "ascendc.cast"
    ARITHMETIC: ClassVar[bool] = False

    dst = operand_def(LocalTensorType)
    src = operand_def(LocalTensorType)
    round_mode = prop_def(RoundModeAttr)
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $src $round_mode `,` $count attr-dict `:` type($dst) `,` type($src)"

    def __init__(self, dst: SSAValue, src: SSAValue, mode: RoundMode, count: SSAValue):
        super().__init__(operands=[dst, src, count], properties={"round_mode": RoundModeAttr(mode)})

    def verify_(self) -> None:
        _require_stage(self, ["init", "compute"])
        dst = _local(self.dst, "dst", self)
        src = _local(self.src, "source", self)
        _check_cast(self, src.element_type, dst.element_type, self.round_mode.data)


VECTOR_OPS: tuple[type[VectorOp], ...] = (
    AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, AddsOp, MulsOp, MaxsOp, MinsOp,
    ExpOp, LnOp, AbsOp, DuplicateOp, CompareOp, ComparesOp, SelectOp, SelectsOp, CastOp,
)  # fmt: skip
"""Every vector instruction (the static report counts these per tile)."""


Ascendc = Dialect(
    "ascendc",
    [
        BroadcastToOp, LaunchOp, ReduceSumOp, TensorCastOp,
        KernelOp, TileLoopOp, QueueOp, TBufOp, TempOp, GetOp,
        AllocOp, EnqueOp, DequeOp, FreeOp,
        CopyInOp, CopyOutOp, GetValueOp, ReadLocalOp, AlignUpOp, TileLengthOp,
        *VECTOR_OPS,
    ],
    [
        GlobalTensorType, LocalTensorType, QueueType, CalcBufferType,
        PositionAttr, CmpModeAttr, RoundModeAttr,
    ],
)  # fmt: skip
