"""Translation rules of the scalar and tensor-bookkeeping ops of level-2 IR.

Scalar ops become ONNX elementwise ops: inside a linalg.generic body their operands are
tensors aligned to the iteration space, so ONNX broadcasting does what the indexing maps say;
outside a body they are rank-0 tensors. `arith.constant`, index arithmetic, `tensor.dim`,
`tensor.empty` and `linalg.fill` stay symbolic (values.py) until a node needs them."""

from __future__ import annotations

from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr
from xdsl.dialects.linalg.ops import FillOp
from xdsl.ir import Operation

from lossgrad_compiler.backends.onnx.translator import Translator, rule
from lossgrad_compiler.backends.onnx.types import (
    Level2TranslationError,
    element_type_of,
    static_shape,
)
from lossgrad_compiler.backends.onnx.values import (
    EmptyTensor,
    FilledTensor,
    IndexProduct,
    ScalarConstant,
    ShapeEntry,
    Tensor,
)

_ELEMENTWISE: dict[type[Operation], str] = {
    arith.AddfOp: "Add",
    arith.SubfOp: "Sub",
    arith.MulfOp: "Mul",
    arith.DivfOp: "Div",
    arith.NegfOp: "Neg",
    arith.SelectOp: "Where",  # operands (condition, true value, false value), as in ONNX
    math.ExpOp: "Exp",
    math.LogOp: "Log",
}

# arith.cmpf predicate → (ONNX comparison, negate). NaN makes every ONNX comparison false,
# which is the ordered predicates' answer; the unordered ones are negated ordered ones.
_COMPARISONS: dict[str, tuple[str, bool]] = {
    "oeq": ("Equal", False),
    "ogt": ("Greater", False),
    "oge": ("GreaterOrEqual", False),
    "olt": ("Less", False),
    "ole": ("LessOrEqual", False),
    "une": ("Equal", True),
    "ule": ("Greater", True),
    "ult": ("GreaterOrEqual", True),
    "uge": ("Less", True),
    "ugt": ("LessOrEqual", True),
}


def emit_elementwise(t: Translator, op: Operation, onnx_op: str, **attrs: object) -> Tensor:
    """One ONNX node over the op's operands; the result varies along the union of their axes."""
    args = [t.tensor(v, op) for v in op.operands]
    hint = op.results[0].name_hint or onnx_op.lower()
    name = t.sink.add(onnx_op, [a.name for a in args], hint, **attrs)
    return Tensor(
        name, max((a.rank for a in args), default=0), frozenset().union(*(a.axes for a in args))
    )


@rule(*_ELEMENTWISE)
def elementwise(t: Translator, op: Operation) -> None:
    t.env[op.results[0]] = emit_elementwise(t, op, _ELEMENTWISE[type(op)])


@rule(arith.CmpfOp)
def compare(t: Translator, op: arith.CmpfOp) -> None:
    predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
    if predicate not in _COMPARISONS:
        raise Level2TranslationError(op, f"predicate '{predicate}' is not supported")
    onnx_op, negate = _COMPARISONS[predicate]
    result = emit_elementwise(t, op, onnx_op)
    if negate:
        result = Tensor(t.sink.add("Not", [result.name], "not"), result.rank, result.axes)
    t.env[op.result] = result


@rule(arith.ExtFOp, arith.TruncFOp, arith.UIToFPOp, arith.SIToFPOp)
def convert(t: Translator, op: Operation) -> None:
    """Float widening/narrowing and int→float: a Cast (ONNX rounds to nearest even, as MLIR)."""
    t.env[op.results[0]] = emit_elementwise(t, op, "Cast", to=element_type_of(op.results[0].type))


@rule(arith.ConstantOp)
def constant(t: Translator, op: arith.ConstantOp) -> None:
    value = op.value
    if isinstance(value, IntegerAttr) and isinstance(op.result.type, IndexType):
        t.env[op.result] = IndexProduct(value.value.data)
    elif isinstance(value, IntegerAttr | FloatAttr):
        t.env[op.result] = ScalarConstant(value.value.data, element_type_of(op.result.type, op))
    else:
        raise Level2TranslationError(op, f"only scalar constants are supported, got {value}")


@rule(arith.MuliOp)
def multiply_index(t: Translator, op: arith.MuliOp) -> None:
    lhs, rhs = t.lookup(op.lhs, op), t.lookup(op.rhs, op)
    if isinstance(lhs, IndexProduct) and isinstance(rhs, IndexProduct):
        t.env[op.result] = lhs.times(rhs)
    else:
        t.env[op.result] = emit_elementwise(t, op, "Mul")


@rule(arith.IndexCastOp)
def index_cast(t: Translator, op: arith.IndexCastOp) -> None:
    """index ↔ i64 changes nothing in ONNX (index values are int64); other widths Cast."""
    target = element_type_of(op.result.type, op)
    source = t.lookup(op.input, op)
    if isinstance(source, IndexProduct) and target == element_type_of(IndexType()):
        t.env[op.result] = source
    elif element_type_of(op.input.type, op) == target:
        t.env[op.result] = t.tensor(op.input, op)
    else:
        t.env[op.result] = emit_elementwise(t, op, "Cast", to=target)


@rule(tensor.DimOp)
def dim(t: Translator, op: tensor.DimOp) -> None:
    index = t.lookup(op.index, op)
    if not isinstance(index, IndexProduct) or index.dims:
        raise Level2TranslationError(op, "the dimension index must be a constant")
    entries = t.shape_entries(op.source, op)
    if not 0 <= index.factor < len(entries):
        raise Level2TranslationError(op, f"dimension {index.factor} is out of range")
    entry = entries[index.factor]
    t.env[op.result] = IndexProduct(entry) if isinstance(entry, int) else IndexProduct(1, (entry,))


@rule(tensor.EmptyOp)
def empty(t: Translator, op: tensor.EmptyOp) -> None:
    sizes = iter(op.dynamic_sizes)
    shape: list[ShapeEntry] = []
    for d in static_shape(op.tensor.type):
        shape.append(d if d is not None else _size(t, next(sizes), op))
    t.env[op.tensor] = EmptyTensor(tuple(shape), element_type_of(op.tensor.type, op))


def _size(t: Translator, value: object, op: Operation) -> ShapeEntry:
    size = t.lookup(value, op)  # type: ignore[arg-type]
    if isinstance(size, IndexProduct):
        if not size.dims:
            return size.factor
        if size.single_dim is not None:
            return size.single_dim
    raise Level2TranslationError(op, "a dynamic size must be a constant or one tensor.dim")


@rule(FillOp)
def fill(t: Translator, op: FillOp) -> None:
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        raise Level2TranslationError(op, "expected one scalar and one output tensor")
    value = t.lookup(op.inputs[0], op)
    if not isinstance(value, ScalarConstant):
        value = t.tensor(op.inputs[0], op)
    destination = t.lookup(op.outputs[0], op)
    if isinstance(destination, FilledTensor):
        destination = destination.empty
    if not isinstance(destination, EmptyTensor):
        raise Level2TranslationError(op, "must fill a tensor.empty")
    t.env[op.results[0]] = FilledTensor(value, destination)
