"""Every tensor a model holds, wherever ONNX lets it live: initializers (sparse ones too),
attribute tensors, subgraphs and model-local functions. One walker for everything that
reads or moves external data (the compiler's output files, the runtime's checks)."""

from __future__ import annotations

from collections.abc import Iterator

from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, SparseTensorProto, TensorProto
from onnx.external_data_helper import uses_external_data


def model_tensors(model: ModelProto) -> Iterator[TensorProto]:
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        for node in function.node:
            yield from _node_tensors(node)


def external_tensors(model: ModelProto) -> list[TensorProto]:
    """The tensors whose data lives in an external file."""
    return [t for t in model_tensors(model) if uses_external_data(t)]


def _graph_tensors(graph: GraphProto) -> Iterator[TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from _sparse_tensors(sparse)
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node: NodeProto) -> Iterator[TensorProto]:
    for attribute in node.attribute:
        yield from _attribute_tensors(attribute)


def _attribute_tensors(attribute: AttributeProto) -> Iterator[TensorProto]:
    if attribute.HasField("t"):
        yield attribute.t
    yield from attribute.tensors
    if attribute.HasField("sparse_tensor"):
        yield from _sparse_tensors(attribute.sparse_tensor)
    for sparse in attribute.sparse_tensors:
        yield from _sparse_tensors(sparse)
    if attribute.HasField("g"):
        yield from _graph_tensors(attribute.g)
    for graph in attribute.graphs:
        yield from _graph_tensors(graph)


def _sparse_tensors(sparse: SparseTensorProto) -> Iterator[TensorProto]:
    yield sparse.values
    yield sparse.indices
