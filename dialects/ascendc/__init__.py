"""The `ascendc` dialect: the Ascend C programming model at tile level.

Split by level, each module one layer of the model:

* `types`: the types and attributes (GlobalTensor, LocalTensor, TQue, TBuf; TPosition,
  CMPMODE, RoundMode) and the Cast rules;
* `host`: host ops on tensors, the aclnn layer's l0 graph: `broadcast_to` (BroadcastTo),
  `launch` (the custom kernel), `reduce_sum` (ReduceSum) and `tensor_cast` (Cast);
* `kernel`: the kernel itself: `ascendc.kernel` holds the global tensors and tiling
  scalars as block arguments, declares UB queues (TQue, VECIN/VECOUT, with depth and
  buffer count) and calc buffers (TBuf), reads one-element inputs as scalars, and ends in
  a `tile_loop` whose three stages are CopyIn, Compute and CopyOut;
* `elements`: a Compute-stage loop over the output tile's elements with scalar code, for
  bodies the tile rules do not express (class-index operands, `linalg.index`);
* `sums`: Init-time scalar sums over one input (the reductions over the batch a body reads
  as scalars) and the gather of an input at a computed, verified index;
* `vector`: the vector instructions, in destination passing style as in Ascend C:
  `ascendc.mul %dst, %a, %b, %count`.

Beside the dialect, the hardware it targets: `soc` (the SoC table: UB size, vector cores,
the Select scratch) and `ub` (how buffers take UB, and the largest tile that fits).

Before `ascendc-plan-buffers` runs, compute temporaries are `ascendc.temp` values (a tile
of UB not yet placed); the pass places them in queue buffers or TBufs and picks the tile
length. Verifiers check what can be checked statically (types, the cast and compare rules,
the queue protocol of each stage); the CPU emulation checks the rest at run time
(docs/ascend-c.md lists the rules and their sources).

    ascendc.kernel @k attributes {arg_names = [...], num_inputs = 3 : i64, ...} {
    ^bb0(%go: !ascendc.gm<f32>, %self: !ascendc.gm<f32>, %t: !ascendc.gm<f32>,
         %out: !ascendc.gm<f32>, %scale: f32):
      %qt = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
      ...
      ascendc.tile_loop copy_in { ^bb0(%off: index, %n: index): ... } compute {...} copy_out {...}
    }
"""

from __future__ import annotations

from xdsl.ir import Dialect

from lossgrad_compiler.dialects.ascendc.elements import (
    ELEMENT_OPS,
    ElementLoopOp,
    PositionOp,
    ReadElementOp,
    ReadTileOp,
    StoreElementOp,
)
from lossgrad_compiler.dialects.ascendc.host import (
    BroadcastToOp,
    LaunchOp,
    ReduceSumOp,
    TensorCastOp,
    reduce_map_dim,
)
from lossgrad_compiler.dialects.ascendc.kernel import (
    AlignUpOp,
    AllocOp,
    CopyInOp,
    CopyOutOp,
    DequeOp,
    EnqueOp,
    FreeOp,
    GetOp,
    GetValueOp,
    KernelOp,
    QueueOp,
    ReadLocalOp,
    TBufOp,
    TempOp,
    TileLengthOp,
    TileLoopOp,
    stage_of,
)
from lossgrad_compiler.dialects.ascendc.sums import SUM_OPS, GatherOp, SumLoopOp, SumTermOp
from lossgrad_compiler.dialects.ascendc.types import (
    CAST_MODES,
    CalcBufferType,
    CmpMode,
    CmpModeAttr,
    GlobalTensorType,
    LocalTensorType,
    Position,
    PositionAttr,
    QueueType,
    RoundMode,
    RoundModeAttr,
    element_bits,
    is_index_element,
    is_mask_type,
    tile_bytes,
)
from lossgrad_compiler.dialects.ascendc.vector import (
    VECTOR_OPS,
    AbsOp,
    AddOp,
    AddsOp,
    BinaryVectorOp,
    CastOp,
    CompareOp,
    ComparesOp,
    DivOp,
    DuplicateOp,
    ExpOp,
    LnOp,
    MaxOp,
    MaxsOp,
    MinOp,
    MinsOp,
    MulOp,
    MulsOp,
    ScalarVectorOp,
    SelectOp,
    SelectsOp,
    SubOp,
    UnaryVectorOp,
    VectorOp,
)

Ascendc = Dialect(
    "ascendc",
    [
        BroadcastToOp, LaunchOp, ReduceSumOp, TensorCastOp,
        KernelOp, TileLoopOp, QueueOp, TBufOp, TempOp, GetOp,
        AllocOp, EnqueOp, DequeOp, FreeOp,
        CopyInOp, CopyOutOp, GetValueOp, ReadLocalOp, AlignUpOp, TileLengthOp,
        *VECTOR_OPS, *ELEMENT_OPS, *SUM_OPS,
    ],
    [
        GlobalTensorType, LocalTensorType, QueueType, CalcBufferType,
        PositionAttr, CmpModeAttr, RoundModeAttr,
    ],
)  # fmt: skip

__all__ = [
    "CAST_MODES",
    "ELEMENT_OPS",
    "SUM_OPS",
    "VECTOR_OPS",
    "AbsOp",
    "AddOp",
    "AddsOp",
    "AlignUpOp",
    "AllocOp",
    "Ascendc",
    "BinaryVectorOp",
    "BroadcastToOp",
    "CalcBufferType",
    "CastOp",
    "CmpMode",
    "CmpModeAttr",
    "CompareOp",
    "ComparesOp",
    "CopyInOp",
    "CopyOutOp",
    "DequeOp",
    "DivOp",
    "DuplicateOp",
    "ElementLoopOp",
    "EnqueOp",
    "ExpOp",
    "FreeOp",
    "GatherOp",
    "GetOp",
    "GetValueOp",
    "GlobalTensorType",
    "KernelOp",
    "LaunchOp",
    "LnOp",
    "LocalTensorType",
    "MaxOp",
    "MaxsOp",
    "MinOp",
    "MinsOp",
    "MulOp",
    "MulsOp",
    "Position",
    "PositionAttr",
    "PositionOp",
    "QueueOp",
    "QueueType",
    "ReadElementOp",
    "ReadLocalOp",
    "ReadTileOp",
    "ReduceSumOp",
    "RoundMode",
    "RoundModeAttr",
    "ScalarVectorOp",
    "SelectOp",
    "SelectsOp",
    "StoreElementOp",
    "SubOp",
    "SumLoopOp",
    "SumTermOp",
    "TBufOp",
    "TempOp",
    "TensorCastOp",
    "TileLengthOp",
    "TileLoopOp",
    "UnaryVectorOp",
    "VectorOp",
    "element_bits",
    "is_index_element",
    "is_mask_type",
    "reduce_map_dim",
    "stage_of",
    "tile_bytes",
]
