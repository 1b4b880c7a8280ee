"""The `lossgrad` dialect: level 1 of lossgrad_compiler.

One op per operator of docs/operators.md, on ranked tensors of f16/bf16/f32/f64 (each operand typed
independently; ranks 0-8; static or dynamic dims), made from spec's table: an operand per
input (optional inputs are optional operands), a property per attribute. The verifier is
spec.validate itself, so the dialect, the ONNX schemas and the kernels reject the same calls
with the same message. `lower-lossgrad` (passes/lower_lossgrad.py) turns these ops into
level-2 IR.

    %r = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum beta = 5.000000e-01
         : tensor<f32>, tensor<?x4xf32>, tensor<1x4xf32> -> tensor<?x4xf32>
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
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
    IntegerType,
    Signedness,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, Operation, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
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


def _index_name(element: Attribute) -> str | None:
    """The spec name of a signless i64/i32 (a class-index element type), else None."""
    if isinstance(element, IntegerType) and element.signedness.data is Signedness.SIGNLESS:
        found = spec.index_type(f"i{element.width.data}")
        return found.mlir if found is not None else None
    return None


def tensor_info(value_type: Attribute) -> spec.TensorInfo:
    """What spec.validate needs to know of an operand type; dynamic dims become None.

    A non-float element type is passed as the attribute itself so that the spec's message
    names it as MLIR spells it (`i32`, `f80`)."""
    if not isinstance(value_type, TensorType):
        raise VerifyException(f"expected a ranked tensor, got {value_type}")
    element = value_type.element_type
    name = _SPEC_NAME_OF_TYPE.get(type(element)) or _index_name(element)
    shape = tuple(None if d == DYNAMIC_INDEX or d < 0 else d for d in value_type.get_shape())
    return spec.TensorInfo(dtype=name if name is not None else element, shape=shape)


def result_tensor_type(checked: spec.CheckedCall) -> TensorType:
    """The result type spec.validate derives for a call (unknown dims become `?`)."""
    assert checked.result_shape is not None, "ranked operands always give a result shape"
    shape = [d if isinstance(d, int) else DYNAMIC_INDEX for d in checked.result_shape]
    return TensorType(MLIR_FLOAT_TYPES[checked.result_type.mlir], shape)


@lru_cache(maxsize=4096)
def validate_types(
    op_type: str,
    names: tuple[str, ...],
    types: tuple[Attribute, ...],
    attrs: tuple[tuple[str, Any], ...],
) -> spec.CheckedCall:
    """spec.validate for the operand types of the inputs `names`, memoised: a module repeats
    a few signatures many times, and the verifier and the lowering both ask. Callers must not
    mutate the result."""
    infos = dict(zip(names, (tensor_info(t) for t in types), strict=True))
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


def _parse_i64(parser: Parser) -> Attribute:
    return IntegerAttr(parser.parse_integer(allow_boolean=False, allow_negative=True), i64)


def _print_i64(printer: Printer, attr: Attribute) -> None:
    assert isinstance(attr, IntegerAttr)
    printer.print_string(str(attr.value.data))


PropertySyntax = tuple[Callable[[Parser], Attribute], Callable[[Printer, Attribute], None]]
_SYNTAX_BY_KIND: dict[str, PropertySyntax] = {
    "reduction": (_parse_reduction, _print_reduction),
    "bool": (_parse_bool, _print_bool),
    "f64": (_parse_f64, _print_f64),
    "i64": (_parse_i64, _print_i64),
}


def _property_kind(attribute: spec.AttributeSpec) -> str:
    """How an attribute is held as a property: `reduction` (ReductionAttr), `bool` (an INT
    of choices 0/1), `f64` (a FLOAT, PyTorch's double: never rounded to f32), `i64` (any
    other INT: ignore_index)."""
    if attribute.name == "reduction":
        return "reduction"
    boolean = attribute.choices is not None and set(attribute.choices) <= {0, 1}
    if attribute.kind is spec.AttrKind.INT and boolean:
        return "bool"
    if attribute.kind is spec.AttrKind.FLOAT:
        return "f64"
    if attribute.kind is spec.AttrKind.INT:
        return "i64"
    raise TypeError(f"attribute '{attribute.name}' has no property form")


def _operand_field(name: str) -> str:
    """The Python field of an input's operand (`self` is a keyword's neighbour: `self_`)."""
    return "self_" if name == "self" else name


class LossGradOp(IRDLOperation):
    """What every lossgrad op shares: one operand per input of its operator (an optional
    input is an optional operand), one result, one property per attribute, and the verifier,
    which is spec.validate. The op classes are made from spec's table (`op_class`)."""

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
        inputs: Mapping[str, SSAValue | Operation | None] | Sequence[SSAValue | Operation | None],
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        """Build from the inputs (by name, or in the operator's order; an optional one may be
        None or left out) and ONNX-style attributes; raises the spec's LossGradError on a
        bad call."""
        by_name = _inputs_by_name(self.SPEC, inputs)
        checked = spec.validate(
            self.SPEC.name, {n: tensor_info(v.type) for n, v in by_name.items()}, attrs or {}
        )
        operands: list[SSAValue | list[SSAValue]] = []
        for spec_input in self.SPEC.inputs:
            value = by_name.get(spec_input.name)
            if spec_input.optional:
                operands.append([] if value is None else [value])
            else:
                assert value is not None  # spec.validate required it
                operands.append(value)
        super().__init__(
            operands=operands,
            result_types=[result_tensor_type(checked)],
            properties=self.properties_from_onnx(checked.attrs),
        )

    # Custom form: `%go, %x, %t [weight %w] [pos_weight %pw] [reduction = mean]
    # [log_target = true | beta = 0.5 | delta = 1.0] [attr-dict] : <type of each operand>
    # -> type(result)`. Hand-written rather than declarative so that a non-finite float
    # (printed as hex bits) reads back, and because it parses faster.
    @classmethod
    def parse(cls, parser: Parser) -> Self:
        unresolved = [parser.parse_unresolved_operand()]
        required = len(cls.SPEC.inputs) - len(cls.SPEC.optional_inputs)
        for _ in range(required - 1):
            parser.parse_punctuation(",")
            unresolved.append(parser.parse_unresolved_operand())
        optional = cls.SPEC.optional_inputs
        present: list[str] = []
        while (name := parser.parse_optional_keyword_in(optional)) is not None:
            if name in present:
                parser.raise_error(f"operand '{name}' given twice")
            if present and optional.index(name) < optional.index(present[-1]):
                parser.raise_error(f"operand '{name}' comes before {present[-1]}")
            present.append(name)
            unresolved.append(parser.parse_unresolved_operand())
        properties: dict[str, Attribute] = {}
        while (name := parser.parse_optional_keyword_in(cls.PROPERTY_NAMES)) is not None:
            if name in properties:
                parser.raise_error(f"property '{name}' given twice")
            parser.parse_punctuation("=")
            properties[name] = cls.property_syntax(name)[0](parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [parser.parse_type()]
        for _ in range(len(unresolved) - 1):
            parser.parse_punctuation(",")
            types.append(parser.parse_type())
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        values = parser.resolve_operands(unresolved, types, parser.pos)
        operands: list[SSAValue | list[SSAValue]] = [*values[:required]]
        given = dict(zip(present, values[required:], strict=True))
        for name in optional:
            operands.append([given[name]] if name in given else [])
        return cls.build(
            operands=operands,
            result_types=[result_type],
            properties=properties,
            attributes=attributes,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        required = len(self.SPEC.inputs) - len(self.SPEC.optional_inputs)
        printer.print_list(self.operands[:required], printer.print_operand)
        for name, value in self.input_values().items():
            if name in self.SPEC.optional_inputs:
                printer.print_string(f" {name} ")
                printer.print_operand(value)
        definition = self.get_irdl_definition()
        for name in self.PROPERTY_NAMES:
            value = self.properties.get(name)
            if value is not None and value != definition.properties[name].default_value:
                printer.print_string(f" {name} = ")
                self.property_syntax(name)[1](printer, value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list(self.operand_types, printer.print_attribute)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def property_syntax(cls, name: str) -> PropertySyntax:
        return _SYNTAX_BY_KIND[_property_kind(cls.SPEC.attribute(name))]

    def input_values(self) -> dict[str, SSAValue]:
        """The operands of the inputs that are present, by input name, in input order."""
        found: dict[str, SSAValue] = {}
        for spec_input in self.SPEC.inputs:
            value = getattr(self, _operand_field(spec_input.name))
            if value is not None:
                found[spec_input.name] = value
        return found

    @classmethod
    def properties_from_onnx(cls, attrs: Mapping[str, Any]) -> dict[str, Attribute]:
        """The op's properties for checked ONNX-style attributes (all of them present)."""
        props: dict[str, Attribute] = {}
        for attribute in cls.SPEC.attributes:
            value = attrs[attribute.name]
            kind = _property_kind(attribute)
            if kind == "reduction":
                props[attribute.name] = ReductionAttr(spec.Reduction(value))
            elif kind == "bool":
                props[attribute.name] = BoolAttr.from_bool(bool(value))
            elif kind == "i64":
                props[attribute.name] = IntegerAttr(int(value), i64)
            else:
                props[attribute.name] = FloatAttr(float(value), f64)
        return props

    @property
    def reduction_kind(self) -> spec.Reduction:
        return self.reduction.data

    def onnx_attributes(self) -> dict[str, Any]:
        """The attributes as the ONNX node spells them (the inverse of properties_from_onnx)."""
        values: dict[str, Any] = {}
        for attribute in self.SPEC.attributes:
            prop = self.properties.get(attribute.name)
            kind = _property_kind(attribute)
            if kind == "reduction":
                assert isinstance(prop, ReductionAttr)
                values[attribute.name] = prop.data.value
            elif kind == "bool":
                assert isinstance(prop, IntegerAttr)
                values[attribute.name] = int(bool(prop.value.data))
            elif kind == "i64":
                assert isinstance(prop, IntegerAttr)
                values[attribute.name] = int(prop.value.data)
            else:
                assert isinstance(prop, FloatAttr)
                values[attribute.name] = float(prop.value.data)
        return values

    def check(self) -> spec.CheckedCall:
        """spec.validate on this op's operand types and attributes (raises LossGradError)."""
        inputs = self.input_values()
        types = tuple(v.type for v in inputs.values())
        return validate_types(
            self.SPEC.name, tuple(inputs), types, tuple(self.onnx_attributes().items())
        )

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


def _inputs_by_name(
    op: spec.OperatorSpec,
    inputs: Mapping[str, SSAValue | Operation | None] | Sequence[SSAValue | Operation | None],
) -> dict[str, SSAValue]:
    if isinstance(inputs, Mapping):
        given = dict(inputs)
    else:
        if len(inputs) > len(op.inputs):
            raise InvalidArgumentError(
                op.name, "inputs", f"takes at most {len(op.inputs)} ({', '.join(op.input_names)})"
            )
        given = dict(zip(op.input_names, inputs, strict=False))
    unknown = sorted(set(given) - set(op.input_names))
    if unknown:
        raise InvalidArgumentError(
            op.name, unknown[0], f"is not an input of {op.name} ({', '.join(op.input_names)})"
        )
    return {n: SSAValue.get(v) for n, v in given.items() if v is not None}


def _property_def(attribute: spec.AttributeSpec) -> Any:
    kind = _property_kind(attribute)
    if kind == "reduction":
        return prop_def(
            ReductionAttr, default_value=ReductionAttr(spec.Reduction(attribute.default))
        )
    if kind == "bool":
        return prop_def(BoolAttr, default_value=BoolAttr.from_bool(bool(attribute.default)))
    if kind == "i64":
        return prop_def(
            IntegerAttr[IntegerType], default_value=IntegerAttr(int(attribute.default), i64)
        )
    return prop_def(FloatAttr[Float64Type], default_value=FloatAttr(float(attribute.default), f64))


def class_name(op: spec.OperatorSpec) -> str:
    """The op class's Python name: `KlDivBackwardOp`."""
    return f"{op.name}Op"


def op_class(op: spec.OperatorSpec) -> type[LossGradOp]:
    """The level-1 op of an operator, made from its spec entry: an optional operand per
    optional input (sized by `operandSegmentSizes`), a property per attribute with spec's
    default, the verifier spec.validate, the custom form of LossGradOp."""
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": class_name(op),
        "__doc__": f"{op.doc} The level-1 op of {op.name}.",
        "name": f"lossgrad.{op.mnemonic}",
        "SPEC": op,
        "PROPERTY_NAMES": tuple(a.name for a in op.attributes),
        "__annotations__": {
            "SPEC": ClassVar[spec.OperatorSpec],
            "PROPERTY_NAMES": ClassVar[tuple[str, ...]],
        },
    }
    for spec_input in op.inputs:  # all of them, in order: xDSL lists a subclass's first
        field = _operand_field(spec_input.name)
        namespace[field] = (
            opt_operand_def(TensorType) if spec_input.optional else operand_def(TensorType)
        )
    if op.optional_inputs:
        namespace["irdl_options"] = (AttrSizedOperandSegments(as_property=True),)
    for attribute in op.attributes:
        # `reduction` is LossGradOp's (every operator has it, default "mean"): the
        # operator's own properties come first, as in the generic form's property order.
        if attribute.name != "reduction":
            namespace[attribute.name] = _property_def(attribute)
    return irdl_op_definition(type(class_name(op), (LossGradOp,), namespace))


OP_CLASSES: dict[str, type[LossGradOp]] = {op.name: op_class(op) for op in spec.OPERATORS.values()}
"""The op class of each ONNX op_type."""

KlDivBackwardOp = OP_CLASSES[spec.KL_DIV_BACKWARD.name]
KlDivTargetBackwardOp = OP_CLASSES[spec.KL_DIV_TARGET_BACKWARD.name]
SmoothL1LossBackwardOp = OP_CLASSES[spec.SMOOTH_L1_LOSS_BACKWARD.name]


def make_op(
    op_type: str,
    inputs: Mapping[str, SSAValue | None] | Sequence[SSAValue | None],
    attrs: Mapping[str, Any],
) -> LossGradOp:
    """The op for an ONNX node: `inputs` by name or in the operator's order (an absent
    optional input None or left out), `attrs` as spec.check_attributes returns them; the
    result type is derived by spec. Raises the spec's LossGradError for a call it rejects."""
    op_class_ = OP_CLASSES[spec.operator(op_type).name]  # spec names the known ops if unknown
    return op_class_(inputs, attrs)


Lossgrad = Dialect("lossgrad", list(OP_CLASSES.values()), [ReductionAttr])
