"""C++ spellings shared by the Ascend C printers: element types, float literals and dtype
enums (string literals, identifiers and the level-2 scalar arithmetic and comparisons are
lossgrad_compiler.backends.cxx, shared with the ORT kernels)."""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Attribute

from lossgrad_compiler import spec
from lossgrad_compiler.dialects.ascendc import is_index_element, is_mask_type
from lossgrad_compiler.dialects.lossgrad import element_float_type

ACL_DTYPES: dict[str, int] = {
    "float32": 0,
    "float16": 1,
    "int8": 2,
    "int32": 3,
    "uint8": 4,
    "int16": 6,
    "uint16": 7,
    "uint32": 8,
    "int64": 9,
    "uint64": 10,
    "float64": 11,
    "bool": 12,
    "complex64": 16,
    "complex128": 17,
    "bfloat16": 27,
}
"""numpy dtype name → aclDataType / ge::DataType value (the same numbers in CANN)."""


def element_cxx(t: Attribute) -> str:
    """The Ascend C type of a tile or global tensor element."""
    if is_mask_type(t):
        return "uint8_t"
    if is_index_element(t):  # a class-index tensor in GM
        return f"int{t.width.data}_t"  # type: ignore[attr-defined]
    element = element_float_type(t)
    if element is None or element.ascend_c is None:
        raise ValueError(f"no Ascend C element type for {t}")
    return element.ascend_c


def element_spec(t: Attribute) -> spec.FloatType:
    element = element_float_type(t)
    if element is None:
        raise ValueError(f"not a float type: {t}")
    return element


def ge_dtype(t: spec.FloatType | spec.IndexType) -> str:
    return f"ge::{t.ge}"


def op_dtype(t: spec.FloatType) -> str:
    return f"op::DataType::{t.ge}"


def float_literal(value: float) -> str:
    """A C++ float literal that denotes exactly float32(value)."""
    v = float(np.float32(value))
    if math.isnan(v):
        return "std::numeric_limits<float>::quiet_NaN()"
    if math.isinf(v):
        return ("-" if v < 0 else "") + "std::numeric_limits<float>::infinity()"
    text = repr(np.float32(v)).removeprefix("np.float32(").removesuffix(")")
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}f"


def double_literal(value: float) -> str:
    if math.isnan(value):
        return "std::numeric_limits<double>::quiet_NaN()"
    if math.isinf(value):
        return ("-" if value < 0 else "") + "std::numeric_limits<double>::infinity()"
    return float(value).hex()
