"""C++ spelling of level-2 types and constants in the ORT kernel library (the sanitisers every
printed name or string goes through are lossgrad_compiler/backends/cxx.py, shared with
Ascend C)."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import IndexType, IntegerType
from xdsl.ir import Attribute

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ort.errors import OrtBackendError
from lossgrad_compiler.dialects.lossgrad import element_float_type


def cxx_type(t: Attribute) -> str:
    """The C++ type that holds a level-2 scalar of type `t`."""
    float_type = element_float_type(t)
    if float_type is not None:
        return float_type.cxx
    if isinstance(t, IndexType):
        return "uint64_t"
    if isinstance(t, IntegerType):
        width = t.width.data
        if width == 1:
            return "bool"
        for index_type in spec.INDEX_TYPES:  # a class index (a target): int64_t, int32_t
            if width == index_type.bits:
                return index_type.cxx
    raise OrtBackendError(f"the ORT backend has no C++ type for {t}")


def cxx_float_literal(value: float, type_name: str) -> str:
    """An exact C++ literal of `value` (already rounded to its type) as `type_name`."""
    if math.isnan(value):
        return f"std::numeric_limits<{type_name}>::quiet_NaN()"
    if math.isinf(value):
        sign = "-" if value < 0 else ""
        return f"{sign}std::numeric_limits<{type_name}>::infinity()"
    return f"static_cast<{type_name}>({float(value).hex()})"
