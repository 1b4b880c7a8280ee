"""Walking the nested scopes of an ONNX model: graph-valued attributes and their nodes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from onnx import AttributeProto, GraphProto, ModelProto, NodeProto


def attribute_graphs(attr: AttributeProto) -> list[GraphProto]:
    """The graphs an attribute holds (If branches, Loop and Scan bodies, ...)."""
    if attr.type == AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


def deep_nodes(nodes: Iterable[NodeProto]) -> Iterator[NodeProto]:
    """The nodes and, recursively, the nodes of their subgraphs."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            for graph in attribute_graphs(attr):
                yield from deep_nodes(graph.node)


def count_domain_nodes(model: ModelProto, domain: str) -> int:
    """The nodes of `domain` in the main graph, the model-local functions and every subgraph
    of theirs: the one node count (progress totals, inline mode's bookkeeping)."""
    scopes = [model.graph.node, *(function.node for function in model.functions)]
    return sum(1 for nodes in scopes for node in deep_nodes(nodes) if node.domain == domain)
