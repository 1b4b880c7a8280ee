"""Conversions between ONNX TypeProtos and spec's view of a tensor (element type and shape).

ONNX spells a dimension as dim_value (size), dim_param (symbolic name) or neither
(unknown); spec uses int, str and None for the same three cases."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, TensorShapeProto, TypeProto, helper

from lossgrad_compiler import spec


def shape_of(type_proto: TypeProto) -> spec.Shape | None:
    """The shape of a tensor type, or None when its rank is unknown."""
    if not type_proto.tensor_type.HasField("shape"):
        return None
    return tuple(_dim(d) for d in type_proto.tensor_type.shape.dim)


def _dim(d: TensorShapeProto.Dimension) -> spec.Dim:
    if d.HasField("dim_value"):
        return int(d.dim_value)
    if d.HasField("dim_param") and d.dim_param:
        return d.dim_param
    return None


def element_key(elem_type: int) -> Any:
    """What spec's type check should see for an ONNX element type code: the FloatType, or
    for any other type its lower-case ONNX name, so spec's message reads 'got int32'."""
    found = spec.float_type(elem_type)
    if found is not None:
        return found
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"element type {elem_type}"


def tensor_info(type_proto: TypeProto | None) -> spec.TensorInfo | None:
    """spec's TensorInfo of a value, or None when its type is not known at all.

    A non-tensor type (sequence, map, optional) is reported by its kind, which spec rejects
    as an element type ("got sequence (not a tensor)")."""
    kind = None if type_proto is None else type_proto.WhichOneof("value")
    if kind is None:
        return None
    if kind != "tensor_type":
        return spec.TensorInfo(f"{kind.removesuffix('_type')} (not a tensor)", None)
    elem = type_proto.tensor_type.elem_type
    if elem == TensorProto.UNDEFINED:
        return None
    return spec.TensorInfo(element_key(elem), shape_of(type_proto))


def tensor_type(elem: Any, shape: spec.Shape | None) -> TypeProto:
    """A tensor TypeProto; `elem` is anything onnx_elem_type accepts;
    `shape` None leaves the rank unknown."""
    return helper.make_tensor_type_proto(onnx_elem_type(elem), None if shape is None else shape)


def onnx_elem_type(elem: Any) -> int:
    """The ONNX element type code for a FloatType or an IndexType, a name, a numpy dtype or
    an ONNX code."""
    found = spec.float_type(elem)
    if found is not None:
        return found.onnx
    if isinstance(elem, spec.IndexType):
        return elem.onnx
    if isinstance(elem, int) and not isinstance(elem, bool):
        return elem
    return helper.np_dtype_to_tensor_dtype(np.dtype(elem))
