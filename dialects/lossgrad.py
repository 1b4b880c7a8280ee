"""The `lossgrad` dialect: level 1 of lossgrad_compiler.

One op per operator of SPEC.md, on ranked tensors of f16/bf16/f32/f64 (each operand typed
independently; ranks 0-8; static or dynamic dims). The verifier is spec.validate itself, so
the dialect, the ONNX schemas and the kernels reject the same calls with the same message.
`lower-lossgrad` (passes/lower_lossgrad.py) turns these ops into level-2 IR.

    %r = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum beta = 5.000000e-01
         : tensor<f32>, tensor<?x4xf32>, tensor<1x4xf32> -> tensor<?x4xf32>
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    BoolAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, Operation, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from lossgrad_compiler import spec
from lossgrad_compiler.errors import InvalidArgumentError, LossGradError

# --------------------------------------------------------------------------- types

MLIR_FLOAT_TYPES: dict[str, Attribute] = {"f16": f16, "bf16": bf16, "f32": f32, "f64": f64}
"""spec.FloatType.mlir → the xDSL builtin type."""

_SPEC_NAME_OF_TYPE: dict[type[Attribute], str] = {
    Float16Type: "f16",
    BFloat16Type: "bf16",
    Float32Type: "f32",
    Float64Type: "f64",
}


def element_float_type(element_type: Attribute) -> spec.FloatType | None:
    """The spec type of an MLIR element type, or None for anything but the four floats."""
    name = _SPEC_NAME_OF_TYPE.get(type(element_type))
    return spec.float_type(name) if name is not None else None


def tensor_info(value_type: Attribute) -> spec.TensorInfo:
    """What spec.validate needs to know of an operand type; dynamic dims become None.

    A non-float element type is passed as the attribute itself so that the spec's message
    names it as MLIR spells it (`i32`, `f80`)."""
    if not isinstance(value_type, TensorType):
        raise VerifyException(f"expected a ranked tensor, got {value_type}")
    element = value_type.element_type
    name = _SPEC_NAME_OF_TYPE.get(type(element))
    shape = tuple(None if d == DYNAMIC_INDEX or d < 0 else d for d in value_type.get_shape())
    return spec.TensorInfo(dtype=name if name is not None else element, shape=shape)


def result_tensor_type(checked: spec.CheckedCall) -> TensorType:
    """The result type spec.validate derives for a call (unknown dims become `?`)."""
    assert checked.result_shape is not None, "ranked operands always give a result shape"
    shape = [d if isinstance(d, int) else DYNAMIC_INDEX for d in checked.result_shape]
    return TensorType(MLIR_FLOAT_TYPES[checked.result_type.mlir], shape)


@lru_cache(maxsize=4096)
def validate_types(
    op_type: str, types: tuple[Attribute, ...], attrs: tuple[tuple[str, Any], ...]
) -> spec.CheckedCall:
    """spec.validate for operand types, memoised: a module repeats a few signatures many
    times, and the verifier and the lowering both ask. Callers must not mutate the result."""
    infos = dict(zip(spec.INPUT_NAMES, (tensor_info(t) for t in types), strict=True))
    return spec.validate(op_type, infos, dict(attrs))


# --------------------------------------------------------------------------- attributes


@irdl_attr_definition
class ReductionAttr(EnumAttribute[spec.Reduction], SpacedOpaqueSyntaxAttribute):
    """The reduction of the forward loss; the names are spec.Reduction's values.

    Custom form inside an op: `reduction = batchmean`; generic form:
    `#lossgrad<reduction batchmean>`."""

    name = "lossgrad.reduction"


DEFAULT_REDUCTION = ReductionAttr(spec.Reduction(spec.KL_DIV_BACKWARD.defaults["reduction"]))


# --------------------------------------------------------------------------- ops


def _format(extra_property: str) -> str:
    """Operands, then each defaulted property in an optional group (printed only when it
    differs from the default: the round-trip pitfall of xdsl 0.74), then the four types."""
    return (
        "$grad_output `,` $self_ `,` $target"
        " (`reduction` `=` $reduction^)?"
        f" (`{extra_property}` `=` ${extra_property}^)?"
        " attr-dict `:` type($grad_output) `,` type($self_) `,` type($target)"
        " `->` type($result)"
    )


class LossGradOp(IRDLOperation):
    """Shared operands, result, `reduction` and verifier of the three ops (not an op itself)."""

    SPEC: ClassVar[spec.OperatorSpec]

    grad_output = operand_def(TensorType)
    self_ = operand_def(TensorType)
    target = operand_def(TensorType)
    result = result_def(TensorType)

    reduction = prop_def(ReductionAttr, default_value=DEFAULT_REDUCTION)

    traits = traits_def(Pure())

    def __init__(
        self,
        grad_output: SSAValue | Operation,
        self_: SSAValue | Operation,
        target: SSAValue | Operation,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        """Build from ONNX-style attributes; raises the spec's LossGradError on a bad call."""
        operands = [SSAValue.get(v) for v in (grad_output, self_, target)]
        checked = spec.validate(
            self.SPEC.name,
            dict(zip(spec.INPUT_NAMES, (tensor_info(v.type) for v in operands), strict=True)),
            attrs or {},
        )
        super().__init__(
            operands=operands,
            result_types=[result_tensor_type(checked)],
            properties=self.properties_from_onnx(checked.attrs),
        )

    @classmethod
    def properties_from_onnx(cls, attrs: Mapping[str, Any]) -> dict[str, Attribute]:
        """The op's properties for checked ONNX-style attributes (all of them present)."""
        return {"reduction": ReductionAttr(spec.Reduction(attrs["reduction"]))}

    @property
    def reduction_kind(self) -> spec.Reduction:
        return self.reduction.data

    def onnx_attributes(self) -> dict[str, Any]:
        """The attributes as the ONNX node spells them (the inverse of properties_from_onnx)."""
        return {"reduction": self.reduction.data.value}

    def check(self) -> spec.CheckedCall:
        """spec.validate on this op's operand types and attributes (raises LossGradError)."""
        types = (self.grad_output.type, self.self_.type, self.target.type)
        return validate_types(self.SPEC.name, types, tuple(self.onnx_attributes().items()))

    def verify_(self) -> None:
        try:
            checked = self.check()
        except LossGradError as err:
            raise VerifyException(str(err)) from err
        expected = result_tensor_type(checked)
        if self.result.type != expected:
            err = InvalidArgumentError(
                self.SPEC.name,
                "result",
                f"type must be {expected} (derived from the operands), got {self.result.type}",
            )
            raise VerifyException(str(err))


class KlDivOp(LossGradOp):
    """The two KL ops: `reduction` and `log_target` (not an op itself)."""

    log_target = prop_def(
        BoolAttr, default_value=BoolAttr.from_bool(bool(spec.LOG_TARGET.default))
    )

    @classmethod
    def properties_from_onnx(cls, attrs: Mapping[str, Any]) -> dict[str, Attribute]:
        props = super().properties_from_onnx(attrs)
        props["log_target"] = BoolAttr.from_bool(bool(attrs["log_target"]))
        return props

    @property
    def log_target_flag(self) -> bool:
        return bool(self.log_target.value.data)

    def onnx_attributes(self) -> dict[str, Any]:
        return {**super().onnx_attributes(), "log_target": int(self.log_target_flag)}


@irdl_op_definition
class KlDivBackwardOp(KlDivOp):
    """Gradient of kl_div with respect to `self`; the result has `self`'s type.

        %g = lossgrad.kl_div_backward %dy, %x, %t reduction = batchmean log_target = true
             : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    """

    name = "lossgrad.kl_div_backward"
    SPEC: ClassVar[spec.OperatorSpec] = spec.KL_DIV_BACKWARD
    assembly_format = _format("log_target")


@irdl_op_definition
class KlDivTargetBackwardOp(KlDivOp):
    """Gradient of kl_div with respect to `target`; the result has `target`'s type.

        %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = sum
             : tensor<f32>, tensor<4x8xf16>, tensor<8xf16> -> tensor<8xf16>
    """

    name = "lossgrad.kl_div_target_backward"
    SPEC: ClassVar[spec.OperatorSpec] = spec.KL_DIV_TARGET_BACKWARD
    assembly_format = _format("log_target")


@irdl_op_definition
class SmoothL1LossBackwardOp(LossGradOp):
    """Gradient of smooth_l1_loss; the result is broadcast(grad_output, self, target) in
    the promoted type. `beta` is an f64 (PyTorch's double), never rounded to f32.

        %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t beta = 5.000000e-01
             : tensor<4x1xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    """

    name = "lossgrad.smooth_l1_loss_backward"
    SPEC: ClassVar[spec.OperatorSpec] = spec.SMOOTH_L1_LOSS_BACKWARD

    beta = prop_def(FloatAttr[Float64Type], default_value=FloatAttr(spec.BETA.default, f64))

    assembly_format = _format("beta")

    @classmethod
    def properties_from_onnx(cls, attrs: Mapping[str, Any]) -> dict[str, Attribute]:
        props = super().properties_from_onnx(attrs)
        props["beta"] = FloatAttr(float(attrs["beta"]), f64)
        return props

    @property
    def beta_value(self) -> float:
        return float(self.beta.value.data)

    def onnx_attributes(self) -> dict[str, Any]:
        return {**super().onnx_attributes(), "beta": self.beta_value}


OP_CLASSES: dict[str, type[LossGradOp]] = {
    spec.KL_DIV_BACKWARD.name: KlDivBackwardOp,
    spec.KL_DIV_TARGET_BACKWARD.name: KlDivTargetBackwardOp,
    spec.SMOOTH_L1_LOSS_BACKWARD.name: SmoothL1LossBackwardOp,
}
"""The op class of each ONNX op_type."""


def make_op(
    op_type: str,
    grad_output: SSAValue,
    self_: SSAValue,
    target: SSAValue,
    attrs: Mapping[str, Any],
) -> LossGradOp:
    """The op for an ONNX node: `attrs` as spec.check_attributes returns them; the result
    type is derived by spec. Raises the spec's LossGradError for a call it rejects."""
    op_class = OP_CLASSES[spec.operator(op_type).name]  # spec names the known ops if unknown
    return op_class(grad_output, self_, target, attrs)


Lossgrad = Dialect(
    "lossgrad",
    [KlDivBackwardOp, KlDivTargetBackwardOp, SmoothL1LossBackwardOp],
    [ReductionAttr],
)
