"""Structural validity of a model, before anything is compiled.

onnx's checker without `full_check` checks structure: every graph and function body in
single static assignment form (no name produced twice, none shadowing an outer one), its
nodes in topological order (a cycle or an undefined input breaks it), every graph output
produced, model-local functions unique and not recursive. It also checks each node against
its schema, which for ai.lossgrad nodes would report bad attributes or inputs in onnx's
words, without the aclnn code the frontend's own validation gives. The checker therefore
sees a copy in which the ai.lossgrad domain is an unregistered one, whose nodes it takes as
opaque custom ops, and in which the main graph's inputs and outputs have a type and a shape
(the checker requires them; ONNX Runtime, and so the compiler, does not). The checker misses
one structural rule, which is checked here: every output of a function body is produced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx
from onnx import ModelProto, NodeProto, helper

from lossgrad_compiler import spec
from lossgrad_compiler.onnx.graphs import attribute_graphs, deep_nodes
from lossgrad_compiler.onnx.tensors import external_tensors

_OPAQUE = f"{spec.DOMAIN}.unchecked"


def structural_problem(model: ModelProto) -> str | None:
    """What makes `model` structurally invalid, on one line; None when nothing does."""
    try:
        onnx.checker.check_model(_opaque_copy(model))
    except onnx.checker.ValidationError as err:
        message = " ".join(str(err).replace(_OPAQUE, spec.DOMAIN).split())
        if "topologically sorted" in message:  # the checker's words for a cycle, too
            return _cycle(model) or message
        return message
    return unproduced_function_output(model)


def _cycle(model: ModelProto) -> str | None:
    """A message naming the nodes of a cycle in any graph or function body, or None."""
    scopes: list[tuple[str, Sequence[NodeProto]]] = [("the graph", model.graph.node)]
    scopes += [(f"function '{f.domain}.{f.name}'", f.node) for f in model.functions]
    while scopes:
        where, nodes = scopes.pop(0)
        cycle = _cycle_in(nodes)
        if cycle is not None:
            names = " -> ".join(f"'{n.name or n.op_type}'" for n in [*cycle, cycle[0]])
            return f"{where} has a cycle: {names}"
        for node in nodes:
            for attr in node.attribute:
                scopes += [(f"subgraph '{g.name}'", g.node) for g in attribute_graphs(attr)]
    return None


def _cycle_in(nodes: Sequence[NodeProto]) -> list[NodeProto] | None:
    """Nodes that feed each other in a ring, by a depth-first search over producers."""
    producer = {name: i for i, node in enumerate(nodes) for name in node.output if name}
    state = [0] * len(nodes)  # 0 unvisited, 1 on the current path, 2 done
    for start in range(len(nodes)):
        if state[start]:
            continue
        path, stack = [start], [iter(_inputs(nodes[start]))]
        state[start] = 1
        while stack:
            step = next((producer[n] for n in stack[-1] if n in producer), None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[step] == 1:
                return [nodes[i] for i in reversed(path[path.index(step) :])]  # data flow
            elif state[step] == 0:
                state[step] = 1
                path.append(step)
                stack.append(iter(_inputs(nodes[step])))
    return None


def _inputs(node: NodeProto) -> list[str]:
    """The values a node reads, its subgraphs' reads of outer values included."""
    names = [name for name in node.input if name]
    for attr in node.attribute:
        for graph in attribute_graphs(attr):
            for inner in deep_nodes(graph.node):
                names += [name for name in inner.input if name]
    return names


def unproduced_function_output(model: ModelProto) -> str | None:
    """A message naming an output of a model-local function that no node of its body
    produces (the checker checks this for graphs only), or None."""
    for function in model.functions:
        produced = {name for node in function.node for name in node.output} | set(function.input)
        for output in function.output:
            if output not in produced:
                return (
                    f"function '{function.domain}.{function.name}': output '{output}' is not "
                    "an output of any node in its body"
                )
    return None


def _opaque_copy(model: ModelProto) -> ModelProto:
    """A copy whose ai.lossgrad nodes, functions and imports use an unregistered domain."""
    copy = ModelProto()
    copy.CopyFrom(model)
    for value in (*copy.graph.input, *copy.graph.output):
        _declare_type(value)
    for tensor in external_tensors(copy):
        _detach(tensor)
    _rename_imports(copy.opset_import, needed=True)
    for node in deep_nodes(copy.graph.node):
        if node.domain == spec.DOMAIN:
            node.domain = _OPAQUE
    for function in copy.functions:
        if function.domain == spec.DOMAIN:
            function.domain = _OPAQUE
        uses = [node for node in deep_nodes(function.node) if node.domain == spec.DOMAIN]
        _rename_imports(function.opset_import, needed=bool(uses))
        for node in uses:
            node.domain = _OPAQUE
    return copy


def _detach(tensor: onnx.TensorProto) -> None:
    """An empty stand-in for a tensor stored as external data: where its data lives is not
    structure (the checker would look for the file relative to the working directory), and
    reading it is the loader's job, which keeps it inside the model's folder."""
    tensor.ClearField("external_data")
    tensor.data_location = onnx.TensorProto.DEFAULT
    del tensor.dims[:]
    tensor.dims.append(0)
    tensor.raw_data = b""


def _declare_type(value: onnx.ValueInfoProto) -> None:
    """A stand-in where the main graph's input or output has no type or shape: the checker
    requires both there, ONNX Runtime neither, and neither is structure."""
    if value.type.WhichOneof("value") is None:
        value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    if value.type.HasField("tensor_type"):
        if value.type.tensor_type.elem_type == onnx.TensorProto.UNDEFINED:
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        if not value.type.tensor_type.HasField("shape"):
            value.type.tensor_type.shape.SetInParent()


def _rename_imports(imports: Any, needed: bool) -> None:
    """The import renamed too (at version 1: its version is checked elsewhere); added where
    needed, so that a missing import is not reported as a structural flaw."""
    for i in reversed(range(len(imports))):
        if imports[i].domain == spec.DOMAIN:
            del imports[i]
            needed = True
    if needed:
        imports.append(helper.make_opsetid(_OPAQUE, 1))
