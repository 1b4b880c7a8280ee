"""The ai.lossgrad operators in onnx: schemas with spec-driven inference, node and model
builders, a checker that reports aclnn codes, and kernels for onnx's ReferenceEvaluator."""

from lossgrad_compiler.onnx.attributes import (
    attribute_protos,
    attributes_from_node,
    attributes_from_protos,
)
from lossgrad_compiler.onnx.builders import (
    IR_VERSION,
    ONNX_OPSET,
    make_graph,
    make_model,
    make_node,
    opset_imports,
    value_info,
)
from lossgrad_compiler.onnx.checking import check_model, lossgrad_nodes, validate_node
from lossgrad_compiler.onnx.reference_kernels import (
    reference_evaluator,
    reference_ops,
    run_reference,
)
from lossgrad_compiler.onnx.schemas import (
    deregister_schemas,
    ensure_schemas,
    get_schema,
    register_schemas,
)

__all__ = [
    "IR_VERSION",
    "ONNX_OPSET",
    "attribute_protos",
    "attributes_from_node",
    "attributes_from_protos",
    "check_model",
    "deregister_schemas",
    "ensure_schemas",
    "get_schema",
    "lossgrad_nodes",
    "make_graph",
    "make_model",
    "make_node",
    "opset_imports",
    "reference_evaluator",
    "reference_ops",
    "register_schemas",
    "run_reference",
    "validate_node",
    "value_info",
]
