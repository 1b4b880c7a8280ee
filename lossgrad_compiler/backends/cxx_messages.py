"""Error messages of the generated C++ (the ORT kernels and the aclnn wrappers), derived from
spec.py rather than written again.

Each message is obtained by making spec (or the ONNX attribute reader) reject a call built
from sentinel values, then cutting the text at the sentinels: what remains is literal text
that spec wrote, and each sentinel becomes a slot the C++ fills at run time with the same
rendering Python uses (repr of an int, a float, a str, a shape list). If spec changes a
sentence, the kernels follow on the next build; if a sentinel cannot be found exactly once,
generation fails loudly instead of printing a wrong message."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onnx import AttributeProto

from lossgrad_compiler import spec
from lossgrad_compiler.backends.cxx import cxx_identifier, cxx_string_literal
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.onnx.attributes import attribute_values


class MessageGenerationError(RuntimeError):
    """spec's text changed so that a message can no longer be cut at its sentinels: a defect
    of the generator, not an invalid call."""


# How a slot is rendered in C++ from an argument of the given C++ type.
_RENDER = {
    "int": ("int64_t", "std::to_string({})"),
    "shape": ("lossgrad_shapes::Extents", "lossgrad_shapes::shape_repr({})"),
    "str": ("const std::string&", "str_repr({})"),
    "float": ("double", "lossgrad_shapes::float_repr({})"),
    "text": ("const char*", "std::string({})"),
}


@dataclass(frozen=True)
class Slot:
    name: str
    kind: str  # a key of _RENDER


@dataclass(frozen=True)
class Sentinel:
    rendering: str  # how Python printed the sentinel value in the message
    slot: Slot
    number: bool = False  # match only as a whole number (not inside a longer one)


@dataclass(frozen=True)
class Message:
    """One message: literal text and slots, in order, and the aclnn code of its error."""

    name: str
    parts: tuple[str | Slot, ...]
    code: int

    @property
    def slots(self) -> list[Slot]:
        return [p for p in self.parts if isinstance(p, Slot)]

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


def message_from(name: str, error: LossGradError, sentinels: Sequence[Sentinel]) -> Message:
    """Cut `str(error)` at each sentinel (in the given order: longer renderings first)."""
    parts: list[str | Slot] = [str(error)]
    for sentinel in sentinels:
        pattern = re.escape(sentinel.rendering)
        if sentinel.number:
            pattern = r"(?<![\d.\-])" + pattern + r"(?![\d.])"
        found: list[str | Slot] = []
        count = 0
        for part in parts:
            if isinstance(part, Slot):
                found.append(part)
                continue
            pieces = re.split(pattern, part)
            count += len(pieces) - 1
            for i, piece in enumerate(pieces):
                if i:
                    found.append(sentinel.slot)
                found.append(piece)
        if count != 1:
            raise MessageGenerationError(
                f"message '{name}': sentinel {sentinel.rendering!r} found {count} times in "
                f"{str(error)!r}"
            )
        parts = found
    return Message(name, tuple(p for p in parts if p != ""), error.code)


def _raised(call: Callable[[], object]) -> LossGradError:
    try:
        call()
    except LossGradError as error:
        return error
    raise MessageGenerationError("spec accepted a call built to be rejected")


def _info(shape: tuple[int, ...]) -> spec.TensorInfo:
    return spec.TensorInfo(spec.FLOAT32, shape)


def _validate(op: spec.OperatorSpec, shapes: dict[str, tuple]) -> Callable[[], object]:
    return lambda: spec.validate(op.name, {n: _info(s) for n, s in shapes.items()}, {})


# Sentinel sizes: distinct numbers that occur nowhere else in a message.
_A, _B, _C = 7001, 7002, 7003
_TOO_MANY = spec.MAX_RANK + 29


def message_key(kind: str, op: spec.OperatorSpec, name: str) -> str:
    """The key of a per-input message: grad_output's keep their historical names
    (`grad_output`, `enlarge_rank`, `enlarge_axis`), another input's add its name."""
    if name == "grad_output":
        return "grad_output" if kind == "broadcast" else kind
    return f"{kind}_{name}"


def shape_messages(op: spec.OperatorSpec) -> dict[str, Message]:
    """Messages of the run-time checks of one op, keyed by check."""
    prefix = cxx_identifier(op.name)
    out: dict[str, Message] = {}
    names = op.input_names
    for i, name in enumerate(names):
        if not op.inputs[i].optional:
            infos = {n: None if n == name else _info(()) for n in names}
            error = _raised(lambda infos=infos: spec.validate(op.name, infos, {}))
            out[f"missing_{i}"] = message_from(f"{prefix}_missing_{i}", error, [])
        shapes = {n: (1,) * _TOO_MANY if n == name else () for n in names}
        error = _raised(_validate(op, shapes))
        rank = Sentinel(str(_TOO_MANY), Slot("rank", "int"), number=True)
        out[f"rank_{i}"] = message_from(f"{prefix}_rank_{i}", error, [rank])
    base = op.base_inputs
    if len(base) == 2:  # self and target do not broadcast.
        x, t = (_A, 5), (_B, 5)
        error = _raised(_validate(op, {n: {base[0]: x, base[1]: t}.get(n, ()) for n in names}))
        out["self_target"] = message_from(
            f"{prefix}_self_target",
            error,
            _broadcast_sentinels(x, t),
        )
    for spec_input in op.inputs:
        if spec_input.broadcast is spec.Broadcast.BASE:
            continue
        name = spec_input.name
        # The input does not broadcast with B (every other input is B).
        go, b = (_A, 5), (_B, 5)
        error = _raised(_validate(op, {n: go if n == name else b for n in names}))
        key = message_key("broadcast", op, name)
        out[key] = message_from(f"{prefix}_{key}", error, _broadcast_sentinels(go, b))
        if spec_input.broadcast is not spec.Broadcast.FITS:
            continue
        b_name = op.broadcast_name
        go, b = (1,) * (_TOO_MANY + 1), (5,) * _TOO_MANY
        error = _raised(
            lambda go=go, b=b, name=name, b_name=b_name: spec.check_no_enlarge(
                op, go, b, name, b_name
            )
        )
        key = message_key("enlarge_rank", op, name)
        out[key] = message_from(
            f"{prefix}_{key}",
            error,
            [
                Sentinel(str(list(go)), Slot("first_shape", "shape")),
                Sentinel(str(list(b)), Slot("second_shape", "shape")),
                Sentinel(str(len(go)), Slot("first_rank", "int"), number=True),
                Sentinel(str(len(b)), Slot("second_rank", "int"), number=True),
            ],
        )
        go, b = (_C, 5), (1, 5)
        error = _raised(
            lambda go=go, b=b, name=name, b_name=b_name: spec.check_no_enlarge(
                op, go, b, name, b_name
            )
        )
        key = message_key("enlarge_axis", op, name)
        out[key] = message_from(
            f"{prefix}_{key}",
            error,
            [
                Sentinel(str(list(go)), Slot("first_shape", "shape")),
                Sentinel(str(list(b)), Slot("second_shape", "shape")),
                Sentinel("-2", Slot("axis", "int"), number=True),
                Sentinel(str(_C), Slot("first", "int"), number=True),
                Sentinel("1", Slot("second", "int"), number=True),
            ],
        )
    return out


def _broadcast_sentinels(first: tuple[int, ...], second: tuple[int, ...]) -> list[Sentinel]:
    return [
        Sentinel(str(list(first)), Slot("first_shape", "shape")),
        Sentinel(str(list(second)), Slot("second_shape", "shape")),
        Sentinel("-2", Slot("axis", "int"), number=True),
        Sentinel(str(first[0]), Slot("first", "int"), number=True),
        Sentinel(str(second[0]), Slot("second", "int"), number=True),
    ]


_STRING_SENTINEL = "lossgrad_sentinel_value"
_INT_SENTINEL = 7004
_FLOAT_SENTINEL = -7005.25
_TYPE_SENTINEL = AttributeProto.GRAPHS  # an ONNX type name no message contains otherwise


def attribute_messages(op: spec.OperatorSpec, attribute: spec.AttributeSpec) -> dict[str, Message]:
    """`type`: the attribute has another ONNX type; `value`: its value is outside the rule."""
    prefix = f"{cxx_identifier(op.name)}_{cxx_identifier(attribute.name)}"
    wrong = AttributeProto(name=attribute.name, type=_TYPE_SENTINEL)
    error = _raised(lambda: attribute_values(op.name, [wrong]))
    type_name = AttributeProto.AttributeType.Name(_TYPE_SENTINEL)
    out = {
        "type": message_from(
            f"{prefix}_type", error, [Sentinel(type_name, Slot("type_name", "text"))]
        )
    }
    if attribute.kind is spec.AttrKind.STRING:
        value: object = _STRING_SENTINEL
        sentinel = Sentinel(repr(_STRING_SENTINEL), Slot("value", "str"))
    elif attribute.kind is spec.AttrKind.INT:
        value = _INT_SENTINEL
        sentinel = Sentinel(str(_INT_SENTINEL), Slot("value", "int"), number=True)
    else:
        value = _FLOAT_SENTINEL
        sentinel = Sentinel(repr(_FLOAT_SENTINEL), Slot("value", "float"), number=True)
    error = _raised(lambda: attribute.check(op.name, value))
    out["value"] = message_from(f"{prefix}_value", error, [sentinel])
    return out


def unknown_attribute_message(op: spec.OperatorSpec) -> Message:
    """An attribute `op` does not have (spec names it as written, not as a repr)."""
    name = "lossgrad_sentinel_attribute"
    error = _raised(lambda: spec.check_attributes(op, {name: 1}))
    return message_from(
        f"{cxx_identifier(op.name)}_unknown_attribute",
        error,
        [Sentinel(name, Slot("name", "text"))],
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
