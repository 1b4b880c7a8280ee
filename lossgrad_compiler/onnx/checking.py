"""Model checking with aclnn codes: spec's validation of every ai.lossgrad node first, then
onnx's full checker.

onnx's C++ checker rejects some invalid nodes (wrong attribute type, unknown attribute, a
missing or an extra input) before our inference function runs, with its own wording and no
aclnn code. check_model() validates those nodes with spec first, so users get the same
error as from every other layer. Nodes inside model-local function bodies are left to
onnx's checker (their attributes may refer to the caller's)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import onnx
from onnx import GraphProto, ModelProto, NodeProto, TypeProto, helper

from lossgrad_compiler import spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.onnx.attributes import attribute_values
from lossgrad_compiler.onnx.graphs import attribute_graphs
from lossgrad_compiler.onnx.inference import input_name, types_only
from lossgrad_compiler.onnx.node_errors import located
from lossgrad_compiler.onnx.opsets import check_opset_imports
from lossgrad_compiler.onnx.placeholders import fill_unknown
from lossgrad_compiler.onnx.schemas import ensure_schemas
from lossgrad_compiler.onnx.structure import unproduced_function_output
from lossgrad_compiler.onnx.type_protos import tensor_info


def validate_node(
    node: NodeProto, value_types: Mapping[str, TypeProto], location: str | None = None
) -> spec.CheckedCall:
    """spec.validate for one ai.lossgrad node; the error names the node (by `location`, its
    path in the model, when given).

    `value_types` maps value names to their TypeProtos; an input missing from it is validated
    as a placeholder of unknown rank (onnx/placeholders.py: float32, or int64 for a target of
    class indices). Attributes are read strictly (attributes_from_protos)."""
    try:
        op = spec.operator(node.op_type)
        attrs = attribute_values(op.name, node.attribute)
        infos: dict[str, spec.TensorInfo | None] = {}
        unknown: dict[str, spec.Shape | None] = {}
        for i, value in enumerate(node.input):
            name = input_name(op, i)
            infos[name] = tensor_info(value_types.get(value)) if value else None
            if value and infos[name] is None:
                unknown[name] = None
        return spec.validate(op.name, fill_unknown(op, infos, unknown), attrs)
    except LossGradError as err:
        raise located(err, node.name if location is None else location) from None


def check_model(model: ModelProto) -> None:
    """Validate the ai.lossgrad opset import and every ai.lossgrad node with spec, then run
    onnx's checker with full_check (and the one structural rule it misses: every output of
    a model-local function is produced).

    Raises a LossGradError subclass (carrying the aclnn code; naming the node for an invalid
    ai.lossgrad node) for an import of another version than 1 or an invalid node, and onnx's
    ValidationError / InferenceError for anything else."""
    ensure_schemas()
    check_opset_imports(model)
    for node, _, location in _located_nodes(model.graph, {}, ""):
        validate_node(node, {}, location)  # presence of inputs and attributes: needs no types
    with types_only():  # errors are raised below, naming each node's path
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    scope = _value_types(inferred.graph, {})
    for node, types, location in _located_nodes(inferred.graph, scope, ""):
        validate_node(node, types, location)
    try:
        onnx.checker.check_model(model, full_check=True)
    except LossGradError as err:  # from a scope only onnx types: it names the node alone
        raise _with_path(err, model) from None
    unproduced = unproduced_function_output(model)
    if unproduced is not None:
        raise onnx.checker.ValidationError(unproduced)


def lossgrad_nodes(
    graph: GraphProto, types: Mapping[str, TypeProto] | None = None
) -> Iterator[tuple[NodeProto, Mapping[str, TypeProto]]]:
    """Every ai.lossgrad node of `graph` and its subgraphs, with the value types in its scope."""
    for node, scope, _ in _located_nodes(graph, types if types is not None else {}, ""):
        yield node, scope


def _located_nodes(
    graph: GraphProto, scope: Mapping[str, TypeProto], path: str
) -> Iterator[tuple[NodeProto, Mapping[str, TypeProto], str]]:
    """lossgrad_nodes with each node's path: "if1/then_branch/inner" ("#3" if unnamed)."""
    for index, node in enumerate(graph.node):
        location = f"{path}{node.name or f'#{index}'}"
        if node.domain == spec.DOMAIN:
            yield node, scope, location
        for attr in node.attribute:
            for sub in attribute_graphs(attr):
                yield from _located_nodes(sub, _value_types(sub, scope), f"{location}/{attr.name}/")


def _with_path(err: LossGradError, model: ModelProto) -> LossGradError:
    """`err`, raised by onnx for a node it names, located by the node's path when exactly
    one ai.lossgrad node of the model has that name (in a subgraph or a function body)."""
    name = getattr(err, "node", "")
    found = [loc for node, loc in _paths(model.graph.node, "") if node.name == name]
    for function in model.functions:
        where = f"{function.domain}.{function.name}/"
        found += [loc for node, loc in _paths(function.node, where) if node.name == name]
    if not name or len(found) != 1 or found[0] == name:
        return err
    return located(err, found[0])


def _paths(nodes: Sequence[NodeProto], path: str) -> Iterator[tuple[NodeProto, str]]:
    """The ai.lossgrad nodes among `nodes` and their subgraphs, with their paths."""
    for index, node in enumerate(nodes):
        location = f"{path}{node.name or f'#{index}'}"
        if node.domain == spec.DOMAIN:
            yield node, location
        for attr in node.attribute:
            for sub in attribute_graphs(attr):
                yield from _paths(sub.node, f"{location}/{attr.name}/")


def _value_types(graph: GraphProto, outer: Mapping[str, TypeProto]) -> dict[str, TypeProto]:
    """The TypeProto of every value declared in `graph`, over those of enclosing scopes."""
    types = dict(outer)
    for init in graph.initializer:
        types[init.name] = helper.make_tensor_type_proto(init.data_type, list(init.dims))
    for info in [*graph.input, *graph.value_info, *graph.output]:
        if info.type.WhichOneof("value") is not None:
            types[info.name] = info.type
    return types
