"""Fast construction of the level-2 ops `lower-lossgrad` emits.

Lowering a large module is dominated by creating ops (xdsl.md §7): the IRDL builder
(`arith.MulfOp(a, b)`) re-checks every constraint and costs about three times
`Operation.create`. The ops built here have fixed, known-valid shapes, so they are created
directly, and the module is verified once after the pass, as xdsl-opt does anyway.
Attributes are immutable, so the ones that repeat (constants, maps, types) are cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from math import copysign

from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    TensorType,
    i1,
    i32,
    i64,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import FillOp, GenericOp, IndexOp, YieldOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from lossgrad_compiler.level2 import PREDICATES
from lossgrad_compiler.passes.broadcast_plan import IndexMap

INDEX = IndexType()


@cache
def float_attr(value: float, element_type: Attribute) -> FloatAttr:
    return FloatAttr(value, element_type)  # type: ignore[arg-type]


@cache
def index_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, INDEX)


@cache
def predicate_attr(predicate: str) -> IntegerAttr:
    return IntegerAttr(PREDICATES[predicate].code, i64)


@cache
def affine_map_attr(loops: int, index_map: IndexMap) -> AffineMapAttr:
    """(d0..d{loops-1}) -> (...) with a dim for each int and the constant 0 for None."""
    results = tuple(
        AffineExpr.constant(0) if loop is None else AffineExpr.dimension(loop) for loop in index_map
    )
    return AffineMapAttr(AffineMap(loops, 0, results))


@cache
def iterator_types(reduction_loops: tuple[bool, ...]) -> ArrayAttr[IteratorTypeAttr]:
    return ArrayAttr(
        IteratorTypeAttr.reduction() if r else IteratorTypeAttr.parallel() for r in reduction_loops
    )


@cache
def tensor_type(element_type: Attribute, shape: tuple[int | None, ...]) -> TensorType:
    return TensorType(element_type, [DYNAMIC_INDEX if d is None else d for d in shape])


class ScalarBuilder:
    """Appends scalar arith/math ops to `ops` and returns their results.

    Float constants are made once per value (per builder), so a body says `1.0` once."""

    def __init__(self, ops: list[Operation]) -> None:
        self.ops = ops
        self._constants: dict[tuple[float | int, bool, Attribute], SSAValue] = {}

    def _add(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def constant(self, value: float, element_type: Attribute) -> SSAValue:
        key = (value, copysign(1.0, value) < 0, element_type)  # keeps -0.0 apart from 0.0
        found = self._constants.get(key)
        if found is None:
            found = self._add(
                arith.ConstantOp.create(
                    result_types=[element_type],
                    properties={"value": float_attr(value, element_type)},
                )
            )
            self._constants[key] = found
        return found

    def index_constant(self, value: int) -> SSAValue:
        key = (value, False, INDEX)
        found = self._constants.get(key)
        if found is None:
            found = self._add(
                arith.ConstantOp.create(
                    result_types=[INDEX], properties={"value": index_attr(value)}
                )
            )
            found.name_hint = f"c{value}"
            self._constants[key] = found
        return found

    def binary(self, op_class: type[Operation], lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._add(op_class.create(operands=[lhs, rhs], result_types=[lhs.type]))

    def addf(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self.binary(arith.AddfOp, lhs, rhs)

    def subf(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self.binary(arith.SubfOp, lhs, rhs)

    def mulf(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self.binary(arith.MulfOp, lhs, rhs)

    def divf(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self.binary(arith.DivfOp, lhs, rhs)

    def muli(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self.binary(arith.MuliOp, lhs, rhs)

    def unary(self, op_class: type[Operation], operand: SSAValue) -> SSAValue:
        return self._add(op_class.create(operands=[operand], result_types=[operand.type]))

    def negf(self, value: SSAValue) -> SSAValue:
        return self.unary(arith.NegfOp, value)

    def exp(self, value: SSAValue) -> SSAValue:
        return self.unary(math.ExpOp, value)

    def log(self, value: SSAValue) -> SSAValue:
        return self.unary(math.LogOp, value)

    def cast(self, op_class: type[Operation], value: SSAValue, to: Attribute) -> SSAValue:
        return self._add(op_class.create(operands=[value], result_types=[to]))

    def cmpf(self, predicate: str, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._add(
            arith.CmpfOp.create(
                operands=[lhs, rhs],
                result_types=[i1],
                properties={"predicate": predicate_attr(predicate)},
            )
        )

    def select(self, condition: SSAValue, if_true: SSAValue, if_false: SSAValue) -> SSAValue:
        return self._add(
            arith.SelectOp.create(
                operands=[condition, if_true, if_false], result_types=[if_true.type]
            )
        )

    def integer_constant(self, value: int, element_type: Attribute = i64) -> SSAValue:
        key = (value, False, element_type)
        found = self._constants.get(key)
        if found is None:
            found = self._add(
                arith.ConstantOp.create(
                    result_types=[element_type],
                    properties={"value": IntegerAttr(value, element_type)},
                )
            )
            self._constants[key] = found
        return found

    def cmpi(self, predicate: str, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        code = arith.CMPI_COMPARISON_OPERATIONS.index(predicate)
        return self._add(
            arith.CmpiOp.create(
                operands=[lhs, rhs],
                result_types=[i1],
                properties={"predicate": IntegerAttr(code, i64)},
            )
        )

    def andi(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self.binary(arith.AndIOp, lhs, rhs)

    def xori(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self.binary(arith.XOrIOp, lhs, rhs)

    def addi(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self.binary(arith.AddiOp, lhs, rhs)

    def extract(
        self, source: SSAValue, indices: Sequence[SSAValue], element: Attribute
    ) -> SSAValue:
        """`tensor.extract`: one element of a tensor captured from above (a gather)."""
        return self._add(
            tensor.ExtractOp.create(operands=[source, *indices], result_types=[element])
        )

    def loop_index(self, loop: int) -> SSAValue:
        """The position on loop `loop` of the enclosing generic (`linalg.index`)."""
        return self._add(IndexOp(loop))

    def dim(self, source: SSAValue, index: int) -> SSAValue:
        return self._add(
            tensor.DimOp.create(operands=[source, self.index_constant(index)], result_types=[INDEX])
        )

    def empty(self, sizes: Sequence[SSAValue], result_type: TensorType) -> SSAValue:
        return self._add(tensor.EmptyOp.create(operands=sizes, result_types=[result_type]))

    def fill(self, value: SSAValue, output: SSAValue) -> SSAValue:
        return self._add(FillOp([value], [output], [output.type]))

    def generic(
        self,
        inputs: Sequence[SSAValue],
        output: SSAValue,
        body: Block,
        maps: Sequence[AffineMapAttr],
        iterators: ArrayAttr[IteratorTypeAttr],
    ) -> SSAValue:
        return self._add(
            GenericOp.create(
                operands=[*inputs, output],
                result_types=[output.type],
                properties={
                    "indexing_maps": ArrayAttr(maps),
                    "iterator_types": iterators,
                    "operandSegmentSizes": segment_sizes(len(inputs), 1),
                },
                regions=[Region(body)],
            )
        )


@cache
def segment_sizes(*sizes: int) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, sizes)


def yield_op(value: SSAValue) -> Operation:
    return YieldOp.create(operands=[value])
