"""ONNX models of the classification cases (tests/helpers/class_cases.py): one ai.lossgrad
node reading the case's present inputs, declared with their static shapes or with symbolic
ones (the model then serves every batch, class count and image size)."""

from __future__ import annotations

import numpy as np
import onnx

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from tests.helpers.class_cases import ClassCase

VALUE_NAMES: dict[str, str] = {
    "grad_output": "go",
    "self": "x",
    "target": "t",
    "total_weight": "tw",
    "weight": "w",
}
"""The graph input of each operator input."""

SELF_SYMBOLS: dict[int, tuple[str, ...]] = {1: ("C",), 2: ("N", "C"), 4: ("N", "C", "H", "W")}
"""self's symbolic dimensions per rank."""


def declared_shape(case: ClassCase, name: str, symbolic: bool) -> list[int | str]:
    """The shape a model declares for input `name`: the array's, or with `symbolic` every
    dimension a name except those of a one-element input (grad_output of a reduced loss,
    total_weight), which keeps its static shape."""
    shape: list[int | str] = list(case.inputs[name].shape)
    if not symbolic:
        return shape
    rank = case.inputs["self"].ndim
    dims = SELF_SYMBOLS[rank]
    c = spec.operator(case.op_type).class_dim(rank)
    rows = [*dims[:c], *dims[c + 1 :]]
    per_element = case.attrs["reduction"] == "none" and rank >= 2
    return {
        "self": list(dims),
        "target": rows,
        "weight": [dims[c]],
        "grad_output": rows if per_element else shape,
        "total_weight": shape,
    }[name]


def class_node(case: ClassCase, name: str = "n") -> onnx.NodeProto:
    inputs = {n: VALUE_NAMES[n] for n in case.present}
    return lo.make_node(case.op_type, inputs, "g", name=name, **case.attrs)


def class_model(case: ClassCase, *, symbolic: bool = False, name: str = "n") -> onnx.ModelProto:
    """A one-node model of the case; its output's type comes from the schema's inference."""
    inputs = [
        (VALUE_NAMES[n], case.inputs[n].dtype, declared_shape(case, n, symbolic))
        for n in case.present
    ]
    return lo.make_model(lo.make_graph([class_node(case, name)], inputs, ["g"]))


def class_feeds(case: ClassCase) -> dict[str, np.ndarray]:
    return {VALUE_NAMES[n]: case.inputs[n] for n in case.present}
