"""Vector instructions of the `ascendc` dialect, in count form and destination passing style
as in Ascend C (`ascendc.mul %dst, %a, %b, %count`)."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IndexType,
    i1,
)
from xdsl.ir import (
    SSAValue,
)
from xdsl.irdl import (
    BaseAttr,
    EqAttrConstraint,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
)
from xdsl.utils.exceptions import VerifyException

from lossgrad_compiler.dialects.ascendc.kernel import local_type, require_stage
from lossgrad_compiler.dialects.ascendc.types import (
    CmpMode,
    CmpModeAttr,
    LocalTensorType,
    RoundMode,
    RoundModeAttr,
    check_cast,
    is_mask_type,
)

# --------------------------------------------------------------------------- vector instructions


class VectorOp(IRDLOperation):
    """A vector instruction in count form: writes `count` elements of `dst`. Allowed in
    Compute and in Init (loop-invariant tiles); `dst` is the first operand."""

    ARITHMETIC: ClassVar[bool] = True  # arithmetic: no bf16 on Atlas A2/A3

    def _dst(self) -> LocalTensorType:
        return local_type(self.operands[0], "dst", self)

    def _common(self, *sources: SSAValue) -> None:
        require_stage(self, ["init", "compute"])
        dst = self._dst()
        for src in sources:
            if local_type(src, "source", self) != dst:
                raise VerifyException(f"'{self.name}' operands must all be {dst}")
        if is_mask_type(dst.element_type):
            raise VerifyException(f"'{self.name}' does not take masks")
        if self.ARITHMETIC and isinstance(dst.element_type, BFloat16Type):
            raise VerifyException(
                f"'{self.name}' on bf16: the vector unit of Atlas A2/A3 has no bf16 "
                "arithmetic; Cast to f32 first"
            )

    def _scalar(self, scalar: SSAValue) -> None:
        if scalar.type != self._dst().element_type:
            raise VerifyException(f"'{self.name}' scalar must have the tile's element type")


_TILE = VarConstraint("T", BaseAttr(LocalTensorType))
_MASK = EqAttrConstraint(LocalTensorType(i1))


class BinaryVectorOp(VectorOp):
    dst = operand_def(_TILE)
    lhs = operand_def(_TILE)
    rhs = operand_def(_TILE)
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $lhs `,` $rhs `,` $count attr-dict `:` type($dst)"

    def __init__(self, dst: SSAValue, lhs: SSAValue, rhs: SSAValue, count: SSAValue):
        super().__init__(operands=[dst, lhs, rhs, count])

    def verify_(self) -> None:
        self._common(self.lhs, self.rhs)


class ScalarVectorOp(VectorOp):
    dst = operand_def(_TILE)
    src = operand_def(_TILE)
    scalar = operand_def()
    count = operand_def(IndexType)

    assembly_format = (
        "$dst `,` $src `,` $scalar `,` $count attr-dict `:` type($dst) `,` type($scalar)"
    )

    def __init__(self, dst: SSAValue, src: SSAValue, scalar: SSAValue, count: SSAValue):
        super().__init__(operands=[dst, src, scalar, count])

    def verify_(self) -> None:
        self._common(self.src)
        self._scalar(self.scalar)


class UnaryVectorOp(VectorOp):
    dst = operand_def(_TILE)
    src = operand_def(_TILE)
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $src `,` $count attr-dict `:` type($dst)"

    def __init__(self, dst: SSAValue, src: SSAValue, count: SSAValue):
        super().__init__(operands=[dst, src, count])

    def verify_(self) -> None:
        self._common(self.src)


@irdl_op_definition
class AddOp(BinaryVectorOp):
    """Add(dst, a, b, count)."""

    name = "ascendc.add"


@irdl_op_definition
class SubOp(BinaryVectorOp):
    """Sub(dst, a, b, count)."""

    name = "ascendc.sub"


@irdl_op_definition
class MulOp(BinaryVectorOp):
    """Mul(dst, a, b, count)."""

    name = "ascendc.mul"


@irdl_op_definition
class DivOp(BinaryVectorOp):
    """Div(dst, a, b, count): IEEE division."""

    name = "ascendc.div"


@irdl_op_definition
class MaxOp(BinaryVectorOp):
    """Max(dst, a, b, count)."""

    name = "ascendc.max"


@irdl_op_definition
class MinOp(BinaryVectorOp):
    """Min(dst, a, b, count)."""

    name = "ascendc.min"


@irdl_op_definition
class AddsOp(ScalarVectorOp):
    """Adds(dst, src, scalar, count): src + scalar."""

    name = "ascendc.adds"


@irdl_op_definition
class MulsOp(ScalarVectorOp):
    """Muls(dst, src, scalar, count): src * scalar."""

    name = "ascendc.muls"


@irdl_op_definition
class MaxsOp(ScalarVectorOp):
    """Maxs(dst, src, scalar, count)."""

    name = "ascendc.maxs"


@irdl_op_definition
class MinsOp(ScalarVectorOp):
    """Mins(dst, src, scalar, count)."""

    name = "ascendc.mins"


@irdl_op_definition
class ExpOp(UnaryVectorOp):
    """Exp(dst, src, count)."""

    name = "ascendc.exp"


@irdl_op_definition
class LnOp(UnaryVectorOp):
    """Ln(dst, src, count)."""

    name = "ascendc.ln"


@irdl_op_definition
class AbsOp(UnaryVectorOp):
    """Abs(dst, src, count)."""

    name = "ascendc.abs"


@irdl_op_definition
class DuplicateOp(VectorOp):
    """Duplicate(dst, scalar, count): fill with a scalar (bf16 allowed).

    ascendc.duplicate %l, %s, %n : !ascendc.local<f32>, f32
    """

    name = "ascendc.duplicate"
    ARITHMETIC: ClassVar[bool] = False

    dst = operand_def(LocalTensorType)
    scalar = operand_def()
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $scalar `,` $count attr-dict `:` type($dst) `,` type($scalar)"

    def __init__(self, dst: SSAValue, scalar: SSAValue, count: SSAValue):
        super().__init__(operands=[dst, scalar, count])

    def verify_(self) -> None:
        self._common()
        self._scalar(self.scalar)


class _CompareBase(VectorOp):
    def _compare_common(self, *sources: SSAValue) -> LocalTensorType:
        require_stage(self, ["init", "compute"])
        mask = local_type(self.operands[0], "dst", self)
        if not is_mask_type(mask.element_type):
            raise VerifyException(f"'{self.name}' dst must be a mask (!ascendc.local<i1>)")
        src = local_type(sources[0], "source", self)
        for other in sources[1:]:
            if local_type(other, "source", self) != src:
                raise VerifyException(f"'{self.name}' sources must have one type")
        if not isinstance(src.element_type, Float16Type | Float32Type):
            raise VerifyException(f"'{self.name}' compares f16 or f32 tiles only")
        return src


@irdl_op_definition
class CompareOp(_CompareBase):
    """Compare(mask, a, b, mode, count): one bit per element. count·sizeof(T) must be a
    multiple of 256 bytes (the emulation checks it).

    ascendc.compare %m, %a, %b LT, %n : !ascendc.local<f32>
    """

    name = "ascendc.compare"

    dst = operand_def(_MASK)
    lhs = operand_def(_TILE)
    rhs = operand_def(_TILE)
    mode = prop_def(CmpModeAttr)
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $lhs `,` $rhs $mode `,` $count attr-dict `:` type($lhs)"

    def __init__(self, dst: SSAValue, lhs: SSAValue, rhs: SSAValue, mode: CmpMode, count: SSAValue):
        super().__init__(operands=[dst, lhs, rhs, count], properties={"mode": CmpModeAttr(mode)})

    def verify_(self) -> None:
        self._compare_common(self.lhs, self.rhs)


@irdl_op_definition
class ComparesOp(_CompareBase):
    """Compares(mask, a, scalar, mode, count) (CompareScalar in older CANN).

    ascendc.compares %m, %a, %s NE, %n : !ascendc.local<f32>, f32
    """

    name = "ascendc.compares"

    dst = operand_def(_MASK)
    src = operand_def(LocalTensorType)
    scalar = operand_def()
    mode = prop_def(CmpModeAttr)
    count = operand_def(IndexType)

    assembly_format = (
        "$dst `,` $src `,` $scalar $mode `,` $count attr-dict `:` type($src) `,` type($scalar)"
    )

    def __init__(
        self, dst: SSAValue, src: SSAValue, scalar: SSAValue, mode: CmpMode, count: SSAValue
    ):
        super().__init__(operands=[dst, src, scalar, count], properties={"mode": CmpModeAttr(mode)})

    def verify_(self) -> None:
        src = self._compare_common(self.src)
        if self.scalar.type != src.element_type:
            raise VerifyException(f"'{self.name}' scalar must have the source's element type")


class _SelectBase(VectorOp):
    def _select_common(self, mask: SSAValue, *sources: SSAValue) -> None:
        self._common(*sources)
        if not is_mask_type(local_type(mask, "mask", self).element_type):
            raise VerifyException(f"'{self.name}' mask must be !ascendc.local<i1>")


@irdl_op_definition
class SelectOp(_SelectBase):
    """Select(dst, mask, a, b, VSEL_TENSOR_TENSOR_MODE, count): a where the bit is 1.

    ascendc.select %d, %m, %a, %b, %n : !ascendc.local<f32>
    """

    name = "ascendc.select"

    dst = operand_def(_TILE)
    mask = operand_def(_MASK)
    true_value = operand_def(_TILE)
    false_value = operand_def(_TILE)
    count = operand_def(IndexType)

    assembly_format = (
        "$dst `,` $mask `,` $true_value `,` $false_value `,` $count attr-dict `:` type($dst)"
    )

    def __init__(
        self,
        dst: SSAValue,
        mask: SSAValue,
        true_value: SSAValue,
        false_value: SSAValue,
        count: SSAValue,
    ):
        super().__init__(operands=[dst, mask, true_value, false_value, count])

    def verify_(self) -> None:
        self._select_common(self.mask, self.true_value, self.false_value)


@irdl_op_definition
class SelectsOp(_SelectBase):
    """Select(dst, mask, a, scalar, VSEL_TENSOR_SCALAR_MODE, count).

    ascendc.selects %d, %m, %a, %s, %n : !ascendc.local<f32>, f32
    """

    name = "ascendc.selects"

    dst = operand_def(_TILE)
    mask = operand_def(_MASK)
    true_value = operand_def(_TILE)
    false_scalar = operand_def()
    count = operand_def(IndexType)

    assembly_format = (
        "$dst `,` $mask `,` $true_value `,` $false_scalar `,` $count attr-dict"
        " `:` type($dst) `,` type($false_scalar)"
    )

    def __init__(
        self,
        dst: SSAValue,
        mask: SSAValue,
        true_value: SSAValue,
        false_scalar: SSAValue,
        count: SSAValue,
    ):
        super().__init__(operands=[dst, mask, true_value, false_scalar, count])

    def verify_(self) -> None:
        self._select_common(self.mask, self.true_value)
        self._scalar(self.false_scalar)


@irdl_op_definition
class CastOp(VectorOp):
    """Cast(dst, src, round_mode, count) between f16/bf16 and f32.

    ascendc.cast %d, %s CAST_RINT, %n : !ascendc.local<f16>, !ascendc.local<f32>
    """

    name = "ascendc.cast"
    ARITHMETIC: ClassVar[bool] = False

    dst = operand_def(LocalTensorType)
    src = operand_def(LocalTensorType)
    round_mode = prop_def(RoundModeAttr)
    count = operand_def(IndexType)

    assembly_format = "$dst `,` $src $round_mode `,` $count attr-dict `:` type($dst) `,` type($src)"

    def __init__(self, dst: SSAValue, src: SSAValue, mode: RoundMode, count: SSAValue):
        super().__init__(operands=[dst, src, count], properties={"round_mode": RoundModeAttr(mode)})

    def verify_(self) -> None:
        require_stage(self, ["init", "compute"])
        dst = local_type(self.dst, "dst", self)
        src = local_type(self.src, "source", self)
        check_cast(self, src.element_type, dst.element_type, self.round_mode.data)


VECTOR_OPS: tuple[type[VectorOp], ...] = (
    AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, AddsOp, MulsOp, MaxsOp, MinsOp,
    ExpOp, LnOp, AbsOp, DuplicateOp, CompareOp, ComparesOp, SelectOp, SelectsOp, CastOp,
)  # fmt: skip
"""Every vector instruction (the static report counts these per tile)."""
