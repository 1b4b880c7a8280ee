"""Opset imports of compiled models: which ai.onnx version the nodes are written for, and
adding or dropping an import without disturbing the others."""

from __future__ import annotations

from typing import Any

from onnx import ModelProto, helper

from lossgrad_compiler.errors import InvalidArgumentError

FUNCTIONS_IR_VERSION = 10  # the first IR version with FunctionProto.overload
DEFAULT_ONNX_OPSET = 21
MIN_ONNX_OPSET = 13  # ReduceSum and Squeeze take their axes as inputs from 13 on


def onnx_opset(model: ModelProto) -> int:
    """The model's ai.onnx opset version (21 when it imports none); at least 13."""
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            if opset.version < MIN_ONNX_OPSET:
                raise InvalidArgumentError(
                    "model",
                    "opset_import",
                    f"ai.onnx opset {opset.version} is too old to compile to; "
                    f"convert the model to opset {MIN_ONNX_OPSET} or later",
                )
            return opset.version
    return DEFAULT_ONNX_OPSET


def ensure_import(imports: Any, domain: str, version: int) -> None:
    """Add `domain` at `version` to a repeated OperatorSetIdProto field unless it is there
    ("" and "ai.onnx" are the same domain)."""
    if not any(_same_domain(o.domain, domain) for o in imports):
        imports.append(helper.make_opsetid(domain, version))


def drop_import(imports: Any, domain: str) -> None:
    """Remove `domain` from a repeated OperatorSetIdProto field."""
    for i in reversed(range(len(imports))):
        if imports[i].domain == domain:
            del imports[i]


def _same_domain(a: str, b: str) -> bool:
    return a == b or {a, b} <= {"", "ai.onnx"}
