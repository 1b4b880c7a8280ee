"""Element types of level-2 IR as ONNX element type codes."""

from __future__ import annotations

from onnx import TensorProto
from xdsl.dialects.builtin import IndexType, IntegerType, TensorType
from xdsl.ir import Attribute, Operation

from lossgrad_compiler.dialects.lossgrad import element_float_type
from lossgrad_compiler.level2 import Level2ContractError

_INTEGER_CODES = {
    1: TensorProto.BOOL,
    8: TensorProto.INT8,
    16: TensorProto.INT16,
    32: TensorProto.INT32,
    64: TensorProto.INT64,
}


def onnx_element_type(element_type: Attribute, op: Operation | None = None) -> int:
    """The ONNX code of a scalar type: the four floats, `index` (int64) and integers."""
    float_type = element_float_type(element_type)
    if float_type is not None:
        return float_type.onnx
    if isinstance(element_type, IndexType):
        return TensorProto.INT64
    if isinstance(element_type, IntegerType) and element_type.width.data in _INTEGER_CODES:
        return _INTEGER_CODES[element_type.width.data]
    raise Level2ContractError(op, f"element type {element_type} has no ONNX counterpart")


def element_type_of(value_type: Attribute, op: Operation | None = None) -> int:
    """The ONNX element type of a tensor or scalar type."""
    if isinstance(value_type, TensorType):
        return onnx_element_type(value_type.element_type, op)
    return onnx_element_type(value_type, op)


def static_shape(value_type: Attribute) -> tuple[int | None, ...]:
    """A ranked tensor type's shape with None for dynamic sizes; () for scalars."""
    if not isinstance(value_type, TensorType):
        return ()
    return tuple(None if d < 0 else d for d in value_type.get_shape())
