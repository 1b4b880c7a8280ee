"""Functions mode: every ai.lossgrad node stays and calls a model-local FunctionProto of its
signature through `overload` (IR 10).

Stock ONNX Runtime inlines the function; with the native kernel library registered, the
kernel runs instead, from the same file. The node keeps all its attributes (defaults written
out) for the kernels and onnx's ReferenceEvaluator; the body has the signature's attribute
values built in. Everything else in the model is left as it is."""

from __future__ import annotations

from collections.abc import Mapping

from onnx import FunctionProto, ModelProto, helper

from lossgrad_compiler import spec
from lossgrad_compiler.backends.onnx.inline import apply_inline
from lossgrad_compiler.backends.onnx.opsets import (
    FUNCTIONS_IR_VERSION,
    ensure_import,
    onnx_opset,
)
from lossgrad_compiler.backends.onnx.translator import TranslatedFunction
from lossgrad_compiler.frontend import ImportedModel, Signature, Site
from lossgrad_compiler.onnx.attributes import attribute_proto


def signature_function(
    signature: Signature, translated: TranslatedFunction, opset: int
) -> FunctionProto:
    """The FunctionProto (domain ai.lossgrad, name = op_type, overload = signature id)."""
    return helper.make_function(
        spec.DOMAIN,
        signature.op_type,
        list(translated.inputs),
        list(translated.outputs),
        list(translated.nodes),
        opset_imports=[helper.make_opsetid("", opset)],
        attributes=[a.name for a in signature.op.attributes],
        overload=signature.id,
    )


def apply_functions(
    imported: ImportedModel, bodies: Mapping[str, TranslatedFunction]
) -> ModelProto:
    """Functions mode, in place: nodes get `overload` and explicit attributes, the model one
    FunctionProto per signature (replacing one of the same overload from an earlier run).

    Nodes inside model-local functions are inlined instead: ONNX Runtime (1.31) ignores
    `overload` when it resolves a call made from a function body."""
    model = imported.model
    opset = onnx_opset(model)
    nested = [site for site in imported.sites if site.in_function]
    if nested:
        apply_inline(imported, bodies, nested)
    signatures: dict[str, Signature] = {}
    for site in imported.sites:
        if not site.in_function:
            site.node.overload = site.signature.id
            _write_missing_attributes(site)
            _drop_trailing_absent(site)
            signatures[site.signature.id] = site.signature
    new = {
        (spec.DOMAIN, s.op_type, sid): signature_function(s, bodies[sid], opset)
        for sid, s in signatures.items()
    }
    for i in reversed(range(len(model.functions))):
        f = model.functions[i]
        if (f.domain, f.name, f.overload) in new:
            del model.functions[i]
    model.functions.extend(new.values())
    ensure_import(model.opset_import, "", opset)
    if new:
        version = spec.opset_version_for(s.op_type for s in signatures.values())
        ensure_import(model.opset_import, spec.DOMAIN, version)
        model.ir_version = max(model.ir_version, FUNCTIONS_IR_VERSION)
    return model


def _drop_trailing_absent(site: Site) -> None:
    """A call lists exactly the function's inputs: trailing "" (absent optional inputs
    after the last one given) are left out, as ONNX allows."""
    while site.node.input and not site.node.input[-1]:
        del site.node.input[-1]


def _write_missing_attributes(site: Site) -> None:
    """Spell out defaulted attributes, so every consumer (onnx's ReferenceEvaluator, the
    native kernels) sees the values the signature was compiled for."""
    present = {a.name for a in site.node.attribute}
    for attribute in site.signature.op.attributes:
        if attribute.name not in present:
            site.node.attribute.append(attribute_proto(attribute, site.call.attrs[attribute.name]))
