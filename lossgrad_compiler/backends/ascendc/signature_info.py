"""What a project needs to know about a level-2 function besides its IR: the operator, its
attribute values, and the C++ names derived from them.

The operator and its attributes are the ones `lower-lossgrad` marks the function with
(`lossgrad.op_type`, `lossgrad.attributes`), read by `level2.read_identity`; the function's
name (the signature id, frontend/signature.py) only names the project and its OpType.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType

from lossgrad_compiler import level2, spec
from lossgrad_compiler.dialects.lossgrad import element_float_type

_SYMBOL = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class SignatureInfo:
    """The operator and attributes of one compiled signature, and its C++ names."""

    function: str  # the level-2 function's name (the signature id): print only `project`
    op: spec.OperatorSpec
    attrs: dict[str, Any]  # every attribute, spec order, checked values
    types: tuple[spec.FloatType | spec.IndexType, ...]  # of the inputs given, operator's order
    inputs: tuple[str, ...] = spec.INPUT_NAMES  # the inputs given (the function's arguments)

    def type_of(self, name: str) -> spec.FloatType | spec.IndexType | None:
        """The element type of an input, None when the signature is compiled without it."""
        return dict(zip(self.inputs, self.types, strict=True)).get(name)

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
    """msOpGen's OpType → file name rule (docs/ascend-c.md, "Project layout"): `_` before
    a capital that follows a lower-case letter or digit, and before the last capital of an
    acronym that a lower-case letter follows; then lower case."""
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
    """The SignatureInfo of a level-2 function (Level2ContractError without its identity)."""
    op, attrs = level2.read_identity(function)
    inputs = level2.read_inputs(function, op)
    types = _argument_types(function, inputs)
    return SignatureInfo(function.sym_name.data, op, attrs, types, inputs)


def _argument_types(
    function: func.FuncOp, inputs: tuple[str, ...]
) -> tuple[spec.FloatType | spec.IndexType, ...]:
    """Each argument's element type: a float, or an integer class index (int64, int32)."""
    found: list[spec.FloatType | spec.IndexType] = []
    for t in function.function_type.inputs.data:
        element = _element_type(t.element_type) if isinstance(t, TensorType) else None
        if element is None:
            raise level2.Level2ContractError(
                function, "the arguments are float or class-index (i64, i32) tensors"
            )
        found.append(element)
    if len(found) != len(inputs):
        raise level2.Level2ContractError(
            function, f"takes the {len(inputs)} inputs {', '.join(inputs)}"
        )
    return tuple(found)


def _element_type(t: object) -> spec.FloatType | spec.IndexType | None:
    floating = element_float_type(t)  # type: ignore[arg-type]
    if floating is not None:
        return floating
    return next((i for i in spec.INDEX_TYPES if i.mlir == str(t)), None)
