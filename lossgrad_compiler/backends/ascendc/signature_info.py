"""What a project needs to know about a level-2 function besides its IR: the operator, its
attribute values, and the C++ names derived from them.

The frontend names each function by its signature id (frontend/signature.py). The op and
the attributes are read back from that id and checked by rebuilding the id from the
function's own argument types; a function may instead carry them explicitly as
`lossgrad.op_type` (string) and `lossgrad.attributes` (dictionary) attributes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, FloatAttr, IntegerAttr, StringAttr, TensorType

from lossgrad_compiler import spec
from lossgrad_compiler.dialects.lossgrad import element_float_type
from lossgrad_compiler.errors import InvalidArgumentError
from lossgrad_compiler.frontend.signature import Signature

_SYMBOL = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class SignatureInfo:
    """The operator and attributes of one compiled signature, and its C++ names."""

    function: str  # the level-2 function's name (the signature id): print only `project`
    op: spec.OperatorSpec
    attrs: dict[str, Any]  # every attribute, spec order, checked values
    types: tuple[spec.FloatType, spec.FloatType, spec.FloatType]

    @property
    def project(self) -> str:
        """The project directory name: the id, sanitised."""
        return sanitize(self.function)

    @property
    def op_type(self) -> str:
        """A unique OpType for this signature: the operator's name and a digest of the id."""
        digest = hashlib.sha1(self.function.encode()).hexdigest()[:10]
        return f"{self.op.name}Sig{digest}"

    @property
    def kernel_name(self) -> str:
        """The kernel entry and file name msOpGen derives from the OpType."""
        return msopgen_snake(self.op_type)

    @property
    def tiling_struct(self) -> str:
        return f"{self.op_type}TilingData"


def sanitize(name: str) -> str:
    """A C identifier made only of [A-Za-z0-9_] (model text never reaches C++ otherwise)."""
    cleaned = _SYMBOL.sub("_", name)[:200] or "signature"
    return cleaned if not cleaned[0].isdigit() else f"s_{cleaned}"


def msopgen_snake(op_type: str) -> str:
    """msOpGen's OpType → file name rule (ascend-c.md §4.4): `_` before a capital that
    follows a lower-case letter or digit, and before the last capital of an acronym that a
    lower-case letter follows; then lower case."""
    out: list[str] = []
    for i, c in enumerate(op_type):
        prev = op_type[i - 1] if i else ""
        nxt = op_type[i + 1] if i + 1 < len(op_type) else ""
        if (
            c.isupper()
            and i
            and (prev.islower() or prev.isdigit() or (prev.isupper() and nxt.islower()))
        ):
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def signature_info(function: func.FuncOp) -> SignatureInfo:
    """The SignatureInfo of a level-2 function (InvalidArgumentError if it names none)."""
    name = function.sym_name.data
    types = _argument_types(function)
    explicit = function.attributes.get("lossgrad.op_type")
    if isinstance(explicit, StringAttr):
        op = spec.operator(explicit.data)
        raw = function.attributes.get("lossgrad.attributes")
        attrs = _attribute_values(raw) if isinstance(raw, DictionaryAttr) else {}
        return SignatureInfo(name, op, spec.check_attributes(op, attrs), types)
    return _from_id(function, name, types)


def _argument_types(function: func.FuncOp) -> tuple[spec.FloatType, spec.FloatType, spec.FloatType]:
    found = []
    for t in function.function_type.inputs.data:
        element = element_float_type(t.element_type) if isinstance(t, TensorType) else None
        if element is None:
            raise InvalidArgumentError(function.sym_name.data, "arguments", "must be float tensors")
        found.append(element)
    if len(found) != len(spec.INPUT_NAMES):
        raise InvalidArgumentError(function.sym_name.data, "arguments", "must be the 3 inputs")
    return found[0], found[1], found[2]


def _attribute_values(attrs: DictionaryAttr) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in attrs.data.items():
        if isinstance(value, StringAttr):
            out[key] = value.data
        elif isinstance(value, IntegerAttr):
            out[key] = int(value.value.data)
        elif isinstance(value, FloatAttr):
            out[key] = float(value.value.data)
    return out


def _from_id(
    function: func.FuncOp, name: str, types: tuple[spec.FloatType, spec.FloatType, spec.FloatType]
) -> SignatureInfo:
    parts = name.split("__")
    by_mnemonic = {op.mnemonic: op for op in spec.OPERATORS.values()}
    op = by_mnemonic.get(parts[0])
    if op is None or len(parts) != 4:
        raise InvalidArgumentError(
            name,
            "function name",
            "must be a signature id (<op>__<types>__<shapes>__<attributes>) or the function "
            "must carry lossgrad.op_type and lossgrad.attributes",
        )
    attrs = spec.check_attributes(op, _parse_attributes(op, parts[3], name))
    shapes = [
        t.get_shape() for t in function.function_type.inputs.data if isinstance(t, TensorType)
    ]
    patterns = tuple(tuple(1 if d == 1 else None for d in s) for s in shapes)
    rebuilt = Signature(
        op.name, types, (patterns[0], patterns[1], patterns[2]), tuple(attrs.items())
    ).id
    if rebuilt != name:
        raise InvalidArgumentError(
            name, "function name", f"does not match its argument types (expected {rebuilt})"
        )
    return SignatureInfo(name, op, attrs, types)


def _parse_attributes(op: spec.OperatorSpec, text: str, name: str) -> dict[str, Any]:
    """Invert the id's attribute segment, e.g. `mean_beta0p5` or `sum_log_target1`."""
    out: dict[str, Any] = {}
    rest = text
    for attribute in op.attributes:
        if attribute.name == "reduction":
            value, _, rest = rest.partition("_")
            out["reduction"] = value
            continue
        if not rest.startswith(attribute.name):
            raise InvalidArgumentError(name, "function name", f"has no {attribute.name} value")
        token, _, rest = rest[len(attribute.name) :].partition("_")
        if attribute.kind is spec.AttrKind.FLOAT:
            out[attribute.name] = float(token.replace("p", ".").replace("m", "-"))
        else:
            out[attribute.name] = int(token)
    return out
