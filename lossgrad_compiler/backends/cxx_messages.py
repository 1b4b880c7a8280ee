"""Error messages of the generated C++ (the ORT kernels and the aclnn wrappers), printed from
the rules of lossgrad_compiler/messages.py, which spec.py raises from.

A rule's message line is literal text and slots (messages.Rule.line): what generation knows
(the operator, an input's name, the rank limit) is rendered into the text as Python renders
it, and each remaining slot becomes a parameter of a C++ function that renders its value the
way Python does (digits for an int, repr for a float or a string, a list for a shape). If a
rule's wording changes, the kernels follow on the next build."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lossgrad_compiler import messages, spec
from lossgrad_compiler.backends.cxx import cxx_identifier, cxx_string_literal
from lossgrad_compiler.messages import Kind, Part, Rule, Slot

# How a slot is rendered in C++ from an argument of the given C++ type.
_RENDER = {
    Kind.INT: ("int64_t", "std::to_string({})"),
    Kind.SHAPE: ("lossgrad_shapes::Extents", "lossgrad_shapes::shape_repr({})"),
    Kind.STR: ("const std::string&", "str_repr({})"),
    Kind.FLOAT: ("double", "lossgrad_shapes::float_repr({})"),
    Kind.TEXT: ("const std::string&", "{}"),
}


@dataclass(frozen=True)
class Message:
    """One message: literal text and slots, in order, and the aclnn code of its error."""

    name: str
    parts: tuple[Part, ...]
    code: int

    @property
    def slots(self) -> list[Slot]:
        """The function's parameters: each slot once, in the order the text first has it."""
        return list(dict.fromkeys(p for p in self.parts if isinstance(p, Slot)))

    def cxx_function(self) -> str:
        params = ", ".join(f"{_RENDER[s.kind][0]} {s.name}" for s in self.slots)
        pieces = []
        for part in self.parts:
            if isinstance(part, Slot):
                pieces.append(_RENDER[part.kind][1].format(part.name))
            elif part:
                pieces.append(f"std::string({cxx_string_literal(part)})")
        body = " + ".join(pieces) or "std::string()"
        return f"inline std::string {self.name}({params}) {{ return {body}; }}\n"


def message(name: str, rule: Rule, value: Kind | None = None, **fixed: Any) -> Message:
    """`rule`'s line as the C++ function `name`, with the `fixed` slots in its text; a slot
    of Kind.REPR (an attribute's value) is rendered as `value`."""
    parts = []
    for part in rule.line(fixed):
        if isinstance(part, Slot) and part.kind is Kind.REPR:
            if value is None:
                raise ValueError(f"{name}: say how the C++ renders slot '{part.name}'")
            part = Slot(part.name, value)
        parts.append(part)
    return Message(name, tuple(parts), rule.code)


def message_key(kind: str, op: spec.OperatorSpec, name: str) -> str:
    """The key of a per-input message: grad_output's keep their historical names
    (`grad_output`, `enlarge_rank`, `enlarge_axis`), another input's add its name."""
    if name == "grad_output":
        return "grad_output" if kind == "broadcast" else kind
    return f"{kind}_{name}"


def input_messages(
    op: spec.OperatorSpec, prefix: str, i: int, spec_input: spec.InputSpec
) -> dict[str, Message]:
    """The messages every input's run-time check may give: missing (a required input) and
    rank, keyed `missing_<i>` and `rank_<i>`."""
    name = spec_input.name
    out: dict[str, Message] = {}
    if not spec_input.optional:
        out[f"missing_{i}"] = message(
            f"{prefix}_missing_{i}", messages.MISSING_INPUT, op=op.name, input=name
        )
    out[f"rank_{i}"] = message(
        f"{prefix}_rank_{i}", messages.RANK, op=op.name, input=name, max_rank=spec.MAX_RANK
    )
    return out


def shape_messages(op: spec.OperatorSpec) -> dict[str, Message]:
    """Messages of the run-time checks of one op, keyed by check."""
    prefix = cxx_identifier(op.name)
    out: dict[str, Message] = {}
    for i, spec_input in enumerate(op.inputs):
        out.update(input_messages(op, prefix, i, spec_input))
    base = op.base_inputs
    if len(base) == 2:  # self and target do not broadcast.
        out["self_target"] = _no_broadcast(f"{prefix}_self_target", op, base[0], base[1])
    b_name = op.broadcast_name
    for spec_input in op.inputs:
        if spec_input.broadcast is spec.Broadcast.BASE:
            continue
        name = spec_input.name
        key = message_key("broadcast", op, name)
        out[key] = _no_broadcast(f"{prefix}_{key}", op, name, b_name)
        if spec_input.broadcast is not spec.Broadcast.FITS:
            continue
        fixed: Mapping[str, Any] = {"op": op.name, "input": name, "b_name": b_name}
        for kind, rule in (
            ("enlarge_rank", messages.ENLARGES_RANK),
            ("enlarge_axis", messages.ENLARGES_AXIS),
        ):
            key = message_key(kind, op, name)
            out[key] = message(f"{prefix}_{key}", rule, **fixed)
    return out


def _no_broadcast(name: str, op: spec.OperatorSpec, first: str, second: str) -> Message:
    """Two operands whose shapes do not broadcast (their shapes, the axis, the two sizes)."""
    return message(name, messages.NO_BROADCAST, op=op.name, first_name=first, second_name=second)


_VALUE_KIND = {spec.AttrKind.STRING: Kind.STR, spec.AttrKind.INT: Kind.INT}


def attribute_messages(op: spec.OperatorSpec, attribute: spec.AttributeSpec) -> dict[str, Message]:
    """`type`: the attribute has another ONNX type; `value`: its value is outside the rule."""
    prefix = f"{cxx_identifier(op.name)}_{cxx_identifier(attribute.name)}"
    fixed = {"op": op.name, "attribute": attribute.name, "valid": attribute.rule()}
    return {
        "type": message(
            f"{prefix}_type", messages.ATTRIBUTE_ONNX_TYPE, kind=attribute.kind.value, **fixed
        ),
        "value": message(
            f"{prefix}_value",
            messages.ATTRIBUTE_VALUE,
            _VALUE_KIND.get(attribute.kind, Kind.FLOAT),
            **fixed,
        ),
    }


def unknown_attribute_message(op: spec.OperatorSpec) -> Message:
    """An attribute `op` does not have (named as written, not as a repr)."""
    known = ", ".join(a.name for a in op.attributes)
    return message(
        f"{cxx_identifier(op.name)}_unknown_attribute",
        messages.UNKNOWN_ATTRIBUTE,
        op=op.name,
        operator=op.name,
        known=known,
    )


def element_type_message(op: spec.OperatorSpec, spec_input: spec.InputSpec) -> Message:
    """An input of a non-float element type (its ONNX name as the slot)."""
    return message(
        f"{cxx_identifier(op.name)}_{cxx_identifier(spec_input.name)}_type",
        messages.ELEMENT_TYPE,
        op=op.name,
        input=spec_input.name,
        allowed=spec.ALLOWED_TYPES,
    )


def unprintable_ranges() -> list[tuple[int, int]]:
    """The code point ranges for which this Python's str.isprintable() is false (control,
    format, separator, surrogate, private-use and unassigned characters): repr escapes them."""
    ranges: list[tuple[int, int]] = []
    for cp in range(0x110000):
        if chr(cp).isprintable():
            continue
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def print_message_tables() -> str:
    """C++ data the ORT kernels' message renderers (ort/cxx/messages.h) need, taken from this
    Python."""
    rows = [f"{{0x{a:x}, 0x{b:x}}}" for a, b in unprintable_ranges()]
    lines = [", ".join(rows[i : i + 6]) + "," for i in range(0, len(rows), 6)]
    return (
        "namespace lossgrad {\n"
        f"// Code points repr() escapes: str.isprintable() is false (Unicode "
        f"{unicodedata.unidata_version}).\n"
        "constexpr uint32_t kUnprintable[][2] = {\n    "
        + "\n    ".join(lines)
        + "\n};\n}  // namespace lossgrad\n"
    )
