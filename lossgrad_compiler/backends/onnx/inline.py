"""Inline mode: every ai.lossgrad node is replaced by its signature's standard nodes.

Intermediate values are named `<node name>/<name in the body>` (with a suffix if that clashes
with any name of the model). Once no ai.lossgrad node is left, the ai.lossgrad opset import
goes too, so the model needs nothing but stock ONNX Runtime. Everything else is kept."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from onnx import FunctionProto, GraphProto, ModelProto, NodeProto

from lossgrad_compiler import spec
from lossgrad_compiler.backends.onnx.names import UniqueNames, all_names
from lossgrad_compiler.backends.onnx.opsets import drop_import, ensure_import, onnx_opset
from lossgrad_compiler.backends.onnx.translator import TranslatedFunction
from lossgrad_compiler.frontend import ImportedModel, Site
from lossgrad_compiler.onnx.graphs import count_domain_nodes


@dataclass(frozen=True)
class _TemplateNode:
    shell: NodeProto  # op_type, domain and attributes; no name, inputs or outputs
    name: str
    inputs: tuple[tuple[int | None, str], ...]  # (formal position, or None: internal name)
    outputs: tuple[tuple[int | None, str], ...]


class InlineTemplate:
    """A signature's body prepared for fast copying: per node, which names are the call's
    inputs/outputs (by position) and which are internal (to be prefixed)."""

    def __init__(self, body: TranslatedFunction) -> None:
        self.arity = len(body.inputs)
        formal = {name: i for i, name in enumerate((*body.inputs, *body.outputs))}
        self.nodes = []
        for node in body.nodes:
            shell = NodeProto()
            shell.CopyFrom(node)
            for field in ("name", "input", "output"):
                shell.ClearField(field)
            self.nodes.append(
                _TemplateNode(
                    shell,
                    node.name,
                    tuple((formal.get(n), n) for n in node.input),
                    tuple((formal.get(n), n) for n in node.output),
                )
            )
        self.internal = sorted(
            {n for t in self.nodes for _, n in (*t.inputs, *t.outputs) if n not in formal}
            | {t.name for t in self.nodes}
        )

    def instantiate_into(self, nodes: object, call: NodeProto, prefix: str) -> None:
        """Append the body's nodes for `call` to the repeated field `nodes` (the call's
        inputs by position; trailing ones it leaves out or names "" are absent)."""
        given = list(call.input[: self.arity])
        actual = [*given, *[""] * (self.arity - len(given)), *call.output]
        for t in self.nodes:
            copy = nodes.add()  # type: ignore[attr-defined]
            copy.CopyFrom(t.shell)
            copy.name = prefix + t.name
            copy.input.extend([prefix + n if i is None else actual[i] for i, n in t.inputs])
            copy.output.extend([prefix + n if i is None else actual[i] for i, n in t.outputs])


def apply_inline(
    imported: ImportedModel,
    bodies: Mapping[str, TranslatedFunction],
    sites: Sequence[Site] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ModelProto:
    """Inline mode, in place, for `sites` (default: every site of the model); `progress` is
    called with the number of nodes replaced so far."""
    model = imported.model
    sites = imported.sites if sites is None else sites
    opset = onnx_opset(model)
    remaining = count_domain_nodes(model, spec.DOMAIN) - len(sites)
    names = UniqueNames(all_names(model))
    templates = {sid: InlineTemplate(bodies[sid]) for sid in {s.signature.id for s in sites}}
    by_container: dict[int, list[Site]] = defaultdict(list)
    for site in sites:
        by_container[id(site.container)].append(site)
    # Deepest scopes first: rebuilding a node list copies its nodes, subgraphs included.
    counter = _Counter(progress)
    for group in sorted(by_container.values(), key=lambda g: -g[0].depth):
        container = group[0].container
        _rebuild(container, {s.index: s for s in group}, templates, names, counter)
        if isinstance(container, FunctionProto):
            ensure_import(container.opset_import, "", opset)
    ensure_import(model.opset_import, "", opset)
    if remaining == 0:
        drop_import(model.opset_import, spec.DOMAIN)
        for function in model.functions:
            drop_import(function.opset_import, spec.DOMAIN)
    return model


def _rebuild(
    container: GraphProto | FunctionProto,
    sites: Mapping[int, Site],
    templates: Mapping[str, InlineTemplate],
    names: UniqueNames,
    counter: _Counter,
) -> None:
    """Refill the container's node list: sites expanded, other nodes copied unchanged."""
    old = [_detached(node) for node in container.node]
    container.ClearField("node")
    for index, node in enumerate(old):
        site = sites.get(index)
        if site is None:
            container.node.append(node)
            continue
        template = templates[site.signature.id]
        prefix = names.prefix_for(node.name or node.op_type, template.internal)
        template.instantiate_into(container.node, node, prefix)
        counter.step()


class _Counter:
    """Counts replaced nodes; tells `progress` the count every 256 nodes."""

    def __init__(self, progress: Callable[[int], None] | None) -> None:
        self.progress = progress
        self.done = 0

    def step(self) -> None:
        self.done += 1
        if self.progress is not None and self.done % 256 == 0:
            self.progress(self.done)


def _detached(node: NodeProto) -> NodeProto:
    copy = NodeProto()
    copy.CopyFrom(node)
    return copy
