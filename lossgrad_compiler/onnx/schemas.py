"""onnx OpSchemas of the ai.lossgrad operators, built from spec.OPERATORS.

Registration is process-global in onnx; register_schemas() replaces earlier registrations,
so it also picks up a changed spec (the spec-sources test relies on that)."""

from __future__ import annotations

from onnx import defs
from onnx.defs import OpSchema

from lossgrad_compiler import spec
from lossgrad_compiler.onnx.attributes import attribute_proto
from lossgrad_compiler.onnx.inference import inference_function

_GRAD_OUTPUT_DOC = "Gradient of the loss; broadcasts to the iteration shape."


CLASS_FLOAT_PARAM = "T"
"""A classification operator's type parameter of every float input and the result: all of
self's type (spec.check_same_types)."""
CLASS_INDEX_PARAM = "Tind"
"""A classification operator's type parameter of its class-index input (int64 or int32)."""


def type_params(op: spec.OperatorSpec) -> dict[str, str]:
    """The type parameter of each input, by input name: for the elementwise operators one per
    input (mixed element types are allowed), T0, T1, ... in input order; for the
    classification operators T for the float inputs and Tind for the class indices."""
    if op.has_classes:
        return {
            i.name: CLASS_INDEX_PARAM if i.kind is spec.InputKind.CLASS_INDEX else CLASS_FLOAT_PARAM
            for i in op.inputs
        }
    return {i.name: f"T{k}" for k, i in enumerate(op.inputs)}


def _allowed(param_kind: spec.InputKind) -> tuple[list[str], str]:
    """A type constraint's ONNX type strings and its description."""
    types: tuple[spec.FloatType | spec.IndexType, ...] = (
        spec.INDEX_TYPES if param_kind is spec.InputKind.CLASS_INDEX else spec.FLOAT_TYPES
    )
    return [t.onnx_type_str for t in types], ", ".join(t.name for t in types)


def promoted_type_param(op: spec.OperatorSpec) -> str:
    """The type parameter of a result whose type is the promotion of the inputs (the
    inference sets it exactly): the one after the inputs' (T3 for three inputs)."""
    return f"T{len(op.inputs)}"


def build_schema(op: spec.OperatorSpec) -> OpSchema:
    """The OpSchema of one operator, with spec's names, attributes, defaults and inference,
    at the ai.lossgrad version that introduced it."""
    params = type_params(op)
    result_param = params.get(op.differentiates, promoted_type_param(op))
    kinds = {params[i.name]: i.kind for i in op.inputs}
    kinds.setdefault(result_param, spec.InputKind.FLOAT)
    schema = OpSchema(
        op.name,
        spec.DOMAIN,
        op.since_version,
        doc=_doc(op),
        inputs=[_formal_parameter(i, params[i.name]) for i in op.inputs],
        outputs=[OpSchema.FormalParameter(op.output, result_param, _output_doc(op))],
        type_constraints=[(p, *_allowed(kind)) for p, kind in kinds.items()],
        attributes=[
            OpSchema.Attribute(a.name, attribute_proto(a, a.default), f"{a.doc} Valid: {a.rule()}.")
            for a in op.attributes
        ],
        node_determinism=OpSchema.NodeDeterminism.Deterministic,
    )
    schema.set_type_and_shape_inference_function(inference_function(op.name))
    return schema


def _formal_parameter(spec_input: spec.InputSpec, type_param: str) -> OpSchema.FormalParameter:
    doc = _GRAD_OUTPUT_DOC if spec_input.name == "grad_output" else spec_input.doc
    option = (
        OpSchema.FormalParameterOption.Optional
        if spec_input.optional
        else OpSchema.FormalParameterOption.Single
    )
    return OpSchema.FormalParameter(spec_input.name, type_param, doc, param_option=option)


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
    for op in spec.OPERATORS.values():
        if defs.has(op.name, spec.DOMAIN):
            defs.deregister_schema(op.name, op.since_version, spec.DOMAIN)


def ensure_schemas() -> None:
    """Register the schemas unless every operator already has one (cheap to call often)."""
    if not all(defs.has(name, spec.DOMAIN) for name in spec.OPERATORS):
        register_schemas()


def get_schema(op_type: str) -> OpSchema:
    """The registered schema of `op_type` (registering first if needed)."""
    ensure_schemas()
    op = spec.operator(op_type)
    return defs.get_schema(op.name, op.since_version, spec.DOMAIN)
