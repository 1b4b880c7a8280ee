"""Element-wise kernel code of the `ascendc` dialect: a Compute-stage loop over the elements
of the output tile, for bodies the tile rules do not express (an integer class-index operand
read along some loops only, the class position `linalg.index`, the i1 logic over them).

Each element is computed with scalar code: its position on every loop of the iteration
space (`ascendc.position`), the inputs read with GlobalTensor::GetValue at that position
through their indexing map (`ascendc.read_element`), the body's scalar arithmetic, and
LocalTensor::SetValue into the output tile (`ascendc.store_element`). No address depends on
an input's value, so no value can make a kernel read or write out of bounds.

    ascendc.element_loop %out, %count rank 2 {
    ^bb0(%k: index):
      %j = ascendc.position 1
      %t = ascendc.read_element %target map affine_map<(d0, d1) -> (d0)> : ... -> i64
      ...
      ascendc.store_element %v : f32
    }
"""

from __future__ import annotations

from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerAttr, i64
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException

from lossgrad_compiler.dialects.ascendc.kernel import local_type, require_stage
from lossgrad_compiler.dialects.ascendc.types import GlobalTensorType, LocalTensorType


@irdl_op_definition
class ElementLoopOp(IRDLOperation):
    """for (k = 0; k < count; ++k): the body computes element k of the output tile `tile`
    (the element at start + offset + k of a `rank`-loop iteration space, row-major)."""

    name = "ascendc.element_loop"

    tile = operand_def()
    count = operand_def(IndexType)
    rank = prop_def(IntegerAttr[i64])
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    assembly_format = "$tile `,` $count `rank` $rank $body attr-dict `:` type($tile)"

    def __init__(self, tile: SSAValue, count: SSAValue, rank: int) -> None:
        super().__init__(
            operands=[tile, count],
            properties={"rank": IntegerAttr(rank, i64)},
            regions=[Region(Block(arg_types=[IndexType()]))],
        )

    @property
    def block(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        local_type(self.tile, "tile", self)
        require_stage(self, ["compute"])
        stores = [op for op in self.block.ops if isinstance(op, StoreElementOp)]
        if len(stores) != 1 or self.block.last_op is not stores[0]:
            raise VerifyException("'ascendc.element_loop' ends in exactly one store_element")


@irdl_op_definition
class PositionOp(IRDLOperation):
    """The element's position on loop `loop` of the iteration space."""

    name = "ascendc.position"

    loop = prop_def(IntegerAttr[i64])
    result = result_def(IndexType)

    traits = traits_def(HasParent(ElementLoopOp))

    assembly_format = "$loop attr-dict"

    def __init__(self, loop: int) -> None:
        super().__init__(properties={"loop": IntegerAttr(loop, i64)}, result_types=[IndexType()])

    def verify_(self) -> None:
        parent = self.parent_op()
        assert isinstance(parent, ElementLoopOp)
        if not 0 <= self.loop.value.data < parent.rank.value.data:
            raise VerifyException("'ascendc.position' loop must be a loop of the element_loop")


@irdl_op_definition
class ReadElementOp(IRDLOperation):
    """GlobalTensor::GetValue of `source` at the element's position through `map` (row-major
    over the dims the map reads; a constant 0 is a broadcast axis of size 1)."""

    name = "ascendc.read_element"

    source = operand_def(GlobalTensorType)
    map = prop_def(AffineMapAttr)
    result = result_def()

    traits = traits_def(HasParent(ElementLoopOp))

    assembly_format = "$source `map` $map attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, map: AffineMap) -> None:
        assert isinstance(source.type, GlobalTensorType)
        super().__init__(
            operands=[source],
            properties={"map": AffineMapAttr(map)},
            result_types=[source.type.element_type],
        )

    def verify_(self) -> None:
        assert isinstance(self.source.type, GlobalTensorType)
        if self.result.type != self.source.type.element_type:
            raise VerifyException("'ascendc.read_element' result must be the element type")
        parent = self.parent_op()
        assert isinstance(parent, ElementLoopOp)
        m = self.map.data
        if m.num_dims != parent.rank.value.data or not all(
            isinstance(e, AffineDimExpr) or (isinstance(e, AffineConstantExpr) and e.value == 0)
            for e in m.results
        ):
            raise VerifyException(
                "'ascendc.read_element' map reads loops of the element_loop (or a constant 0)"
            )


@irdl_op_definition
class StoreElementOp(IRDLOperation):
    """LocalTensor::SetValue(k, value) into the element loop's output tile."""

    name = "ascendc.store_element"

    value = operand_def()

    traits = traits_def(HasParent(ElementLoopOp))

    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue) -> None:
        super().__init__(operands=[value])

    def verify_(self) -> None:
        parent = self.parent_op()
        assert isinstance(parent, ElementLoopOp)
        element: Attribute = local_type(parent.tile, "tile", parent).element_type
        if self.value.type != element:
            raise VerifyException("'ascendc.store_element' stores the tile's element type")


@irdl_op_definition
class ReadTileOp(IRDLOperation):
    """LocalTensor::GetValue(k) of a tile the Compute stage computed before the element
    loop with vector instructions (exp of an input read in tiles): element k's value."""

    name = "ascendc.read_tile"

    source = operand_def()
    result = result_def()

    traits = traits_def(HasParent(ElementLoopOp))

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue) -> None:
        t = source.type
        assert isinstance(t, LocalTensorType)
        super().__init__(operands=[source], result_types=[t.element_type])

    def verify_(self) -> None:
        t = local_type(self.source, "source", self)
        if self.result.type != t.element_type:
            raise VerifyException("'ascendc.read_tile' result must be the element type")


ELEMENT_OPS = (ElementLoopOp, PositionOp, ReadElementOp, ReadTileOp, StoreElementOp)
