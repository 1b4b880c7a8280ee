"""Every rule a call can break, as data: the wording of its argument and of the rule, with
named slots, and the error (and so the aclnn code) it raises.

spec.py and onnx/attributes.py raise from these rules; backends/cxx_messages.py prints the
same rules as C++ functions that fill the slots at run time, rendered as here (an int as
digits, a float and a string as Python's repr, a shape as a list). A sentence is written
once, here, and both languages read it; nothing recovers a message from another's text."""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lossgrad_compiler import errors
from lossgrad_compiler.errors import LossGradError


class Kind(StrEnum):
    """How a slot's value is written (Python's way, which the C++ renderers follow)."""

    INT = "int"  # digits: 7
    FLOAT = "float"  # repr: 0.5, inf, nan
    STR = "str"  # repr: 'mean'
    SHAPE = "shape"  # a list: [4, 3]
    TEXT = "text"  # as it is: a name, a list of names
    REPR = "repr"  # repr of whatever the value is (an attribute's int, float or str)


def render(kind: Kind, value: Any) -> str:
    """A slot's text."""
    if kind is Kind.INT:
        return str(int(value))
    if kind is Kind.FLOAT:
        return repr(float(value))
    if kind is Kind.STR:
        return repr(str(value))
    if kind is Kind.SHAPE:
        return str(list(value))
    if kind is Kind.REPR:
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class Slot:
    """A part of a message filled in when it is raised."""

    name: str
    kind: Kind


Part = str | Slot


def _fields(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]


def parts_of(template: str, slots: Mapping[str, Kind], fixed: Mapping[str, Any]) -> list[Part]:
    """`template` as literal text and slots, with the `fixed` slots rendered into the text."""
    out: list[Part] = []
    for literal, field, spec_, conversion in string.Formatter().parse(template):
        if spec_ or conversion:
            raise ValueError(f"a message template has no format specs: {template!r}")
        if literal:
            out.append(literal)
        if field is None:
            continue
        if field in fixed:
            out.append(render(slots[field], fixed[field]))
        else:
            out.append(Slot(field, slots[field]))
    return _joined(out)


def _joined(parts: Sequence[Part]) -> list[Part]:
    """Adjacent literal texts as one."""
    out: list[Part] = []
    for part in parts:
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        elif part != "":
            out.append(part)
    return out


@dataclass(frozen=True)
class Rule:
    """One rule: `argument` and `text` are templates whose `{slot}`s `slots` types."""

    key: str
    argument: str
    text: str
    error: type[LossGradError]
    slots: Mapping[str, Kind]

    def __post_init__(self) -> None:
        used = set(_fields(self.argument)) | set(_fields(self.text))
        if used != set(self.slots):
            raise ValueError(f"rule {self.key}: slots {sorted(self.slots)}, used {sorted(used)}")
        if "op" in used:
            raise ValueError(f"rule {self.key}: 'op' is the message line's own slot")

    @property
    def code(self) -> int:
        return self.error.code

    def _filled(self, template: str, values: Mapping[str, Any]) -> str:
        missing = set(_fields(template)) - set(values)
        if missing:
            raise KeyError(f"rule {self.key}: no value for {sorted(missing)}")
        return "".join(
            p if isinstance(p, str) else "" for p in parts_of(template, self.slots, values)
        )

    def __call__(self, op: str, **values: Any) -> LossGradError:
        """The error of this rule broken by a call of `op` (raise it)."""
        return self.error(op, self._filled(self.argument, values), self._filled(self.text, values))

    def line(self, fixed: Mapping[str, Any]) -> list[Part]:
        """The whole message line (errors.LINE) as text and slots: `fixed` holds the values
        known when the message is generated (`op` among them, or it is a slot too)."""
        slots = {**self.slots, "op": Kind.TEXT}
        out: list[Part] = []
        line_values = {"code": self.code, "code_name": errors.ACLNN_CODE_NAMES[self.code]}
        for literal, field, _, _ in string.Formatter().parse(errors.LINE):
            out.append(literal)
            if field == "argument":
                out += parts_of(self.argument, slots, fixed)
            elif field == "rule":
                out += parts_of(self.text, slots, fixed)
            elif field == "op":
                out += parts_of("{op}", slots, fixed)
            elif field is not None:
                out.append(str(line_values[field]))
        return _joined(out)


def _rule(
    key: str, argument: str, text: str, error: type[LossGradError], **slots: Kind
) -> Rule:
    return Rule(key, argument, text, error, slots)


T, N, S = Kind.TEXT, Kind.INT, Kind.SHAPE  # the usual slot kinds, short

UNKNOWN_OPERATOR = _rule(
    "unknown_operator", "op_type", "must be one of {operators}", errors.InvalidArgumentError,
    operators=T,
)  # fmt: skip
MISSING_INPUT = _rule("missing_input", "{input}", "is required", errors.MissingInputError, input=T)
UNKNOWN_INPUT = _rule(
    "unknown_input", "{input}", "is not an input of {operator} ({inputs})",
    errors.InvalidArgumentError, input=T, operator=T, inputs=T,
)  # fmt: skip
ELEMENT_TYPE = _rule(
    "element_type", "{input}", "element type must be one of {allowed}, got {type_name}",
    errors.ElementTypeError, input=T, allowed=T, type_name=T,
)  # fmt: skip
RANK = _rule(
    "rank", "{input}", "rank must be at most {max_rank}, got {rank}", errors.RankError,
    input=T, max_rank=N, rank=N,
)  # fmt: skip
NO_BROADCAST = _rule(
    "no_broadcast",
    "{first_name} and {second_name}",
    "shapes {first_name} {first_shape}, {second_name} {second_shape} do not broadcast "
    "(axis {axis}: {first} vs {second})",
    errors.BroadcastError,
    first_name=T, second_name=T, first_shape=S, second_shape=S, axis=N, first=N, second=N,
)  # fmt: skip
_ENLARGES = "shape {shape} must broadcast to {b_name} {b_shape} without enlarging it"
ENLARGES_RANK = _rule(
    "enlarges_rank", "{input}", _ENLARGES + " (rank {rank} > {b_rank})", errors.BroadcastError,
    input=T, shape=S, b_name=T, b_shape=S, rank=N, b_rank=N,
)  # fmt: skip
ENLARGES_AXIS = _rule(
    "enlarges_axis", "{input}", _ENLARGES + " (axis {axis}: {size} vs {b_size})",
    errors.BroadcastError,
    input=T, shape=S, b_name=T, b_shape=S, axis=N, size=N, b_size=N,
)  # fmt: skip
_ATTRIBUTE = "attribute '{attribute}'"
UNKNOWN_ATTRIBUTE = _rule(
    "unknown_attribute", _ATTRIBUTE, "is not an attribute of {operator} ({known})",
    errors.AttributeValueError, attribute=T, operator=T, known=T,
)  # fmt: skip
ATTRIBUTE_REPEATED = _rule(
    "attribute_repeated", _ATTRIBUTE, "is given more than once", errors.AttributeValueError,
    attribute=T,
)  # fmt: skip
ATTRIBUTE_ONNX_TYPE = _rule(
    "attribute_onnx_type", _ATTRIBUTE,
    "must be an ONNX {kind} attribute ({valid}), got {type_name}", errors.AttributeValueError,
    attribute=T, kind=T, valid=T, type_name=T,
)  # fmt: skip
ATTRIBUTE_LINK = _rule(
    "attribute_link", _ATTRIBUTE, "refers to the function attribute '{link}', which is not given",
    errors.AttributeValueError, attribute=T, link=T,
)  # fmt: skip
ATTRIBUTE_PYTHON_TYPE = _rule(
    "attribute_python_type", _ATTRIBUTE, "must be {expected}, got {type_name}",
    errors.AttributeValueError, attribute=T, expected=T, type_name=T,
)  # fmt: skip
ATTRIBUTE_VALUE = _rule(
    "attribute_value", _ATTRIBUTE, "must be {valid}, got {value}", errors.AttributeValueError,
    attribute=T, valid=T, value=Kind.REPR,
)  # fmt: skip

DYNAMIC_SIZES = _rule(
    "dynamic_sizes", "{inputs}",
    "{first} and {second} are both on loop d{loop} and must be equal at run time (a dynamic "
    "dimension is never broadcast; declare a broadcast dimension as a static 1)",
    errors.BroadcastError, inputs=T, first=T, second=T, loop=N,
)  # fmt: skip
"""A compiled kernel's check of its dynamic sizes (docs/level2.md), not spec's: the sizes
a signature leaves dynamic must agree at run time."""

CLASS_SHAPE = _rule(
    "class_shape", "{input}", "shape {shape} must be {expected} for self {self_shape}",
    errors.ClassShapeError, input=T, shape=S, expected=T, self_shape=S,
)  # fmt: skip
"""The classes shape rule (docs/operators.md): target is self without its class dimension,
weight [C], one-element inputs one element."""
SAME_TYPE = _rule(
    "same_type", "{input}", "element type must be self's ({expected}), got {type_name}",
    errors.ElementTypeError, input=T, expected=T, type_name=T,
)  # fmt: skip
TARGET_RANGE = _rule(
    "target_range", "target",
    "holds {count} value(s) outside [0, {classes}) that are not ignore_index {ignore_index}",
    errors.TargetValueError, count=N, classes=N, ignore_index=N,
)  # fmt: skip
"""A check of the values, not the types: a kernel that sees them raises it (the level-2
target check, docs/level2.md)."""

RULES: tuple[Rule, ...] = (
    UNKNOWN_OPERATOR,
    MISSING_INPUT,
    UNKNOWN_INPUT,
    ELEMENT_TYPE,
    RANK,
    NO_BROADCAST,
    ENLARGES_RANK,
    ENLARGES_AXIS,
    UNKNOWN_ATTRIBUTE,
    ATTRIBUTE_REPEATED,
    ATTRIBUTE_ONNX_TYPE,
    ATTRIBUTE_LINK,
    ATTRIBUTE_PYTHON_TYPE,
    ATTRIBUTE_VALUE,
    DYNAMIC_SIZES,
    CLASS_SHAPE,
    SAME_TYPE,
    TARGET_RANGE,
)
"""Every rule of the operator contract's validation (docs/operators.md, "Errors")."""
