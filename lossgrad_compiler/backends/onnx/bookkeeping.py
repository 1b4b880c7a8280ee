"""The ONNX rules of level 2's index arithmetic and tensor bookkeeping: `arith.muli`,
`arith.index_cast`, `tensor.dim`, `tensor.empty` and `linalg.fill` stay symbolic
(values.py) until a node needs them, so a size that only feeds the scale costs exactly the
node it needs (`Size` for a whole tensor's element count)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import IndexType
from xdsl.dialects.linalg.ops import FillOp
from xdsl.ir import Operation, SSAValue

from lossgrad_compiler.backends.onnx.state import Translation
from lossgrad_compiler.backends.onnx.types import element_type_of, static_shape
from lossgrad_compiler.backends.onnx.values import (
    EmptyTensor,
    FilledTensor,
    IndexProduct,
    ScalarConstant,
    ShapeEntry,
    Value,
)
from lossgrad_compiler.level2 import Level2ContractError


def multiply_index(t: Translation, op: arith.MuliOp) -> Value:
    lhs, rhs = t.lookup(op.lhs, op), t.lookup(op.rhs, op)
    if isinstance(lhs, IndexProduct) and isinstance(rhs, IndexProduct):
        return lhs.times(rhs)
    return t.scalar_ops.emit(op, "Mul", [lhs, rhs])


def index_cast(t: Translation, op: arith.IndexCastOp) -> Value:
    """index ↔ i64 changes nothing in ONNX (index values are int64); other widths Cast."""
    target = element_type_of(op.result.type, op)
    source = t.lookup(op.input, op)
    if isinstance(source, IndexProduct) and target == element_type_of(IndexType()):
        return source
    if element_type_of(op.input.type, op) == target:
        return t.tensor(op.input, op)
    return t.scalar_ops.emit(op, "Cast", [source], to=target)


def dim(t: Translation, op: tensor.DimOp) -> Value:
    index = t.lookup(op.index, op)
    if not isinstance(index, IndexProduct) or index.dims:
        raise Level2ContractError(op, "the dimension index must be a constant")
    entries = t.shape_entries(op.source, op)
    if not 0 <= index.factor < len(entries):
        raise Level2ContractError(op, f"dimension {index.factor} is out of range")
    entry = entries[index.factor]
    return IndexProduct(entry) if isinstance(entry, int) else IndexProduct(1, (entry,))


def empty(t: Translation, op: tensor.EmptyOp) -> Value:
    sizes = iter(op.dynamic_sizes)
    shape: list[ShapeEntry] = []
    for d in static_shape(op.tensor.type):
        shape.append(d if d is not None else _size(t, next(sizes), op))
    return EmptyTensor(tuple(shape), element_type_of(op.tensor.type, op))


def _size(t: Translation, value: SSAValue, op: Operation) -> ShapeEntry:
    size = t.lookup(value, op)
    if isinstance(size, IndexProduct):
        if not size.dims:
            return size.factor
        if size.single_dim is not None:
            return size.single_dim
    raise Level2ContractError(op, "a dynamic size must be a constant or one tensor.dim")


def fill(t: Translation, op: FillOp) -> Value:
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        raise Level2ContractError(op, "expected one scalar and one output tensor")
    value = t.lookup(op.inputs[0], op)
    if not isinstance(value, ScalarConstant):
        value = t.tensor(op.inputs[0], op)
    destination = t.lookup(op.outputs[0], op)
    if isinstance(destination, FilledTensor):
        destination = destination.empty
    if not isinstance(destination, EmptyTensor):
        raise Level2ContractError(op, "must fill a tensor.empty")
    return FilledTensor(value, destination)


BOOKKEEPING_RULES: dict[type[Operation], Callable[..., Value]] = {
    arith.MuliOp: multiply_index,
    arith.IndexCastOp: index_cast,
    tensor.DimOp: dim,
    tensor.EmptyOp: empty,
    FillOp: fill,
}
"""The rule of each count and tensor op (level2.COUNT_OPS and TENSOR_OPS, but the generic
and uitofp, whose rules are generic.translate_generic and the scalar dispatch)."""
