"""Kernels of the ai.lossgrad operators for onnx's ReferenceEvaluator, computing with
lossgrad_compiler.reference (the numpy oracle of docs/operators.md).

    run_reference(model, feeds)  # or reference_evaluator(model).run(None, feeds)

Both check the model's ai.lossgrad opset imports as check_model and compile_model do;
ReferenceEvaluator(model, new_ops=reference_ops()) by hand checks nothing.
An invalid call raises the spec error (a ValueError, which the evaluator lets through
unchanged), naming the node. bfloat16 values are ml_dtypes.bfloat16 arrays in onnx 1.23's
evaluator, the same representation the reference uses, so nothing is converted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from onnx import ModelProto
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from lossgrad_compiler import reference, spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.onnx.attributes import attributes_from_node
from lossgrad_compiler.onnx.inference import input_name
from lossgrad_compiler.onnx.node_errors import located
from lossgrad_compiler.onnx.opsets import check_opset_imports


class LossGradOpRun(OpRun):
    """One ai.lossgrad node; the subclass name is the op_type."""

    op_domain = spec.DOMAIN

    def _run(self, *inputs: Any, **given: Any) -> tuple[np.ndarray]:
        # `given` holds onnx's loosely converted attributes; the node's own protos are read
        # strictly instead. Only values linked from an enclosing function come from `given`.
        node = self.onnx_node
        try:
            attrs = attributes_from_node(node, linked=_linked(node, given))
            op = spec.operator(node.op_type)
            arrays: dict[str, Any] = {}
            for i, value in enumerate(inputs):
                arrays[input_name(op, i)] = value
            return (reference.evaluate(node.op_type, arrays, attrs),)
        except LossGradError as err:
            raise located(err, node.name) from None


def _linked(node: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    """Values of attributes that refer to function attributes, keyed by the referred name."""
    return {a.ref_attr_name: given[a.name] for a in node.attribute if a.ref_attr_name}


def reference_ops() -> list[type[OpRun]]:
    """One OpRun class per operator of spec.OPERATORS, for ReferenceEvaluator(new_ops=...)."""
    return [type(name, (LossGradOpRun,), {}) for name in spec.OPERATORS]


def reference_evaluator(model: ModelProto) -> ReferenceEvaluator:
    """A ReferenceEvaluator for `model` whose model-local functions see these kernels too.

    onnx 1.23 builds the evaluators of a ModelProto's functions without `new_ops`, so an
    ai.lossgrad node inside a function body would be unknown there; the functions are
    therefore given as evaluators of their own, in model order (a function may call the
    ones before it).

    The model's ai.lossgrad imports are checked first by the rule check_model and the
    compiler apply (opsets.check_opset_imports): onnx's evaluator would run a node whatever
    version its scope imports."""
    check_opset_imports(model)
    ops = reference_ops()
    if not model.functions:
        return ReferenceEvaluator(model, new_ops=ops)
    functions: list[ReferenceEvaluator] = []
    for function in model.functions:
        functions.append(ReferenceEvaluator(function, functions=list(functions), new_ops=ops))
    opsets = {o.domain: o.version for o in model.opset_import}
    return ReferenceEvaluator(model.graph, opsets=opsets, functions=functions, new_ops=ops)


def run_reference(
    model: ModelProto,
    feeds: Mapping[str, np.ndarray],
    outputs: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """Run `model` with onnx's ReferenceEvaluator and these kernels; outputs by name."""
    evaluator = reference_evaluator(model)
    names = list(outputs) if outputs is not None else list(evaluator.output_names)
    return dict(zip(names, evaluator.run(names, dict(feeds)), strict=True))
