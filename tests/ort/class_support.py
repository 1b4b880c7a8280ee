"""Single-node models of the classification operators for the native kernel tests, built
with onnx.helper from a tests.helpers.class_cases case (every input a graph input, the
node's attributes as given)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import ModelProto, TensorProto, helper

from lossgrad_compiler import spec
from lossgrad_compiler.runtime.ort_io import run_session
from tests.helpers.class_cases import ClassCase
from tests.ort.support import native_session


def class_model(
    op_type: str,
    inputs: dict[str, np.ndarray],
    attrs: dict[str, Any],
    result: Any = None,
) -> ModelProto:
    """One ai.lossgrad node over graph inputs named as the op's inputs; output `out` of
    self's element type (or `result`'s)."""
    op = spec.operator(op_type)
    names = [n for n in op.input_names if n in inputs]
    listed = [n if n in inputs else "" for n in op.input_names]
    while listed and not listed[-1]:
        listed.pop()
    node = helper.make_node(op_type, listed, ["out"], domain=spec.DOMAIN, **attrs)
    graph_inputs = [
        helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(inputs[n].dtype), [None] * inputs[n].ndim
        )
        for n in names
    ]
    out_type = (
        result if result is not None else helper.np_dtype_to_tensor_dtype(inputs["self"].dtype)
    )
    output = helper.make_tensor_value_info("out", out_type, None)
    graph = helper.make_graph([node], "g", graph_inputs, [output])
    return helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", 21),
            helper.make_opsetid(spec.DOMAIN, spec.OPSET_VERSION),
        ],
        ir_version=10,
    )


def run_class(op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    """The native kernel's result for one call (ORT's error propagates)."""
    session: ort.InferenceSession = native_session(class_model(op_type, inputs, attrs))
    return run_session(session, dict(inputs))[0]


def run_case(case: ClassCase) -> np.ndarray:
    return run_class(case.op_type, case.inputs, case.attrs)


__all__ = ["TensorProto", "class_model", "run_case", "run_class"]
