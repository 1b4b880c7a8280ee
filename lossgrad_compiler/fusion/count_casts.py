"""Which Casts a count of elements passes through unchanged.

A mean's divisor is proved equal to the operator's n by following it down to shapes
(scale.py). A Cast on that way is transparent only where it keeps every value the count can
take: a Cast to int8 wraps 300 to 44, one to float16 rounds 2049 to 2048, and the fused node,
which divides by the true n, would then compute something else than the graph. A static
size is checked by value; a size known only by name may be anything up to 2^63 - 1, which
int64 and uint64 hold and no narrower integer type or float type holds exactly (float64's
integers are exact up to 2^53 only)."""

from __future__ import annotations

import numpy as np
import onnx

from lossgrad_compiler.fusion.graph import cast_dtype

LARGEST_SIZE = 2**63 - 1  # an int64 dimension's largest value
Monomial = tuple[int, tuple[str, ...]]  # an integer factor times named dimensions


def cast_loses(to: int | None, sizes: list[Monomial]) -> str:
    """Why Cast(to=`to`) of a vector holding `sizes` does not keep each of them ("" when
    it keeps every value each can take)."""
    dtype = cast_dtype(to)
    name = _type_name(to)
    if dtype is None or dtype.kind == "b":
        return f"the count passes through a Cast to {name}, which does not hold sizes"
    for factor, names in sizes:
        if names:
            if not _holds(dtype, 0) or not _holds(dtype, LARGEST_SIZE):
                shown = "*".join(names) if factor == 1 else f"{factor}*{'*'.join(names)}"
                return (
                    f"the count passes through a Cast to {name}, which does not hold every "
                    f"value of the dynamic size {shown} (up to 2^63 - 1) exactly"
                )
        elif not _holds(dtype, factor):
            return (
                f"the count passes through a Cast to {name}, which does not hold the size "
                f"{factor} exactly (it becomes {_cast_value(dtype, factor)})"
            )
    return ""


def _holds(dtype: np.dtype, value: int) -> bool:
    """`value` converts to `dtype` and back without change."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min) <= value <= int(info.max)
    with np.errstate(all="ignore"):
        converted = float(dtype.type(value))
    return converted == value  # Python compares an int and a float exactly


def _cast_value(dtype: np.dtype, value: int) -> str:
    """What a Cast of `value` to `dtype` gives (wrapped as ONNX's integer Cast wraps)."""
    if dtype.kind in "iu":
        return str(np.asarray(value, np.uint64 if value > 2**62 else np.int64).astype(dtype))
    with np.errstate(all="ignore"):
        return repr(float(dtype.type(value)))


def _type_name(to: int | None) -> str:
    if to is None:
        return "an unread type"
    try:
        return str(onnx.TensorProto.DataType.Name(to)).lower()
    except ValueError:
        return f"element type {to}"
