"""Value and node names of a whole model, and fresh prefixes that clash with none of them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from onnx import GraphProto, ModelProto, NodeProto

from lossgrad_compiler.frontend.scopes import subgraphs


def scopes(model: ModelProto) -> Iterator[tuple[Sequence[NodeProto], list[str]]]:
    """Every node list of the model (main graph, functions, subgraphs) with the names its
    scope declares besides node outputs (inputs, outputs, initializers, value_info)."""

    def graph_scopes(graph: GraphProto) -> Iterator[tuple[Sequence[NodeProto], list[str]]]:
        declared = [v.name for v in (*graph.input, *graph.output, *graph.value_info)]
        yield graph.node, declared + [i.name for i in graph.initializer]
        for node in graph.node:
            for _, sub in subgraphs(node):
                yield from graph_scopes(sub)

    yield from graph_scopes(model.graph)
    for function in model.functions:
        yield function.node, [*function.input, *function.output]
        for node in function.node:
            for _, sub in subgraphs(node):
                yield from graph_scopes(sub)


def all_names(model: ModelProto) -> set[str]:
    """Every value and node name in the model's graphs and functions."""
    names: set[str] = set()
    for nodes, declared in scopes(model):
        names.update(declared)
        for node in nodes:
            names.update(node.input)
            names.update(node.output)
            names.add(node.name)
    return names


class UniqueNames:
    """Names already used in a model, and fresh prefixes that create no clash."""

    def __init__(self, used: set[str]) -> None:
        self.used = used
        self._next: dict[str, int] = {}  # per base: the first k not tried yet

    def prefix_for(self, base: str, suffixes: Sequence[str]) -> str:
        """`<base>/`, or `<base>_<k>/`, such that no `<prefix><suffix>` is used yet; the new
        names are then marked as used.

        The search for a base resumes after the last k it handed out (every smaller k is
        taken or clashed), so n nodes of one base, unnamed nodes of one operator for
        instance, cost O(n) probes in all rather than O(n^2)."""
        k = self._next.get(base, 0)
        candidate = f"{base}/" if k == 0 else f"{base}_{k}/"
        while any(candidate + s in self.used for s in suffixes):
            k += 1
            candidate = f"{base}_{k}/"
        self._next[base] = k + 1
        self.used.update(candidate + s for s in suffixes)
        return candidate
