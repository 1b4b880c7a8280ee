"""A read-only index of one ONNX graph for the matcher: producers, consumers, constants and
the types and (symbolic) shapes that ONNX shape inference gives each value; and the
attribute and name helpers the pass reads a model with (attributes by name and type, never
by position; every name any scope of the model defines)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, numpy_helper

from lossgrad_compiler import spec
from lossgrad_compiler.onnx.graphs import attribute_graphs
from lossgrad_compiler.onnx.inference import types_only

Dim = int | str | None


@dataclass(frozen=True)
class ValueType:
    elem_type: int
    shape: tuple[Dim, ...] | None  # None: rank unknown

    @property
    def float_type(self) -> spec.FloatType | None:
        return spec.float_type(self.elem_type)

    @property
    def known_shape(self) -> bool:
        """Every dimension is a size or a named symbol (no unknown dimension)."""
        return self.shape is not None and all(d is not None for d in self.shape)


def _value_type(info: onnx.ValueInfoProto) -> ValueType | None:
    tensor = info.type.tensor_type if info.type.HasField("tensor_type") else None
    if tensor is None or not tensor.elem_type:
        return None
    if not tensor.HasField("shape"):
        return ValueType(tensor.elem_type, None)
    dims: list[Dim] = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.HasField("dim_param") and not d.dim_param.startswith("unk__"):
            dims.append(d.dim_param)  # unk__N: shape inference's name for "not known"
        else:
            dims.append(None)
    return ValueType(tensor.elem_type, tuple(dims))


class GraphIndex:
    """The main graph of a model; subgraphs (If, Loop, Scan bodies) are not looked into."""

    def __init__(self, model: ModelProto) -> None:
        self.graph: GraphProto = model.graph
        graph_inputs = {i.name for i in self.graph.input}
        self.constants: dict[str, np.ndarray] = {}
        self._initializer_types: dict[str, ValueType] = {}
        for init in self.graph.initializer:
            if init.name not in graph_inputs:  # an overridable initializer is an input
                self._initializer_types[init.name] = ValueType(init.data_type, tuple(init.dims))
                if init.data_location != onnx.TensorProto.EXTERNAL:  # not read from disk
                    self.constants[init.name] = numpy_helper.to_array(init)
        self.producer: dict[str, NodeProto] = {}
        self.consumers: dict[str, list[NodeProto]] = {}
        for node in self.graph.node:
            for name in node.output:
                if name:
                    self.producer[name] = node
            for name in (*node.input, *outer_names(node)):
                if name:
                    self.consumers.setdefault(name, []).append(node)
            if node.op_type == "Constant" and readable(node):
                value = _constant_node_value(node)
                if value is not None:
                    self.constants[node.output[0]] = value
        self.outputs = {o.name for o in self.graph.output}
        self.onnx_opset = next(
            (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None
        )
        self._folded: dict[str, np.ndarray | None] = {}
        self.types: dict[str, ValueType] = {}
        self.infer(model)
        self._model = model  # read once more, unchanged, by compiled_type
        self._compiled: dict[str, ValueType] | None = None
        # what ONNX shape inference itself knows (the pass may later know more, through
        # shape-keeping Reshapes): a fused node's operands need the shape known to it, or
        # the compiler (which infers again) compiles the node for other shapes
        self.inferred: dict[str, ValueType] = dict(self.types)

    def infer(self, model: ModelProto) -> None:
        """Types and shapes from ONNX shape inference over `model` (this graph, or a copy
        with nodes replaced by equivalent ones that inference sees through)."""
        try:
            inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:  # a model shape inference rejects: fuse with what it declares
            inferred = model
        self.types = self._types(inferred)

    def _types(self, inferred: ModelProto) -> dict[str, ValueType]:
        found = {
            info.name: value
            for info in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output)
            if (value := _value_type(info)) is not None
        }
        for name, value in self._initializer_types.items():
            found.setdefault(name, value)
        return found

    def type_of(self, name: str) -> ValueType | None:
        return self.types.get(name)

    def compiled_type(self, name: str) -> ValueType | None:
        """The type compile_model's importer gives the value: ONNX shape inference without
        data propagation (frontend/inference.py), which knows less than `type_of` (the
        dims of Expand(1, Shape(x)), say). Inferred once, from the model as given, before
        the pass changes anything."""
        if self._compiled is None:
            try:
                with types_only():
                    inferred = onnx.shape_inference.infer_shapes(self._model, strict_mode=False)
            except Exception:  # the importer refuses such a model: only what it declares
                inferred = self._model
            self._compiled = self._types(inferred)
        return self._compiled.get(name)

    def uses(self, name: str) -> int:
        """How many node inputs and graph outputs read the value."""
        return len(self.consumers.get(name, ())) + (name in self.outputs)

    def constant(self, name: str) -> np.ndarray | None:
        """The value, if it is a constant or a constant folded through a few unary ops."""
        if name in self.constants:
            return self.constants[name]
        if name not in self._folded:
            self._folded[name] = self._fold(name)
        return self._folded[name]

    def _fold(self, name: str) -> np.ndarray | None:
        node = self.producer.get(name)
        if node is None or not readable(node):
            return None
        args = [self.constant(i) for i in node.input]
        if not args or any(a is None for a in args):
            return None
        with np.errstate(all="ignore"):
            if node.op_type == "Identity":
                return args[0]
            if node.op_type == "Neg":
                return -args[0]
            if node.op_type == "Cast":
                dtype = cast_dtype(int_attribute(node, "to", None))
                return None if dtype is None else np.asarray(args[0]).astype(dtype)
            if node.op_type == "Reciprocal":
                return np.asarray(1, args[0].dtype) / args[0]
        return None


def outer_names(node: NodeProto) -> set[str]:
    """Values of the enclosing graph that the node's subgraphs (If, Loop, Scan bodies) read:
    they count as uses, so a value a branch reads is never taken for dead."""
    names: set[str] = set()
    for attr in node.attribute:
        for graph in attribute_graphs(attr):
            inner = {v.name for v in graph.input} | {i.name for i in graph.initializer}
            inner |= {o for n in graph.node for o in n.output}
            for sub in graph.node:
                names |= {v for v in sub.input if v and v not in inner}
                names |= outer_names(sub) - inner
            names |= {o.name for o in graph.output if o.name not in inner}
    return names


def int_attribute(node: NodeProto, name: str, default: int | None) -> int | None:
    """The INT attribute `name` of the node, `default` when it is absent, None when it is
    there with another type or twice (the pass then reads nothing through the node)."""
    found = [a for a in node.attribute if a.name == name]
    if not found:
        return default
    if len(found) > 1 or found[0].type != AttributeProto.INT:
        return None
    return int(found[0].i)


# Attributes the pass understands on the standard ops it reads; a node with any other
# attribute is not read through (an attribute the ONNX schema does not have makes the model
# invalid, and one it does have but the pass ignores could change the meaning).
KNOWN_ATTRIBUTES: dict[str, frozenset[str]] = {
    "Cast": frozenset({"to", "saturate"}),
    "ReduceSum": frozenset({"keepdims", "noop_with_empty_axes"}),
    "ReduceProd": frozenset({"keepdims", "noop_with_empty_axes"}),
    "Shape": frozenset({"start", "end"}),
    "Gather": frozenset({"axis"}),
    "Concat": frozenset({"axis"}),
    "Reshape": frozenset({"allowzero"}),
    "Constant": frozenset({"value", "value_float", "value_floats", "value_int", "value_ints"}),
}


def readable(node: NodeProto) -> bool:
    """A standard node whose attributes are all ones the pass reads, each of the type its
    schema gives (INT for every one but Constant's)."""
    if node.domain not in ("", "ai.onnx"):
        return False
    if not node.attribute:  # most nodes the matcher walks (Mul, Sub, Where, ...): fast
        return True
    known = KNOWN_ATTRIBUTES.get(node.op_type, frozenset())
    names = [a.name for a in node.attribute]
    if len(set(names)) != len(names) or not set(names) <= known:
        return False
    if node.op_type == "Constant":
        return len(names) == 1
    return all(a.type == AttributeProto.INT for a in node.attribute)


def float_dtype(elem_type: int | None) -> np.dtype | None:
    """The numpy type of one of the four float element types, else None."""
    found = spec.float_type(elem_type) if elem_type is not None else None
    return None if found is None else np.dtype(found.dtype)


def cast_dtype(elem_type: int | None) -> np.dtype | None:
    """The numpy type a Cast to `elem_type` gives, for the float, integer and bool types."""
    if elem_type is None:
        return float_dtype(None)
    found = float_dtype(elem_type)
    if found is not None:
        return found
    integral = {
        onnx.TensorProto.INT64,
        onnx.TensorProto.INT32,
        onnx.TensorProto.INT16,
        onnx.TensorProto.INT8,
        onnx.TensorProto.UINT64,
        onnx.TensorProto.UINT32,
        onnx.TensorProto.UINT16,
        onnx.TensorProto.UINT8,
        onnx.TensorProto.BOOL,
    }
    if elem_type not in integral:
        return None
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))


def defined_names(model: ModelProto) -> set[str]:
    """Every name a value or node has anywhere in the model: the main graph, every subgraph
    (If, Loop and Scan bodies, to any depth) and every model-local function."""
    names: set[str] = set()

    def nodes(scope: list[NodeProto] | object) -> None:
        for node in scope:  # type: ignore[attr-defined]
            names.update(node.input)
            names.update(node.output)
            names.add(node.name)
            for attr in node.attribute:
                for sub in attribute_graphs(attr):
                    graph(sub)

    def graph(g: GraphProto) -> None:
        for info in (*g.input, *g.output, *g.value_info):
            names.add(info.name)
        names.update(i.name for i in g.initializer)
        names.update(i.values.name for i in g.sparse_initializer)
        nodes(g.node)

    graph(model.graph)
    for function in model.functions:
        names.update(function.input)
        names.update(function.output)
        nodes(function.node)
    names.discard("")
    return names


def _constant_node_value(node: NodeProto) -> np.ndarray | None:
    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name in ("value_float", "value_int"):
            return np.asarray(onnx.helper.get_attribute_value(attr))
        if attr.name in ("value_floats", "value_ints"):
            return np.asarray(list(onnx.helper.get_attribute_value(attr)))
    return None


def uniform(value: np.ndarray | None) -> float | None:
    """The one value every element of a non-empty constant holds, or None."""
    if value is None or value.size == 0:
        return None
    flat = np.asarray(value).reshape(-1)
    first = flat[0]
    if np.isnan(first) or not np.all(flat == first):
        return None
    return float(first)
