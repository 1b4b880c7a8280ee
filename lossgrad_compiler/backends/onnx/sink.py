"""Collects the ONNX nodes of one translated function: fresh names, shared constants, and the
few multi-node idioms (element counts, run-time shapes) the translation rules need."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from lossgrad_compiler.backends.onnx.values import DimOf, IndexProduct, ScalarConstant, ShapeEntry


class NodeSink:
    """The nodes of one function body, in topological order, with names `<prefix>t<k>_<hint>`.

    Constants and `Shape` nodes are created once per distinct value."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.nodes: list[NodeProto] = []
        self._counter = 0
        self._constants: dict[tuple[Any, ...], str] = {}
        self._shapes: dict[str, str] = {}
        self._shared: dict[tuple[Any, ...], str] = {}

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{self.prefix}t{self._counter}_{hint}"

    def add(self, op_type: str, inputs: Sequence[str], hint: str = "", **attrs: Any) -> str:
        """Append a node with one output and return the output's name."""
        out = self.fresh(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def add_shared(self, op_type: str, inputs: Sequence[str], hint: str = "", **attrs: Any) -> str:
        """`add`, unless the same node (op, inputs, attributes) exists: then its output."""
        key = (op_type, tuple(inputs), tuple(sorted(attrs.items())))
        name = self._shared.get(key)
        if name is None:
            name = self._shared[key] = self.add(op_type, inputs, hint, **attrs)
        return name

    def constant(self, array: np.ndarray, hint: str = "const") -> str:
        """A Constant node holding `array` (shared between equal constants)."""
        key = (array.dtype.str, array.shape, array.tobytes())
        name = self._constants.get(key)
        if name is None:
            name = self.fresh(hint)
            value = numpy_helper.from_array(array, name)
            self.nodes.append(helper.make_node("Constant", [], [name], name=name, value=value))
            self._constants[key] = name
        return name

    def scalar(self, value: ScalarConstant) -> str:
        """A rank-0 constant of the ONNX element type of `value`."""
        dtype = helper.tensor_dtype_to_np_dtype(value.elem)
        return self.constant(np.array(value.value, dtype=dtype), "scalar")

    def int64s(self, values: Sequence[int]) -> str:
        return self.constant(np.array(list(values), dtype=np.int64), "ints")

    def shape_of(self, tensor: str) -> str:
        name = self._shapes.get(tensor)
        if name is None:
            name = self._shapes[tensor] = self.add("Shape", [tensor], "shape")
        return name

    def element_count(self, product: IndexProduct) -> str:
        """A rank-0 int64 tensor holding the value of `product`.

        The dimensions of one tensor are read from its `Shape` (a `Gather` picks them unless
        all are needed) and multiplied by `ReduceProd`; `Size` would be one node less, but
        ONNX Runtime's CPU provider has no bfloat16 `Size` kernel."""
        factors: list[str] = []
        for tensor, dims in _group_by_tensor(product.dims):
            rank = dims[0].rank
            positions = sorted(d.dim for d in dims)
            shape = self.shape_of(tensor)
            if len(positions) == 1:
                index = self.constant(np.array(positions[0], dtype=np.int64), "index")
                factors.append(self.add("Gather", [shape, index], "dim", axis=0))
                continue
            if positions != list(range(rank)):
                shape = self.add("Gather", [shape, self.int64s(positions)], "dims", axis=0)
            factors.append(self.add("ReduceProd", [shape], "numel", keepdims=0))
        if product.factor != 1 or not factors:
            factors.append(self.constant(np.array(product.factor, dtype=np.int64), "index"))
        result = factors[0]
        for factor in factors[1:]:
            result = self.add("Mul", [result, factor], "numel")
        return result

    def expand(self, value: str, shape: str, rank: int) -> str:
        """`value` broadcast to `shape` (a 1-D int64 tensor of `rank` entries).

        Two workarounds for ONNX Runtime (1.31, CPU) are built in:

        * When `value` is the result of a Cast that nothing else reads, the Cast moves after
          the broadcast (the two commute): there is no bfloat16 `Expand` kernel, and the
          narrowing cast is the last op of a level-2 body.
        * `Expand` is followed by a `Slice` to the same shape, a no-op by the ONNX standard.
          ORT's ExpandElimination removes an Expand whose constant target shape has a 0
          where the input has a 1 (it takes the 0 for a 1), which shapes with a static empty
          dimension trigger; the Slice then still cuts the result to the right size."""
        producer = next((n for n in self.nodes if value in n.output), None)
        readers = [n for n in self.nodes if value in n.input]
        narrowing = producer is not None and producer.op_type == "Cast" and not readers
        if narrowing:
            self.nodes.remove(producer)
            value = producer.input[0]
        expanded = self.add("Expand", [value, shape], "expanded")
        starts = self.int64s([0] * rank)
        result = self.add("Slice", [expanded, starts, shape], "expanded")
        if narrowing:
            (to,) = (a.i for a in producer.attribute if a.name == "to")
            result = self.cast(result, to)
        return result

    def shape(self, entries: Sequence[ShapeEntry]) -> str:
        """A 1-D int64 tensor holding a shape: Constant pieces for static sizes, `Shape` (or a
        `Gather` of it) for sizes read from one tensor, joined by `Concat` when mixed."""
        pieces: list[str] = []
        for run in _runs(entries):
            first = run[0]
            if isinstance(first, int):
                pieces.append(self.int64s([e for e in run if isinstance(e, int)]))
                continue
            dims = [e.dim for e in run if isinstance(e, DimOf)]
            whole = self.shape_of(first.tensor)
            if dims == list(range(first.rank)):
                pieces.append(whole)
            else:
                pieces.append(self.add("Gather", [whole, self.int64s(dims)], "dims", axis=0))
        if not pieces:
            return self.int64s([])
        if len(pieces) == 1:
            return pieces[0]
        return self.add("Concat", pieces, "shape", axis=0)

    def cast(self, tensor: str, elem: int) -> str:
        return self.add("Cast", [tensor], "cast", to=elem)


def _group_by_tensor(dims: Sequence[DimOf]) -> list[tuple[str, list[DimOf]]]:
    groups: dict[str, list[DimOf]] = {}
    for d in dims:
        groups.setdefault(d.tensor, []).append(d)
    return list(groups.items())


def _runs(entries: Sequence[ShapeEntry]) -> list[list[ShapeEntry]]:
    """Maximal runs of static sizes, or of sizes read from the same tensor."""
    runs: list[list[ShapeEntry]] = []
    for entry in entries:
        key = None if isinstance(entry, int) else entry.tensor
        if runs:
            last = runs[-1][0]
            if key == (None if isinstance(last, int) else last.tensor):
                runs[-1].append(entry)
                continue
        runs.append([entry])
    return runs


BOOL = TensorProto.BOOL
INT64 = TensorProto.INT64
