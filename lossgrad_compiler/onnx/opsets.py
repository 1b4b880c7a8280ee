"""The ai.lossgrad opset import of a model: version 1 is the only one that exists.

onnx resolves a node against the newest schema at or below the imported version, so an
import of version 2 finds version 1's schemas and its checker accepts the model; version 0
finds none and the checker skips the nodes of a custom domain. Neither means anything: this
check rejects every import of another version, and ai.lossgrad nodes with no import in their
scope, with aclnn 161002."""

from __future__ import annotations

from collections.abc import Iterable

from onnx import ModelProto, NodeProto, OperatorSetIdProto

from lossgrad_compiler import spec
from lossgrad_compiler.errors import InvalidArgumentError
from lossgrad_compiler.onnx.graphs import deep_nodes


def check_opset_imports(model: ModelProto) -> None:
    """Raise InvalidArgumentError (161002) unless every ai.lossgrad import of the model and
    of its functions is version spec.OPSET_VERSION, and every scope holding ai.lossgrad
    nodes imports it (a function body inherits the model's import)."""
    model_version = _imported(model.opset_import, "model")
    if model_version is None and _uses_domain(deep_nodes(model.graph.node)):
        _missing("the model imports no ai.lossgrad opset, but its graph has ai.lossgrad nodes")
    for function in model.functions:
        where = f"function '{function.domain}.{function.name}'"
        version = _imported(function.opset_import, where)
        if version is None and model_version is None and _uses_domain(deep_nodes(function.node)):
            _missing(f"{where} has ai.lossgrad nodes, but neither it nor the model imports them")


def _imported(imports: Iterable[OperatorSetIdProto], where: str) -> int | None:
    versions = [o.version for o in imports if o.domain == spec.DOMAIN]
    for version in versions:
        if version != spec.OPSET_VERSION:
            raise InvalidArgumentError(
                "model",
                "opset_import",
                f"{where} imports {spec.DOMAIN} version {version}; only version "
                f"{spec.OPSET_VERSION} exists",
            )
    return versions[0] if versions else None


def _missing(problem: str) -> None:
    raise InvalidArgumentError(
        "model", "opset_import", f"{problem} (add {spec.DOMAIN} version {spec.OPSET_VERSION})"
    )


def _uses_domain(nodes: Iterable[NodeProto]) -> bool:
    return any(node.domain == spec.DOMAIN for node in nodes)
