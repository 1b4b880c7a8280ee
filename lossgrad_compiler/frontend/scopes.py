"""Value types in every scope of a model: the main graph, the subgraphs of If/Loop/Scan nodes
and the bodies of model-local functions.

onnx's shape inference types the main graph only: it infers through subgraphs and function
bodies but keeps none of their value types. A nested scope is therefore inferred on its own,
as a small model whose inputs are the scope's declared inputs plus the outer values it reads,
typed from the enclosing scope (for a function body: from the call)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from onnx import (
    AttributeProto,
    FunctionProto,
    GraphProto,
    ModelProto,
    NodeProto,
    OperatorSetIdProto,
    TensorProto,
    TypeProto,
    ValueInfoProto,
    helper,
)

from lossgrad_compiler import spec
from lossgrad_compiler.frontend.inference import infer_types
from lossgrad_compiler.onnx.graphs import deep_nodes

Types = dict[str, TypeProto]


@dataclass(frozen=True)
class ModelContext:
    """What a scope's inference needs from the model around it."""

    ir_version: int
    opset_imports: tuple[OperatorSetIdProto, ...]
    functions: tuple[FunctionProto, ...]

    @staticmethod
    def of(model: ModelProto) -> ModelContext:
        return ModelContext(model.ir_version, tuple(model.opset_import), tuple(model.functions))

    def for_function(self, function: FunctionProto) -> ModelContext:
        """A function body sees its own opset imports, then the model's for other domains."""
        own = {o.domain for o in function.opset_import}
        imports = [*function.opset_import, *(o for o in self.opset_imports if o.domain not in own)]
        return ModelContext(self.ir_version, tuple(imports), self.functions)


def graph_types(graph: GraphProto, outer: Mapping[str, TypeProto]) -> Types:
    """Every typed value declared in `graph` (inputs, initializers, value_info, outputs),
    over the types of the enclosing scopes."""
    types = dict(outer)
    for init in graph.initializer:
        types[init.name] = helper.make_tensor_type_proto(init.data_type, list(init.dims))
    for info in (*graph.input, *graph.value_info, *graph.output):
        if info.type.WhichOneof("value") is not None:
            types[info.name] = info.type
    return types


def main_graph_types(model: ModelProto, domain: str = spec.DOMAIN) -> Types:
    """The value types of the main graph: as declared when every `domain` node is in the main
    graph and the declarations give each of its inputs an element type and a rank, else
    after onnx's shape inference (which costs one inference-function call per node: seconds
    for 10,000 nodes). A node in a subgraph or a model-local function may read any value of
    the main graph (an outer-scope value, or a call's input), so then everything is inferred."""
    declared = graph_types(model.graph, {})
    nested = any(
        node.domain == domain for function in model.functions for node in deep_nodes(function.node)
    ) or any(
        inner.domain == domain
        for node in model.graph.node
        for _, sub in subgraphs(node)
        for inner in deep_nodes(sub.node)
    )
    if not nested and all(
        _ranked(declared.get(name))
        for node in model.graph.node
        if node.domain == domain
        for name in node.input
        if name
    ):
        return declared
    inferred = infer_types(model)  # the importer validates each node, naming its path
    return graph_types(inferred.graph, {})


def _ranked(type_proto: TypeProto | None) -> bool:
    return (
        type_proto is not None
        and type_proto.HasField("tensor_type")
        and type_proto.tensor_type.elem_type != TensorProto.UNDEFINED
        and type_proto.tensor_type.HasField("shape")
    )


def infer_scope(
    nodes: Sequence[NodeProto],
    inputs: Sequence[ValueInfoProto],
    initializers: Sequence[TensorProto],
    outer: Mapping[str, TypeProto],
    context: ModelContext,
) -> Types:
    """The value types of a nested scope (its nodes read outer values by name)."""
    declared = {i.name for i in inputs} | {i.name for i in initializers}
    free = sorted(used_names(nodes) - declared - defined_names(nodes))
    outer_inputs = [value_info_of(name, outer.get(name)) for name in free]
    graph = helper.make_graph(
        list(nodes), "scope", [*inputs, *outer_inputs], [], initializer=list(initializers)
    )
    model = helper.make_model(
        graph,
        ir_version=context.ir_version,
        opset_imports=list(context.opset_imports),
        functions=list(context.functions),
    )
    inferred = infer_types(model)
    return graph_types(inferred.graph, outer)


def value_info_of(name: str, type_proto: TypeProto | None) -> ValueInfoProto:
    info = ValueInfoProto(name=name)
    if type_proto is not None:
        info.type.CopyFrom(type_proto)
    return info


def subgraphs(node: NodeProto) -> Iterator[tuple[AttributeProto, GraphProto]]:
    """The graph-valued attributes of a node (If branches, Loop and Scan bodies, ...)."""
    for attr in node.attribute:
        for graph in _graphs_of(attr):
            yield attr, graph


def used_names(nodes: Iterable[NodeProto]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        names.update(n for n in node.input if n)
        for _, sub in subgraphs(node):
            names |= used_names(sub.node)
            names.update(o.name for o in sub.output)
    return names


def defined_names(nodes: Iterable[NodeProto]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        names.update(n for n in node.output if n)
        for _, sub in subgraphs(node):
            names |= defined_names(sub.node)
            names.update(i.name for i in sub.input)
            names.update(i.name for i in sub.initializer)
    return names


def subgraph_inputs(
    node: NodeProto, graph: GraphProto, outer: Mapping[str, TypeProto]
) -> list[ValueInfoProto]:
    """The subgraph's declared inputs; a Loop body's untyped inputs get the types the Loop
    gives them (iteration count, condition, then the loop-carried values)."""
    inputs = [
        value_info_of(i.name, i.type if i.type.WhichOneof("value") else None) for i in graph.input
    ]
    if node.op_type != "Loop" or node.domain not in ("", "ai.onnx"):
        return inputs
    given = [
        helper.make_tensor_type_proto(TensorProto.INT64, []),
        helper.make_tensor_type_proto(TensorProto.BOOL, []),
        *(outer.get(name) for name in node.input[2:]),
    ]
    for info, type_proto in zip(inputs, given, strict=False):
        if info.type.WhichOneof("value") is None and type_proto is not None:
            info.type.CopyFrom(type_proto)
    return inputs


def bind_attributes(
    nodes: Sequence[NodeProto], linked: Mapping[str, AttributeProto]
) -> list[NodeProto]:
    """Copies of a function body's nodes with attribute references replaced by the call's
    values (an unbound reference is dropped, as ONNX does), also inside subgraphs."""
    bound = []
    for node in nodes:
        copy = NodeProto()
        copy.CopyFrom(node)
        _bind(copy, linked)
        bound.append(copy)
    return bound


def _bind(node: NodeProto, linked: Mapping[str, AttributeProto]) -> None:
    kept = []
    for attr in node.attribute:
        resolved = AttributeProto()
        if attr.ref_attr_name:
            value = linked.get(attr.ref_attr_name)
            if value is None:
                continue
            resolved.CopyFrom(value)
            resolved.name = attr.name
        else:
            resolved.CopyFrom(attr)
            for sub in _graphs_of(resolved):
                for inner in sub.node:
                    _bind(inner, linked)
        kept.append(resolved)
    del node.attribute[:]
    node.attribute.extend(kept)


def _graphs_of(attr: AttributeProto) -> list[GraphProto]:
    if attr.type == AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []
