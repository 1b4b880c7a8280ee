"""onnx's shape inference as the importer runs it, with the project's errors.

onnx raises its own `InferenceError` (no aclnn code, and often no name: "Inferred elem type
differs from existing elem type: (11) vs (1)") when what a model declares contradicts
itself. The one contradiction found by fuzzing, an initializer whose type or shape is not
that of the graph input it gives a default value to, is checked first, in every graph, so
that it is refused whether or not inference runs and the error names the value; anything
else inference refuses is still one line with 161002, in onnx's words."""

from __future__ import annotations

from collections.abc import Iterator

import onnx
from onnx import GraphProto, ModelProto, TensorProto, TypeProto

from lossgrad_compiler.errors import InvalidArgumentError
from lossgrad_compiler.onnx.graphs import attribute_graphs
from lossgrad_compiler.onnx.inference import types_only


def infer_types(model: ModelProto) -> ModelProto:
    """`model` with inferred value types (non-strict: a node onnx cannot infer stays
    untyped). The importer validates each ai.lossgrad node itself, naming its path."""
    try:
        with types_only():
            return onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as err:
        message = " ".join(str(err).split())
        raise InvalidArgumentError(
            "model", "value types", f"onnx's shape inference refuses the model: {message}"
        ) from None


def check_initializers(model: ModelProto) -> None:
    """InvalidArgumentError (161002) naming the value where an initializer (dense or sparse)
    of a graph input, its default value, is not of the type the input declares."""
    for where, graph in _graphs(model):
        declared = {i.name: i.type for i in graph.input}
        initializers = [(t.name, "tensor", t.data_type, list(t.dims)) for t in graph.initializer]
        initializers += [
            (t.values.name, "sparse_tensor", t.values.data_type, list(t.dims))
            for t in graph.sparse_initializer
        ]
        for name, kind, element, dims in initializers:
            wanted = declared.get(name)
            if wanted is None or _agrees(wanted, kind, element, dims):
                continue
            raise InvalidArgumentError(
                "model",
                f"initializer '{name}'",
                f"it is {_text(kind, element, dims)}, but {where} declares its input "
                f"'{name}' {_declared(wanted)}; an initializer of an input is the input's "
                "default value, of the input's type",
            )


def _agrees(wanted: TypeProto, kind: str, element: int, dims: list[int]) -> bool:
    case = wanted.WhichOneof("value")
    if case is None:
        return True
    if case != f"{kind}_type":
        return False
    tensor = getattr(wanted, case)
    if tensor.elem_type not in (TensorProto.UNDEFINED, element):
        return False
    if not tensor.HasField("shape"):
        return True
    shape = tensor.shape.dim
    return len(shape) == len(dims) and all(
        not d.HasField("dim_value") or d.dim_value == size
        for d, size in zip(shape, dims, strict=True)
    )


def _text(kind: str, element: int, dims: list[object]) -> str:
    sparse = "a sparse tensor of " if kind == "sparse_tensor" else ""
    return f"{sparse}{_type_name(element)} [{','.join(map(str, dims))}]"


def _declared(wanted: TypeProto) -> str:
    case = wanted.WhichOneof("value")
    if case not in ("tensor_type", "sparse_tensor_type"):
        return f"a {str(case).removesuffix('_type').replace('_', ' ')}"
    tensor = getattr(wanted, case)
    kind = case.removesuffix("_type")
    if not tensor.HasField("shape"):
        sparse = "a sparse tensor of " if kind == "sparse_tensor" else ""
        return f"{sparse}{_type_name(tensor.elem_type)} of any shape"
    dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?")
            for d in tensor.shape.dim]  # fmt: skip
    return _text(kind, tensor.elem_type, dims)


def _type_name(elem_type: int) -> str:
    """numpy's name where there is one (float32), else onnx's (string)."""
    if elem_type == TensorProto.UNDEFINED:
        return "any element type"
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(elem_type).name
    except (KeyError, ValueError, TypeError):
        return str(TensorProto.DataType.Name(elem_type)).lower()


def _graphs(model: ModelProto) -> Iterator[tuple[str, GraphProto]]:
    """The main graph and every subgraph (in it and in function bodies), each with how a
    message names it."""
    pending: list[tuple[str, GraphProto]] = [("the graph", model.graph)]
    nodes = [node for function in model.functions for node in function.node]
    while pending or nodes:
        if pending:
            where, graph = pending.pop(0)
            yield where, graph
            nodes += list(graph.node)
            continue
        node = nodes.pop(0)
        for attr in node.attribute:
            for sub in attribute_graphs(attr):
                pending.append((f"subgraph '{sub.name or attr.name}' of node '{node.name}'", sub))
