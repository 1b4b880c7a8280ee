"""Types, attributes and enums of the `ascendc` dialect: global and local tensors, queues,
calc buffers, the TPosition/CMPMODE/RoundMode enums and the Cast rules of Atlas A2/A3."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerType,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Operation,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    TypeAttribute,
)
from xdsl.irdl import (
    irdl_attr_definition,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

# --------------------------------------------------------------------------- types

_DATA_TYPES = (Float16Type, BFloat16Type, Float32Type)
"""Element types a global tensor, a queue and a vector tile may hold."""


def is_mask_type(element: Attribute) -> bool:
    """i1 is a bit mask (Compare's output): one bit per element, packed in uint8."""
    return isinstance(element, IntegerType) and element.width.data == 1


def element_bits(element: Attribute) -> int:
    """Bits per element of a tile: 1 for masks, 16 or 32 for the float types."""
    if is_mask_type(element):
        return 1
    return 32 if isinstance(element, Float32Type) else 16


def tile_bytes(element: Attribute, elements: int) -> int:
    """Bytes of UB that `elements` elements take (a mask rounds up to whole bytes)."""
    return (elements * element_bits(element) + 7) // 8


class _ElementTyped(ParametrizedAttribute, TypeAttribute):
    """A type with one element-type parameter, printed `!ascendc.name<f32>`."""

    element_type: Attribute
    ALLOWED: ClassVar[tuple[type[Attribute], ...]] = _DATA_TYPES
    ALLOW_MASK: ClassVar[bool] = False

    def __init__(self, element_type: Attribute) -> None:
        super().__init__(element_type)

    def verify(self) -> None:
        element = self.element_type
        if isinstance(element, self.ALLOWED) or (self.ALLOW_MASK and is_mask_type(element)):
            return
        allowed = "f16, bf16, f32" + (", i1" if self.ALLOW_MASK else "")
        raise VerifyException(f"{self.name} element type must be one of {allowed}, got {element}")


def is_index_element(element: Attribute) -> bool:
    """i64 or i32: a class-index tensor in GM (read element by element, never tiled)."""
    return isinstance(element, IntegerType) and element.width.data in (32, 64)


@irdl_attr_definition
class GlobalTensorType(_ElementTyped):
    """A GlobalTensor<T>: a tensor in global memory (GM), addressed by element offset; i64
    and i32 hold class indices, which a kernel reads with GetValue only."""

    name = "ascendc.gm"

    def verify(self) -> None:
        if is_index_element(self.element_type):
            return
        super().verify()


@irdl_attr_definition
class LocalTensorType(_ElementTyped):
    """A LocalTensor<T>: one tile in the unified buffer (UB); i1 is a packed bit mask."""

    name = "ascendc.local"
    ALLOW_MASK: ClassVar[bool] = True


@irdl_attr_definition
class QueueType(_ElementTyped):
    """A TQue whose buffers hold tiles of the element type."""

    name = "ascendc.queue"


@irdl_attr_definition
class CalcBufferType(_ElementTyped):
    """A TBuf<VECCALC>: UB scratch without queue semantics, viewed as tiles of one type."""

    name = "ascendc.tbuf"
    ALLOW_MASK: ClassVar[bool] = True


# --------------------------------------------------------------------------- enums


class Position(StrEnum):
    """TPosition of a queue: VECIN feeds Compute from CopyIn, VECOUT feeds CopyOut."""

    VECIN = "VECIN"
    VECOUT = "VECOUT"


class CmpMode(StrEnum):
    """CMPMODE of Compare/Compares; every mode but NE is false when an operand is NaN."""

    LT = "LT"
    GT = "GT"
    EQ = "EQ"
    LE = "LE"
    GE = "GE"
    NE = "NE"


class RoundMode(StrEnum):
    """RoundMode of Cast (CAST_NONE: exact when lossless, ties-to-even otherwise)."""

    CAST_NONE = "CAST_NONE"
    CAST_RINT = "CAST_RINT"
    CAST_FLOOR = "CAST_FLOOR"
    CAST_CEIL = "CAST_CEIL"
    CAST_ROUND = "CAST_ROUND"
    CAST_TRUNC = "CAST_TRUNC"
    CAST_ODD = "CAST_ODD"


@irdl_attr_definition
class PositionAttr(EnumAttribute[Position], SpacedOpaqueSyntaxAttribute):
    name = "ascendc.position"


@irdl_attr_definition
class CmpModeAttr(EnumAttribute[CmpMode], SpacedOpaqueSyntaxAttribute):
    name = "ascendc.cmp_mode"


@irdl_attr_definition
class RoundModeAttr(EnumAttribute[RoundMode], SpacedOpaqueSyntaxAttribute):
    name = "ascendc.round_mode"


_NARROWING_MODES = frozenset(
    {
        RoundMode.CAST_RINT,
        RoundMode.CAST_FLOOR,
        RoundMode.CAST_CEIL,
        RoundMode.CAST_ROUND,
        RoundMode.CAST_TRUNC,
    }
)
CAST_MODES: dict[tuple[type[Attribute], type[Attribute]], frozenset[RoundMode]] = {
    (Float16Type, Float32Type): frozenset({RoundMode.CAST_NONE}),
    (BFloat16Type, Float32Type): frozenset({RoundMode.CAST_NONE}),
    (Float32Type, Float16Type): _NARROWING_MODES | {RoundMode.CAST_NONE, RoundMode.CAST_ODD},
    (Float32Type, BFloat16Type): _NARROWING_MODES,  # float→bf16 CAST_NONE is not allowed on A2
}
"""(source, destination) → the round modes Cast accepts on Atlas A2/A3 (docs/ascend-c.md)."""


def check_cast(op: Operation, src: Attribute, dst: Attribute, mode: RoundMode) -> None:
    modes = CAST_MODES.get((type(src), type(dst)))
    if modes is None:
        raise VerifyException(f"'{op.name}' from {src} to {dst} is not a supported Cast")
    if mode not in modes:
        allowed = ", ".join(sorted(m.value for m in modes))
        raise VerifyException(f"'{op.name}' from {src} to {dst} needs one of {allowed}, got {mode}")
