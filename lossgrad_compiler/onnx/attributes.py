"""ONNX attributes of the ai.lossgrad nodes, read and written strictly by spec's table.

Reading is strict about the ONNX attribute type (an INT `beta` is an error, not 2.0), because
the C++ checker, ONNX Runtime and the compiler frontend must agree on what a node means.
Writing always spells out every attribute: onnx's ReferenceEvaluator ignores defaults of
function attributes, so an omitted attribute would break evaluation of lowered models."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from onnx import AttributeProto

from lossgrad_compiler import messages, spec


def attributes_from_protos(
    op_type: str,
    protos: Iterable[AttributeProto],
    linked: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every attribute of `op_type` as python values, defaults filled in, checked by spec.

    An attribute whose AttributeProto type differs from spec's AttrKind, a duplicate, an
    unknown name or a value out of range raises AttributeValueError (aclnn 161002). An
    attribute that refers to a function attribute (ref_attr_name) takes its value from
    `linked`, the calling node's attributes."""
    op = spec.operator(op_type)
    return spec.check_attributes(op, attribute_values(op_type, protos, linked))


def attributes_from_node(node: Any, linked: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """attributes_from_protos for a NodeProto."""
    return attributes_from_protos(node.op_type, node.attribute, linked)


def attribute_values(
    op_type: str,
    protos: Iterable[AttributeProto],
    linked: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The raw value of each attribute after the strict ONNX type check, before spec's range
    check; unknown names are kept (with the proto as value) so spec reports them."""
    op = spec.operator(op_type)
    known = {a.name: a for a in op.attributes}
    values: dict[str, Any] = {}
    for proto in protos:
        if proto.name in values:
            raise messages.ATTRIBUTE_REPEATED(op.name, attribute=proto.name)
        expected = known.get(proto.name)
        if expected is None:
            values[proto.name] = proto
            continue
        if proto.type != expected.kind.onnx_code:
            raise messages.ATTRIBUTE_ONNX_TYPE(
                op.name,
                attribute=proto.name,
                kind=expected.kind.value,
                valid=expected.rule(),
                type_name=AttributeProto.AttributeType.Name(proto.type),
            )
        if proto.ref_attr_name:
            values[proto.name] = _linked_value(op.name, proto, linked)
        else:
            values[proto.name] = _value(proto)
    return values


def _linked_value(op: str, proto: AttributeProto, linked: Mapping[str, Any] | None) -> Any:
    if linked is None or proto.ref_attr_name not in linked:
        raise messages.ATTRIBUTE_LINK(op, attribute=proto.name, link=proto.ref_attr_name)
    value = linked[proto.ref_attr_name]
    return _value(value) if isinstance(value, AttributeProto) else value


def _value(proto: AttributeProto) -> Any:
    """The python value of a STRING, INT or FLOAT attribute (a FLOAT widens exactly)."""
    if proto.type == AttributeProto.STRING:
        return proto.s
    if proto.type == AttributeProto.INT:
        return int(proto.i)
    if proto.type == AttributeProto.FLOAT:
        return float(proto.f)
    return proto


def attribute_protos(op_type: str, attrs: Mapping[str, Any]) -> list[AttributeProto]:
    """Every attribute of `op_type`, in spec's order, written explicitly with its ONNX type;
    the values are checked by spec and missing ones take spec's default."""
    op = spec.operator(op_type)
    checked = spec.check_attributes(op, attrs)
    return [attribute_proto(a, checked[a.name]) for a in op.attributes]


def attribute_proto(attribute: spec.AttributeSpec, value: Any) -> AttributeProto:
    """One attribute as an AttributeProto of spec's ONNX type (a FLOAT is stored as float32)."""
    proto = AttributeProto(name=attribute.name, type=attribute.kind.onnx_code)
    if attribute.kind is spec.AttrKind.STRING:
        proto.s = str(value).encode("utf-8")
    elif attribute.kind is spec.AttrKind.INT:
        proto.i = int(value)
    else:
        proto.f = float(value)
    return proto
