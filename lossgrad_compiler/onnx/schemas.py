"""onnx OpSchemas of the ai.lossgrad operators, built from spec.OPERATORS.

Registration is process-global in onnx; register_schemas() replaces earlier registrations,
so it also picks up a changed spec (the spec-sources test relies on that)."""

from __future__ import annotations

from onnx import defs
from onnx.defs import OpSchema

from lossgrad_compiler import spec
from lossgrad_compiler.onnx.attributes import attribute_proto
from lossgrad_compiler.onnx.inference import inference_function

# One type parameter per input (mixed element types are allowed) and one for a result whose
# type is the promotion of all three (SmoothL1LossBackward); the inference sets it exactly.
INPUT_TYPE_PARAMS: dict[str, str] = dict(zip(spec.INPUT_NAMES, ("T0", "T1", "T2"), strict=True))
PROMOTED_TYPE_PARAM = "T3"

_INPUT_DOCS = {
    "grad_output": "Gradient of the loss; broadcasts to the iteration shape.",
    "self": "The loss function's input.",
    "target": "The loss function's target.",
}


def build_schema(op: spec.OperatorSpec) -> OpSchema:
    """The OpSchema of one operator, with spec's names, attributes, defaults and inference."""
    result_param = INPUT_TYPE_PARAMS.get(op.differentiates, PROMOTED_TYPE_PARAM)
    params = [*INPUT_TYPE_PARAMS.values()]
    if result_param == PROMOTED_TYPE_PARAM:
        params.append(PROMOTED_TYPE_PARAM)
    float_types = [t.onnx_type_str for t in spec.FLOAT_TYPES]
    allowed = ", ".join(t.name for t in spec.FLOAT_TYPES)
    schema = OpSchema(
        op.name,
        spec.DOMAIN,
        spec.OPSET_VERSION,
        doc=_doc(op),
        inputs=[
            OpSchema.FormalParameter(name, INPUT_TYPE_PARAMS[name], _INPUT_DOCS[name])
            for name in spec.INPUT_NAMES
        ],
        outputs=[OpSchema.FormalParameter(op.output, result_param, _output_doc(op))],
        type_constraints=[(p, float_types, allowed) for p in params],
        attributes=[
            OpSchema.Attribute(a.name, attribute_proto(a, a.default), f"{a.doc} Valid: {a.rule()}.")
            for a in op.attributes
        ],
        node_determinism=OpSchema.NodeDeterminism.Deterministic,
    )
    schema.set_type_and_shape_inference_function(inference_function(op.name))
    return schema


def _doc(op: spec.OperatorSpec) -> str:
    return f"{op.doc} Follows {op.aclnn}; its contract: lossgrad_compiler's operator documentation."


def _output_doc(op: spec.OperatorSpec) -> str:
    if op.differentiates:
        return f"Shape and element type of {op.differentiates}."
    return "Shape broadcast(grad_output, self, target); the promoted element type of the inputs."


def register_schemas() -> list[OpSchema]:
    """Register (or re-register) every operator of spec.OPERATORS with onnx; idempotent."""
    deregister_schemas()
    schemas = [build_schema(op) for op in spec.OPERATORS.values()]
    for schema in schemas:
        defs.register_schema(schema)
    return schemas


def deregister_schemas() -> None:
    """Remove the ai.lossgrad schemas of spec.OPERATORS from onnx's registry, if present."""
    for name in spec.OPERATORS:
        if defs.has(name, spec.DOMAIN):
            defs.deregister_schema(name, spec.OPSET_VERSION, spec.DOMAIN)


def ensure_schemas() -> None:
    """Register the schemas unless every operator already has one (cheap to call often)."""
    if not all(defs.has(name, spec.DOMAIN) for name in spec.OPERATORS):
        register_schemas()


def get_schema(op_type: str) -> OpSchema:
    """The registered schema of `op_type` (registering first if needed)."""
    ensure_schemas()
    return defs.get_schema(spec.operator(op_type).name, spec.OPSET_VERSION, spec.DOMAIN)
