"""The `lossgrad` dialect: level 1 of lossgrad_compiler.

One op per operator of docs/operators.md, on ranked tensors of f16/bf16/f32/f64 (each operand typed
independently; ranks 0-8; static or dynamic dims). The verifier is spec.validate itself, so
the dialect, the ONNX schemas and the kernels reject the same calls with the same message.
`lower-lossgrad` (passes/lower_lossgrad.py) turns these ops into level-2 IR.

    %r = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum beta = 5.000000e-01
         : tensor<f32>, tensor<?x4xf32>, tensor<1x4xf32> -> tensor<?x4xf32>
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, ClassVar, Self

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    BoolAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
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
from xdsl.parser import Parser
from xdsl.printer import Printer
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


def _parse_reduction(parser: Parser) -> Attribute:
    return ReductionAttr(parser.parse_str_enum(spec.Reduction))


def _print_reduction(printer: Printer, attr: Attribute) -> None:
    assert isinstance(attr, ReductionAttr)
    printer.print_string(attr.data.value)


def _parse_bool(parser: Parser) -> Attribute:
    return BoolAttr.from_bool(parser.parse_boolean(" (true or false)"))


def _print_bool(printer: Printer, attr: Attribute) -> None:
    assert isinstance(attr, IntegerAttr)
    printer.print_string("true" if attr.value.data else "false")


def _parse_f64(parser: Parser) -> Attribute:
    """A float literal, or (as MLIR accepts for any float) the hex bit pattern of the f64,
    which is how inf and NaN are printed."""
    start = parser.pos
    bits = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
    if bits is None:
        return FloatAttr(parser.parse_float(), f64)
    if not parser.lexer.input.content[start : parser.pos].startswith(("0x", "0X")):
        parser.raise_error("expected a float literal (or a hex f64 bit pattern)", start, parser.pos)
    if bits >= 1 << 64:
        parser.raise_error("hex float literal does not fit in f64", start, parser.pos)
    return FloatAttr(struct.unpack("<d", struct.pack("<Q", bits))[0], f64)


def _print_f64(printer: Printer, attr: Attribute) -> None:
    assert isinstance(attr, FloatAttr)
    printer.print_float(attr.value.data, f64)


PropertySyntax = tuple[Callable[[Parser], Attribute], Callable[[Printer, Attribute], None]]
PROPERTY_SYNTAX: dict[str, PropertySyntax] = {
    "reduction": (_parse_reduction, _print_reduction),
    "log_target": (_parse_bool, _print_bool),
    "beta": (_parse_f64, _print_f64),
}
"""How each property reads and prints in the custom form: `name = value`."""


class LossGradOp(IRDLOperation):
    """Shared operands, result, `reduction` and verifier of the three ops (not an op itself)."""

    SPEC: ClassVar[spec.OperatorSpec]

    grad_output = operand_def(TensorType)
    self_ = operand_def(TensorType)
    target = operand_def(TensorType)
    result = result_def(TensorType)

    reduction = prop_def(ReductionAttr, default_value=DEFAULT_REDUCTION)

    traits = traits_def(Pure())

    PROPERTY_NAMES: ClassVar[tuple[str, ...]] = ("reduction",)
    """The properties in custom-form order; each is printed only when not its default."""

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

    # Custom form: `%go, %x, %t [reduction = mean] [log_target = true | beta = 0.5]
    # [attr-dict] : type(go), type(x), type(t) -> type(result)`. Hand-written rather than
    # declarative so that a non-finite beta (printed as hex bits) reads back, and because
    # it parses faster.
    @classmethod
    def parse(cls, parser: Parser) -> Self:
        unresolved = [parser.parse_unresolved_operand()]
        for _ in range(2):
            parser.parse_punctuation(",")
            unresolved.append(parser.parse_unresolved_operand())
        properties: dict[str, Attribute] = {}
        while (name := parser.parse_optional_keyword_in(cls.PROPERTY_NAMES)) is not None:
            if name in properties:
                parser.raise_error(f"property '{name}' given twice")
            parser.parse_punctuation("=")
            properties[name] = PROPERTY_SYNTAX[name][0](parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [parser.parse_type()]
        for _ in range(2):
            parser.parse_punctuation(",")
            types.append(parser.parse_type())
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        operands = parser.resolve_operands(unresolved, types, parser.pos)
        return cls.create(
            operands=operands,
            result_types=[result_type],
            properties=properties,
            attributes=attributes,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        definition = self.get_irdl_definition()
        for name in self.PROPERTY_NAMES:
            value = self.properties.get(name)
            if value is not None and value != definition.properties[name].default_value:
                printer.print_string(f" {name} = ")
                PROPERTY_SYNTAX[name][1](printer, value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list(self.operand_types, printer.print_attribute)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

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

    log_target = prop_def(BoolAttr, default_value=BoolAttr.from_bool(bool(spec.LOG_TARGET.default)))

    PROPERTY_NAMES: ClassVar[tuple[str, ...]] = ("reduction", "log_target")

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


@irdl_op_definition
class KlDivTargetBackwardOp(KlDivOp):
    """Gradient of kl_div with respect to `target`; the result has `target`'s type.

    %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = sum
         : tensor<f32>, tensor<4x8xf16>, tensor<8xf16> -> tensor<8xf16>
    """

    name = "lossgrad.kl_div_target_backward"
    SPEC: ClassVar[spec.OperatorSpec] = spec.KL_DIV_TARGET_BACKWARD


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

    PROPERTY_NAMES: ClassVar[tuple[str, ...]] = ("reduction", "beta")

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
