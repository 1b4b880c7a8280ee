"""Helpers that build ai.lossgrad nodes and models that onnx and ONNX Runtime 1.21-1.31 accept.

Nodes always carry every attribute (spec's defaults written out); models use IR version 10
(the first with function overloads; ORT 1.31 refuses onnx's default IR 14) and explicit
opsets; graph outputs always have a shape field, which onnx's checker requires."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import onnx
from onnx import FunctionProto, GraphProto, ModelProto, NodeProto, ValueInfoProto, helper

from lossgrad_compiler import spec
from lossgrad_compiler.onnx.attributes import attribute_protos
from lossgrad_compiler.onnx.graphs import deep_nodes
from lossgrad_compiler.onnx.placeholders import placeholder
from lossgrad_compiler.onnx.schemas import ensure_schemas
from lossgrad_compiler.onnx.type_protos import onnx_elem_type, shape_of

IR_VERSION = 10
ONNX_OPSET = 21
PRODUCER = "lossgrad_compiler"

# A value: a ready ValueInfoProto, or (name, element type, shape); shape None = rank unknown.
ValueSpec = ValueInfoProto | tuple[str, Any, spec.Shape | Sequence[spec.Dim] | None]


def opset_imports(
    onnx_opset: int = ONNX_OPSET, op_types: Iterable[str] = ()
) -> list[onnx.OperatorSetIdProto]:
    """ai.onnx at `onnx_opset` and ai.lossgrad at the smallest version that has every one of
    `op_types` (version 1 for none: spec.opset_version_for)."""
    return [
        helper.make_opsetid("", onnx_opset),
        helper.make_opsetid(spec.DOMAIN, spec.opset_version_for(op_types)),
    ]


def lossgrad_op_types(nodes: Iterable[NodeProto]) -> list[str]:
    """The ai.lossgrad operators among `nodes` and their subgraphs (known ones only: an
    unknown op_type is the checker's to report)."""
    return sorted(
        {n.op_type for n in deep_nodes(nodes) if n.domain == spec.DOMAIN} & set(spec.OPERATORS)
    )


def make_node(
    op_type: str,
    inputs: Sequence[str] | Mapping[str, str],
    outputs: str | Sequence[str],
    name: str | None = None,
    **attrs: Any,
) -> NodeProto:
    """An ai.lossgrad node with every attribute written explicitly (checked by spec).

    `inputs` are the value names of the operator's inputs in its order (grad_output, self,
    target, then its optional inputs; "" or None for an absent one, and trailing ones may be
    left out), or a mapping from input names to value names. The node lists its inputs up to
    the last present one, an absent one in between as "" (ONNX's convention). `outputs` is
    one name (or a one-element list)."""
    op = spec.operator(op_type)
    if isinstance(inputs, Mapping):
        by_name = dict(inputs)
    else:
        by_name = {_input_name(op, i): value for i, value in enumerate(inputs)}
    # Types and shapes are not known here: spec checks the inputs' presence and the attributes.
    infos = {k: placeholder(op, k, None, {}) if v else None for k, v in by_name.items()}
    call = spec.validate(op.name, infos, attrs)
    names = [by_name.get(n) or "" for n in op.input_names]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(
        op.name,
        names,
        [outputs] if isinstance(outputs, str) else list(outputs),
        name=name,
        domain=spec.DOMAIN,
    )
    node.attribute.extend(attribute_protos(op.name, call.attrs))
    return node


def _input_name(op: spec.OperatorSpec, index: int) -> str:
    return op.inputs[index].name if index < len(op.inputs) else f"input {index}"


def value_info(value: ValueSpec) -> ValueInfoProto:
    """A tensor ValueInfoProto from (name, element type, shape) or a ValueInfoProto."""
    if isinstance(value, ValueInfoProto):
        return value
    name, elem, shape = value
    return helper.make_tensor_value_info(
        name, onnx_elem_type(elem), None if shape is None else list(shape)
    )


def make_graph(
    nodes: Iterable[NodeProto],
    inputs: Iterable[ValueSpec],
    outputs: Iterable[ValueSpec | str],
    name: str = "lossgrad_graph",
    initializers: Iterable[onnx.TensorProto] = (),
) -> GraphProto:
    """A graph whose outputs all have a shape field.

    An output given only by name takes the type and shape that onnx's shape inference (with
    the ai.lossgrad schemas) finds for it; onnx names a dimension it cannot relate to an
    input ('unk__0', ...)."""
    nodes, initializers = list(nodes), list(initializers)
    inputs = [value_info(v) for v in inputs]
    outputs = list(outputs)
    by_name = [o for o in outputs if isinstance(o, str)]
    inferred = _infer_value_types(nodes, inputs, initializers, by_name) if by_name else {}
    infos = [inferred[o] if isinstance(o, str) else value_info(o) for o in outputs]
    return helper.make_graph(nodes, name, inputs, infos, initializer=initializers)


def _infer_value_types(
    nodes: list[NodeProto],
    inputs: list[ValueInfoProto],
    initializers: list[onnx.TensorProto],
    names: list[str],
) -> dict[str, ValueInfoProto]:
    ensure_schemas()
    draft = helper.make_model(
        helper.make_graph(nodes, "draft", inputs, [], initializer=initializers),
        ir_version=IR_VERSION,
        opset_imports=opset_imports(op_types=lossgrad_op_types(nodes)),
    )
    inferred = onnx.shape_inference.infer_shapes(draft, strict_mode=True)
    found = {v.name: v for v in inferred.graph.value_info}
    result = {}
    for name in names:
        info = found.get(name)
        if info is None or shape_of(info.type) is None:
            raise ValueError(
                f"the type or rank of graph output '{name}' cannot be inferred; "
                "give it as (name, element type, shape)"
            )
        result[name] = info
    return result


def make_model(
    graph: GraphProto,
    functions: Iterable[FunctionProto] = (),
    onnx_opset: int = ONNX_OPSET,
    doc: str = "",
) -> ModelProto:
    """A model with IR version 10 and opsets ai.onnx `onnx_opset` and ai.lossgrad at the
    smallest version that has every operator of the graph and the functions."""
    functions = list(functions)
    scopes = [*graph.node, *(n for f in functions for n in f.node)]
    model = helper.make_model(
        graph,
        ir_version=IR_VERSION,
        opset_imports=opset_imports(onnx_opset, lossgrad_op_types(scopes)),
        functions=functions,
        producer_name=PRODUCER,
    )
    if doc:
        model.doc_string = doc
    return model
