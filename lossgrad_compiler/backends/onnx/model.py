"""Put translated signatures into a model, in one of two forms.

* `functions`: every ai.lossgrad node stays (with all its attributes written out) and calls a
  model-local FunctionProto of its signature through `overload` (IR 10). Stock ONNX Runtime
  inlines the function; with the native kernel library registered, the kernel runs instead.
* `inline`: every ai.lossgrad node is replaced by its signature's standard nodes, with fresh
  value names; the model no longer needs the ai.lossgrad domain.

Everything else in the model — other nodes, initializers, names, metadata — is left as is."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from onnx import (
    FunctionProto,
    GraphProto,
    ModelProto,
    NodeProto,
    OperatorSetIdProto,
    helper,
)

from lossgrad_compiler import spec
from lossgrad_compiler.backends.onnx.translator import TranslatedFunction
from lossgrad_compiler.errors import InvalidArgumentError
from lossgrad_compiler.frontend import ImportedModel, Site
from lossgrad_compiler.frontend.scopes import subgraphs
from lossgrad_compiler.onnx.attributes import attribute_proto

FUNCTIONS_IR_VERSION = 10  # the first IR version with FunctionProto.overload
DEFAULT_ONNX_OPSET = 21
MIN_ONNX_OPSET = 13  # ReduceSum, Squeeze and Unsqueeze take their axes as inputs from 13 on


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


def _ensure_import(imports: Iterable[OperatorSetIdProto], domain: str, version: int) -> list:
    found = [o for o in imports if o.domain == domain or {o.domain, domain} <= {"", "ai.onnx"}]
    return [] if found else [helper.make_opsetid(domain, version)]


def signature_function(site: Site, translated: TranslatedFunction, opset: int) -> FunctionProto:
    """The FunctionProto (domain ai.lossgrad, name = op_type, overload = signature id)."""
    signature = site.signature
    return helper.make_function(
        spec.DOMAIN,
        signature.op_type,
        list(translated.inputs),
        list(translated.outputs),
        list(translated.nodes),
        opset_imports=[helper.make_opsetid("", opset)],
        attributes=[a.name for a in signature.op.attributes],
        overload=signature.id,
    )


def apply_functions(
    imported: ImportedModel, bodies: Mapping[str, TranslatedFunction]
) -> ModelProto:
    """Functions mode, in place: nodes get `overload` and explicit attributes, the model one
    FunctionProto per signature (replacing one of the same overload from an earlier run)."""
    model = imported.model
    opset = onnx_opset(model)
    first_site: dict[str, Site] = {}
    for site in imported.sites:
        site.node.overload = site.signature.id
        _write_missing_attributes(site)
        first_site.setdefault(site.signature.id, site)
    new = {
        (spec.DOMAIN, site.signature.op_type, sid): signature_function(site, bodies[sid], opset)
        for sid, site in first_site.items()
    }
    for i in reversed(range(len(model.functions))):
        f = model.functions[i]
        if (f.domain, f.name, f.overload) in new:
            del model.functions[i]
    model.functions.extend(new.values())
    model.opset_import.extend(_ensure_import(model.opset_import, "", opset))
    model.opset_import.extend(_ensure_import(model.opset_import, spec.DOMAIN, spec.OPSET_VERSION))
    model.ir_version = max(model.ir_version, FUNCTIONS_IR_VERSION)
    return model


def _write_missing_attributes(site: Site) -> None:
    """Spell out defaulted attributes, so every consumer (onnx's ReferenceEvaluator, the
    native kernels) sees the values the signature was compiled for."""
    present = {a.name for a in site.node.attribute}
    for attribute in site.signature.op.attributes:
        if attribute.name not in present:
            site.node.attribute.append(attribute_proto(attribute, site.call.attrs[attribute.name]))


def apply_inline(imported: ImportedModel, bodies: Mapping[str, TranslatedFunction]) -> ModelProto:
    """Inline mode, in place: each ai.lossgrad node becomes its signature's nodes."""
    model = imported.model
    opset = onnx_opset(model)
    names = UniqueNames(all_names(model))
    by_container: dict[int, list[Site]] = defaultdict(list)
    for site in imported.sites:
        by_container[id(site.container)].append(site)
    # Deepest scopes first: rebuilding a node list copies its nodes, subgraphs included.
    for sites in sorted(by_container.values(), key=lambda s: -s[0].depth):
        container = sites[0].container
        replacement = {
            site.index: instantiate(bodies[site.signature.id], site.node, names) for site in sites
        }
        _replace_nodes(container, replacement)
        if isinstance(container, FunctionProto):
            container.opset_import.extend(_ensure_import(container.opset_import, "", opset))
    model.opset_import.extend(_ensure_import(model.opset_import, "", opset))
    if not _uses_domain(model, spec.DOMAIN):
        _drop_import(model.opset_import, spec.DOMAIN)
        for function in model.functions:
            _drop_import(function.opset_import, spec.DOMAIN)
    return model


def instantiate(
    template: TranslatedFunction, node: NodeProto, names: UniqueNames
) -> list[NodeProto]:
    """Copies of a signature's nodes reading `node`'s inputs and writing its output; the
    intermediate values get names `<node name>/<template name>` that the model does not use."""
    base = node.name or node.op_type
    internal = {n for t in template.nodes for n in (*t.output, t.name)} - set(template.outputs)
    prefix = names.prefix_for(base, internal)
    mapping = dict(zip(template.inputs, node.input, strict=True))
    mapping.update(zip(template.outputs, node.output, strict=True))
    nodes = []
    for t in template.nodes:
        copy = NodeProto()
        copy.CopyFrom(t)
        copy.name = prefix + t.name
        del copy.input[:]
        copy.input.extend(mapping.get(n) or prefix + n for n in t.input)
        del copy.output[:]
        copy.output.extend(mapping.get(n) or prefix + n for n in t.output)
        nodes.append(copy)
    return nodes


class UniqueNames:
    """Names already used in a model, and fresh prefixes that create no clash."""

    def __init__(self, used: set[str]) -> None:
        self.used = used

    def prefix_for(self, base: str, suffixes: Iterable[str]) -> str:
        suffixes = list(suffixes)
        candidate, k = f"{base}/", 0
        while any(candidate + s in self.used for s in suffixes):
            k += 1
            candidate = f"{base}_{k}/"
        self.used.update(candidate + s for s in suffixes)
        return candidate


def _replace_nodes(container: GraphProto | FunctionProto, replacement: dict[int, list]) -> None:
    rebuilt = type(container)()
    for index, node in enumerate(container.node):
        if index in replacement:
            rebuilt.node.extend(replacement[index])
        else:
            rebuilt.node.append(node)
    container.ClearField("node")
    container.node.extend(rebuilt.node)


def all_names(model: ModelProto) -> set[str]:
    """Every value and node name in the model's graphs and functions."""
    names: set[str] = set()
    for nodes, extra in _scopes(model):
        names.update(extra)
        for node in nodes:
            names.update(node.input)
            names.update(node.output)
            names.add(node.name)
    return names


def _scopes(model: ModelProto) -> Iterator[tuple[Sequence[NodeProto], list[str]]]:
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


def _uses_domain(model: ModelProto, domain: str) -> bool:
    return any(node.domain == domain for nodes, _ in _scopes(model) for node in nodes)


def _drop_import(imports: Any, domain: str) -> None:
    """Remove `domain` from a repeated OperatorSetIdProto field."""
    for i in reversed(range(len(imports))):
        if imports[i].domain == domain:
            del imports[i]
