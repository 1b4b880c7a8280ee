"""Host ops of the `ascendc` dialect: the aclnn layer's l0 graph on tensors around the kernel
launch (BroadcastTo, the custom kernel, ReduceSum, Cast)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    IndexType,
    SymbolRefAttr,
    TensorType,
)
from xdsl.ir import (
    SSAValue,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from lossgrad_compiler.dialects.ascendc.types import (
    RoundMode,
    RoundModeAttr,
    check_cast,
)

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
        check_cast(self, src.element_type, dst.element_type, self.round_mode.data)
