"""Find, type, validate and group the ai.lossgrad nodes of an ONNX model.

Every node is found: in the main graph, in subgraphs of control-flow nodes and in the bodies
of model-local functions (typed once per distinct call). Each is validated by spec with its
inferred input types (errors name the node) and given its signature."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from onnx import (
    AttributeProto,
    FunctionProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TypeProto,
    ValueInfoProto,
)

from lossgrad_compiler import spec
from lossgrad_compiler.errors import InvalidArgumentError, LossGradError
from lossgrad_compiler.frontend.inference import check_initializers
from lossgrad_compiler.frontend.scopes import (
    ModelContext,
    Types,
    bind_attributes,
    infer_scope,
    main_graph_types,
    subgraph_inputs,
    subgraphs,
    value_info_of,
)
from lossgrad_compiler.frontend.signature import Signature, signature_of
from lossgrad_compiler.onnx.attributes import attribute_values
from lossgrad_compiler.onnx.inference import input_name
from lossgrad_compiler.onnx.node_errors import located
from lossgrad_compiler.onnx.opsets import check_opset_imports
from lossgrad_compiler.onnx.placeholders import fill_unknown
from lossgrad_compiler.onnx.schemas import ensure_schemas
from lossgrad_compiler.onnx.type_protos import tensor_info

Container = GraphProto | FunctionProto
FunctionKey = tuple[str, str, str]  # (domain, name, overload)


class UnknownTypeError(InvalidArgumentError):
    """An input's element type or rank is unknown: often because the node producing it is
    itself invalid, so the importer reports every other error first."""


@dataclass
class Site:
    """One ai.lossgrad node: where it is (`container.node[index]`) and what it computes."""

    node: NodeProto
    container: Container
    index: int
    location: str  # the node's path in messages: "if1/then_branch/kl" or "my.Func/kl"
    depth: int  # how many subgraphs deep `container` is (0: main graph or function body)
    in_function: bool  # inside the body of a model-local function (at any depth)
    call: spec.CheckedCall
    signature: Signature


@dataclass
class ImportedModel:
    """The model's ai.lossgrad nodes (`sites`, in model order) and their signatures."""

    model: ModelProto
    sites: list[Site] = field(default_factory=list)

    @property
    def signatures(self) -> dict[str, Signature]:
        """Distinct signatures by id, in the order they first occur."""
        found: dict[str, Signature] = {}
        for site in self.sites:
            found.setdefault(site.signature.id, site.signature)
        return found

    def nodes_per_operator(self) -> dict[str, int]:
        counts = {name: 0 for name in spec.OPERATORS}
        for site in self.sites:
            counts[site.signature.op_type] += 1
        return counts


def import_model(model: ModelProto, progress: Callable[[int], None] | None = None) -> ImportedModel:
    """The ai.lossgrad nodes of `model`, validated (LossGradError naming the node) and grouped
    by signature. `progress` is called with the number of nodes found so far."""
    ensure_schemas()
    check_opset_imports(model)
    check_initializers(model)
    context = ModelContext.of(model)
    walker = _Walker(model, context, progress)
    walker.visit(model.graph, main_graph_types(model), "", None, context)
    walker.visit_functions()
    if walker.untyped:
        raise walker.untyped[0]
    return ImportedModel(model, walker.sites)


def check_node(
    node: NodeProto,
    types: Mapping[str, TypeProto],
    location: str,
    linked: Mapping[str, AttributeProto] | None = None,
) -> spec.CheckedCall:
    """spec.validate of one node with its inferred input types; every input's element type
    and rank must be known to compile it. Errors name the node."""
    try:
        op = spec.operator(node.op_type)
        attrs = attribute_values(op.name, node.attribute, linked)
        infos: dict[str, spec.TensorInfo | None] = {}
        untyped: list[tuple[str, str]] = []
        for i, value in enumerate(node.input):
            name = input_name(op, i)
            infos[name] = tensor_info(types.get(value)) if value else None
            if value and infos[name] is None:
                untyped.append((name, value))
        infos = fill_unknown(op, infos, {name: None for name, _ in untyped})
        call = spec.validate(op.name, infos, attrs)
        if untyped:  # after spec.validate, so that a missing input is reported first
            name, value = untyped[0]
            raise UnknownTypeError(
                op.name, name, f"the element type of '{value}' is unknown (declare its type)"
            )
        for name in call.present:
            if call.shapes[name] is None:
                raise UnknownTypeError(
                    op.name, name, "the rank is unknown (declare the shape of the model's inputs)"
                )
        if len(node.output) != 1 or not node.output[0]:
            raise InvalidArgumentError(op.name, op.output, "exactly one output is required")
        return call
    except LossGradError as err:
        raise located(err, location) from None


class _Walker:
    """Visits every scope once (every function once per distinct call) and records sites."""

    def __init__(
        self,
        model: ModelProto,
        context: ModelContext,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.context = context
        self.progress = progress
        self.sites: list[Site] = []
        self.untyped: list[UnknownTypeError] = []  # reported once nothing else is wrong
        self.functions: dict[FunctionKey, FunctionProto] = {
            (f.domain, f.name, f.overload): f for f in model.functions
        }
        self._calls: list[tuple[FunctionProto, Types, dict[str, AttributeProto]]] = []
        self._seen_calls: set[tuple[FunctionKey, bytes]] = set()
        self._function_sites: dict[tuple[int, int], Site] = {}
        self._checked: dict[tuple[object, ...], tuple[spec.CheckedCall, Signature]] = {}

    def visit(
        self,
        container: Container,
        types: Types,
        path: str,
        linked: Mapping[str, AttributeProto] | None,
        context: ModelContext,
        depth: int = 0,
    ) -> None:
        for index, node in enumerate(container.node):
            location = f"{path}{node.name or f'#{index}'}"
            if node.domain == spec.DOMAIN:
                self._add_site(node, container, index, location, depth, types, linked)
            for attr, sub in subgraphs(node):
                nodes = bind_attributes(sub.node, linked) if linked else list(sub.node)
                inputs = subgraph_inputs(node, sub, types)
                sub_types = infer_scope(nodes, inputs, list(sub.initializer), types, context)
                where = f"{location}/{attr.name}/"
                self.visit(sub, sub_types, where, linked, context, depth + 1)
            function = self.functions.get((node.domain, node.op_type, node.overload))
            if function is not None:
                self._queue_call(function, node, types, linked)

    def visit_functions(self) -> None:
        while self._calls:
            function, types, linked = self._calls.pop(0)
            context = self.context.for_function(function)
            nodes = bind_attributes(function.node, linked)
            body_types = infer_scope(nodes, _typed_inputs(function, types), [], {}, context)
            path = f"{function.domain}.{function.name}/"
            self.visit(function, body_types, path, linked, context)

    def _queue_call(
        self,
        function: FunctionProto,
        node: NodeProto,
        types: Types,
        linked: Mapping[str, AttributeProto] | None,
    ) -> None:
        call = bind_attributes([node], linked)[0] if linked else node
        bound = {a.name: a for a in function.attribute_proto}
        bound.update({a.name: a for a in call.attribute})
        formal = {
            f: types[a] for f, a in zip(function.input, node.input, strict=False) if a in types
        }
        key = b"".join(
            [t.SerializeToString() for t in formal.values()]
            + [a.SerializeToString() for _, a in sorted(bound.items())]
        )
        if ((function.domain, function.name, function.overload), key) in self._seen_calls:
            return
        self._seen_calls.add(((function.domain, function.name, function.overload), key))
        self._calls.append((function, formal, bound))

    def _check(
        self,
        node: NodeProto,
        types: Types,
        location: str,
        linked: Mapping[str, AttributeProto] | None,
    ) -> tuple[spec.CheckedCall, Signature]:
        """check_node and signature_of, remembered per (op, input types, attributes): a
        model's thousands of identical nodes are validated once."""
        if linked is not None:
            call = check_node(node, types, location, linked)
            return call, signature_of(call)
        key = (
            node.op_type,
            tuple(types[n].SerializeToString() if n in types else n for n in node.input),
            tuple(a.SerializeToString() for a in node.attribute),
            len(node.output) == 1 and bool(node.output[0]),
        )
        found = self._checked.get(key)
        if found is None:
            call = check_node(node, types, location, linked)
            found = self._checked[key] = (call, signature_of(call))
        return found

    def _add_site(
        self,
        node: NodeProto,
        container: Container,
        index: int,
        location: str,
        depth: int,
        types: Types,
        linked: Mapping[str, AttributeProto] | None,
    ) -> None:
        try:
            call, signature = self._check(node, types, location, linked)
        except UnknownTypeError as err:
            self.untyped.append(err)
            return
        in_function = linked is not None
        site = Site(node, container, index, location, depth, in_function, call, signature)
        if in_function:
            earlier = self._function_sites.get((id(container), index))
            if earlier is not None:
                if earlier.signature != site.signature:
                    raise located(
                        InvalidArgumentError(
                            node.op_type,
                            "inputs",
                            "the enclosing function is called with different signatures "
                            f"({earlier.signature.id} and {site.signature.id}); "
                            "give it one overload per signature",
                        ),
                        location,
                    )
                return
            self._function_sites[(id(container), index)] = site
        self.sites.append(site)
        if self.progress is not None:
            self.progress(len(self.sites))


def _typed_inputs(function: FunctionProto, types: Types) -> list[ValueInfoProto]:
    return [value_info_of(name, types.get(name)) for name in function.input]
