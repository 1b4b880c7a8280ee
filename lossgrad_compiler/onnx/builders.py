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
from lossgrad_compiler.onnx.schemas import ensure_schemas
from lossgrad_compiler.onnx.type_protos import onnx_elem_type, shape_of

IR_VERSION = 10
ONNX_OPSET = 21
PRODUCER = "lossgrad_compiler"

# A value: a ready ValueInfoProto, or (name, element type, shape); shape None = rank unknown.
ValueSpec = ValueInfoProto | tuple[str, Any, spec.Shape | Sequence[spec.Dim] | None]


def opset_imports(onnx_opset: int = ONNX_OPSET) -> list[onnx.OperatorSetIdProto]:
    """ai.onnx at `onnx_opset` and ai.lossgrad at spec's version."""
    return [
        helper.make_opsetid("", onnx_opset),
        helper.make_opsetid(spec.DOMAIN, spec.OPSET_VERSION),
    ]


def make_node(
    op_type: str,
    inputs: Sequence[str] | Mapping[str, str],
    outputs: str | Sequence[str],
    name: str | None = None,
    **attrs: Any,
) -> NodeProto:
    """An ai.lossgrad node with every attribute written explicitly (checked by spec).

    `inputs` are the value names of grad_output, self and target, in that order, or a mapping
    from those input names to value names. `outputs` is one name (or a one-element list)."""
    op = spec.operator(op_type)
    if isinstance(inputs, Mapping):
        by_name = dict(inputs)
    else:
        by_name = {_input_name(i): value for i, value in enumerate(inputs)}
    # Types and shapes are not known here: spec checks the inputs' presence and the attributes.
    unknown = spec.TensorInfo(spec.FLOAT32, None)
    call = spec.validate(op.name, {k: unknown if v else None for k, v in by_name.items()}, attrs)
    node = helper.make_node(
        op.name,
        [by_name[n] for n in spec.INPUT_NAMES],
        [outputs] if isinstance(outputs, str) else list(outputs),
        name=name,
        domain=spec.DOMAIN,
    )
    node.attribute.extend(attribute_protos(op.name, call.attrs))
    return node


def _input_name(index: int) -> str:
    return spec.INPUT_NAMES[index] if index < len(spec.INPUT_NAMES) else f"input {index}"


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
        opset_imports=opset_imports(),
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
    """A model with IR version 10 and opsets ai.onnx `onnx_opset`, ai.lossgrad 1."""
    model = helper.make_model(
        graph,
        ir_version=IR_VERSION,
        opset_imports=opset_imports(onnx_opset),
        functions=list(functions),
        producer_name=PRODUCER,
    )
    if doc:
        model.doc_string = doc
    return model
