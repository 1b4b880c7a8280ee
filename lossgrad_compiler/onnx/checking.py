"""Model checking with aclnn codes: spec's validation of every ai.lossgrad node first, then
onnx's full checker.

onnx's C++ checker rejects some invalid nodes (wrong attribute type, unknown attribute, a
missing or an extra input) before our inference function runs, with its own wording and no
aclnn code. check_model() validates those nodes with spec first, so users get the same
error as from every other layer. Nodes inside model-local function bodies are left to
onnx's checker (their attributes may refer to the caller's)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import onnx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TypeProto, helper

from lossgrad_compiler import spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.onnx.attributes import attribute_values
from lossgrad_compiler.onnx.node_errors import located
from lossgrad_compiler.onnx.schemas import ensure_schemas
from lossgrad_compiler.onnx.type_protos import tensor_info

# Stands in for an input whose type is not known (yet): spec then checks only the rest.
_UNKNOWN = spec.TensorInfo(spec.FLOAT32, None)


def validate_node(node: NodeProto, value_types: Mapping[str, TypeProto]) -> spec.CheckedCall:
    """spec.validate for one ai.lossgrad node; the error names the node.

    `value_types` maps value names to their TypeProtos; an input missing from it is validated
    as a float32 of unknown rank. Attributes are read strictly (attributes_from_protos)."""
    try:
        op = spec.operator(node.op_type)
        attrs = attribute_values(op.name, node.attribute)
        infos: dict[str, spec.TensorInfo | None] = {}
        for i, value in enumerate(node.input):
            name = spec.INPUT_NAMES[i] if i < len(spec.INPUT_NAMES) else f"input {i}"
            infos[name] = (tensor_info(value_types.get(value)) or _UNKNOWN) if value else None
        return spec.validate(op.name, infos, attrs)
    except LossGradError as err:
        raise located(err, node.name) from None


def check_model(model: ModelProto) -> None:
    """Validate every ai.lossgrad node with spec, then run onnx's checker with full_check.

    Raises a LossGradError subclass (naming the node, carrying the aclnn code) for an invalid
    ai.lossgrad node, and onnx's ValidationError / InferenceError for anything else."""
    ensure_schemas()
    for node, _ in lossgrad_nodes(model.graph):
        validate_node(node, {})  # presence of inputs and attributes: needs no types
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    for node, types in lossgrad_nodes(inferred.graph, _value_types(inferred.graph, {})):
        validate_node(node, types)
    onnx.checker.check_model(model, full_check=True)


def lossgrad_nodes(
    graph: GraphProto, types: Mapping[str, TypeProto] | None = None
) -> Iterator[tuple[NodeProto, Mapping[str, TypeProto]]]:
    """Every ai.lossgrad node of `graph` and its subgraphs, with the value types in its scope."""
    scope = types if types is not None else {}
    for node in graph.node:
        if node.domain == spec.DOMAIN:
            yield node, scope
        for attr in node.attribute:
            for sub in _subgraphs(attr):
                yield from lossgrad_nodes(sub, _value_types(sub, scope))


def _subgraphs(attr: AttributeProto) -> list[GraphProto]:
    if attr.type == AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


def _value_types(graph: GraphProto, outer: Mapping[str, TypeProto]) -> dict[str, TypeProto]:
    """The TypeProto of every value declared in `graph`, over those of enclosing scopes."""
    types = dict(outer)
    for init in graph.initializer:
        types[init.name] = helper.make_tensor_type_proto(init.data_type, list(init.dims))
    for info in [*graph.input, *graph.value_info, *graph.output]:
        if info.type.WhichOneof("value") is not None:
            types[info.name] = info.type
    return types
