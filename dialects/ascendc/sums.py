"""Scalar sums and gathers of the `ascendc` dialect: the reductions over one input that a
classification kernel reads as scalars (docs/level2.md, "Reductions"), and the weight read
at a class index.

A reduction's value is the same for every element, so each core computes it in Init
before its own tiles, from the input's global tensor: `ascendc.sum_loop` adds the body's
term for every element in order 0, 1, ... (level 2's sequential sum, bit for bit), and
needs no workspace and no barrier between the cores (the choice and its measured cost:
passes/ascendc_element_kernel.py, BATCH_SUMS).

    %d = ascendc.sum_loop %target extent 0 init 0.0 : !ascendc.gm<i64> -> f32 {
    ^bb0(%i: index):
      %t = ascendc.gather %target[%i] extent 0 : !ascendc.gm<i64> -> i64
      ...
      ascendc.sum_term %v : f32
    }

`ascendc.gather` is GlobalTensor::GetValue at an index computed by the body: the level-2
verifier admits only `select(valid, t, 0)` (or the loop's own position) as that index, so
it lies inside the tensor whatever the target holds.
"""

from __future__ import annotations

from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, UnitAttr, i64
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException

from lossgrad_compiler.dialects.ascendc.elements import ElementLoopOp
from lossgrad_compiler.dialects.ascendc.kernel import require_stage
from lossgrad_compiler.dialects.ascendc.types import GlobalTensorType


@irdl_op_definition
class SumLoopOp(IRDLOperation):
    """acc = init; for (i = 0; i < iterDim<extent>; ++i) acc += term(i): a sum over a
    rank-1 input whose length is the iteration space's loop `extent`, computed in Init."""

    name = "ascendc.sum_loop"

    source = operand_def(GlobalTensorType)
    extent = prop_def(IntegerAttr[i64])
    init = prop_def(FloatAttr)
    split = opt_prop_def(UnitAttr)
    """The workspace strategy (batch_sums="workspace"): each core sums its share of the
    input and writes the partial sum to the workspace; after SyncAll every core adds the
    partial sums in core order. Not level 2's order: measured, not the default."""
    result = result_def()
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    assembly_format = (
        "$source `extent` $extent `init` $init (`split` $split^)? $body attr-dict `:` "
        "type($source) `->` type($result)"
    )

    def __init__(
        self, source: SSAValue, extent: int, init: float, element: Attribute, split: bool = False
    ) -> None:
        props: dict[str, Attribute] = {
            "extent": IntegerAttr(extent, i64),
            "init": FloatAttr(init, element),  # type: ignore[arg-type]
        }
        if split:
            props["split"] = UnitAttr()
        super().__init__(
            operands=[source],
            properties=props,
            result_types=[element],
            regions=[Region(Block(arg_types=[IndexType()]))],
        )

    @property
    def block(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        require_stage(self, ["init"])
        terms = [op for op in self.block.ops if isinstance(op, SumTermOp)]
        if len(terms) != 1 or self.block.last_op is not terms[0]:
            raise VerifyException("'ascendc.sum_loop' ends in exactly one sum_term")
        if terms[0].value.type != self.result.type:
            raise VerifyException("'ascendc.sum_loop' adds terms of its result type")


@irdl_op_definition
class SumTermOp(IRDLOperation):
    """acc = acc + value: the term of one element of the sum."""

    name = "ascendc.sum_term"

    value = operand_def()

    traits = traits_def(HasParent(SumLoopOp))

    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue) -> None:
        super().__init__(operands=[value])


@irdl_op_definition
class GatherOp(IRDLOperation):
    """GlobalTensor::GetValue(index) of a rank-1 input whose length is the iteration
    space's loop `extent` (an index the level-2 verifier proved in range)."""

    name = "ascendc.gather"

    source = operand_def(GlobalTensorType)
    index = operand_def(IndexType)
    extent = prop_def(IntegerAttr[i64])
    result = result_def()

    assembly_format = (
        "$source `[` $index `]` `extent` $extent attr-dict `:` type($source) `->` type($result)"
    )

    def __init__(self, source: SSAValue, index: SSAValue, extent: int) -> None:
        assert isinstance(source.type, GlobalTensorType)
        super().__init__(
            operands=[source, index],
            properties={"extent": IntegerAttr(extent, i64)},
            result_types=[source.type.element_type],
        )

    def verify_(self) -> None:
        assert isinstance(self.source.type, GlobalTensorType)
        if self.result.type != self.source.type.element_type:
            raise VerifyException("'ascendc.gather' result must be the element type")
        if not isinstance(self.parent_op(), ElementLoopOp | SumLoopOp):
            raise VerifyException("'ascendc.gather' belongs in an element_loop or a sum_loop")


SUM_OPS = (SumLoopOp, SumTermOp, GatherOp)
