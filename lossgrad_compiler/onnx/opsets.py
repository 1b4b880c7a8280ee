"""The ai.lossgrad opset imports of a model, checked the ONNX way.

The domain's version grows when operators are added (spec.OPSET_VERSION is the current one);
each operator has the version that introduced it (`since_version`), and a scope may use an
operator only if it imports at least that version. onnx resolves a node against the newest
schema at or below the imported version, so an import of a version beyond the current one
finds the current schemas and its checker accepts the model, and an import of version 0 finds
none and the checker skips the nodes of a custom domain. Neither means anything: this check
rejects an import outside 1..OPSET_VERSION, ai.lossgrad nodes with no import in their scope,
and a node whose operator is newer than its scope's import, with aclnn 161002."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from onnx import ModelProto, NodeProto, OperatorSetIdProto

from lossgrad_compiler import spec
from lossgrad_compiler.errors import InvalidArgumentError
from lossgrad_compiler.onnx.graphs import attribute_graphs, deep_nodes
from lossgrad_compiler.onnx.node_errors import located


def check_opset_imports(model: ModelProto) -> None:
    """Raise InvalidArgumentError (161002) unless every ai.lossgrad import of the model and
    of its functions is a version from 1 to spec.OPSET_VERSION, every scope holding
    ai.lossgrad nodes imports the domain (a function body inherits the model's import), and
    every ai.lossgrad node's operator exists at its scope's version."""
    model_version = _imported(model.opset_import, "model")
    if model_version is None and _uses_domain(deep_nodes(model.graph.node)):
        _missing(
            "the model imports no ai.lossgrad opset, but its graph has ai.lossgrad nodes",
            deep_nodes(model.graph.node),
        )
    if model_version is not None:
        _check_operators(_located(model.graph.node, ""), model_version, "the model")
    for function in model.functions:
        where = f"function '{function.domain}.{function.name}'"
        version = _imported(function.opset_import, where)
        if version is None and model_version is None and _uses_domain(deep_nodes(function.node)):
            _missing(
                f"{where} has ai.lossgrad nodes, but neither it nor the model imports them",
                deep_nodes(function.node),
            )
        scope = version if version is not None else model_version
        if scope is not None:
            importer = where if version is not None else "the model"
            path = f"{function.domain}.{function.name}/"
            _check_operators(_located(function.node, path), scope, importer)


def _imported(imports: Iterable[OperatorSetIdProto], where: str) -> int | None:
    versions = [o.version for o in imports if o.domain == spec.DOMAIN]
    for version in versions:
        if not 1 <= version <= spec.OPSET_VERSION:
            raise InvalidArgumentError(
                "model",
                "opset_import",
                f"{where} imports {spec.DOMAIN} version {version}; {_existing()}",
            )
    return versions[0] if versions else None


def _existing() -> str:
    if spec.OPSET_VERSION == 1:
        return "only version 1 exists"
    return f"versions 1 to {spec.OPSET_VERSION} exist"


def _check_operators(nodes: Iterable[tuple[NodeProto, str]], version: int, importer: str) -> None:
    """A node whose operator came after `version` cannot be resolved there."""
    for node, location in nodes:
        op = spec.OPERATORS.get(node.op_type) if node.domain == spec.DOMAIN else None
        if op is None or op.since_version <= version:
            continue
        err = InvalidArgumentError(
            op.name,
            "opset_import",
            f"{op.name} is in {spec.DOMAIN} from version {op.since_version}; {importer} "
            f"imports version {version} (import version {op.since_version} or later)",
        )
        raise located(err, location)


def _located(nodes: Iterable[NodeProto], path: str) -> Iterator[tuple[NodeProto, str]]:
    """Every node with its path: "if1/then_branch/inner" ("#3" if unnamed)."""
    for index, node in enumerate(nodes):
        location = f"{path}{node.name or f'#{index}'}"
        yield node, location
        for attr in node.attribute:
            for graph in attribute_graphs(attr):
                yield from _located(graph.node, f"{location}/{attr.name}/")


def _missing(problem: str, nodes: Iterable[NodeProto]) -> None:
    """No import where nodes need one: the smallest version that has their operators."""
    known = {n.op_type for n in nodes if n.domain == spec.DOMAIN} & set(spec.OPERATORS)
    version = spec.opset_version_for(known)
    raise InvalidArgumentError(
        "model", "opset_import", f"{problem} (add {spec.DOMAIN} version {version})"
    )


def _uses_domain(nodes: Iterable[NodeProto]) -> bool:
    return any(node.domain == spec.DOMAIN for node in nodes)
