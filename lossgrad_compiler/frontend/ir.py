"""Signatures as level-1 IR: one `func.func` holding one lossgrad op per signature, named by
the signature id, with the argument types docs/level2.md describes (every dimension dynamic
except a broadcast 1, or a classification operator's one-element inputs)."""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, ModuleOp, TensorType, i32, i64
from xdsl.ir import Attribute, Block, Region

from lossgrad_compiler import spec
from lossgrad_compiler.dialects.lossgrad import MLIR_FLOAT_TYPES, make_op
from lossgrad_compiler.frontend.signature import Signature

MLIR_ELEMENT_TYPES: dict[str, Attribute] = {
    **MLIR_FLOAT_TYPES,
    spec.INT64.mlir: i64,
    spec.INT32.mlir: i32,
}
"""spec's FloatType.mlir and IndexType.mlir → the xDSL builtin type (class indices are
signless integers)."""


def argument_types(signature: Signature) -> list[TensorType]:
    """The types of the signature's present inputs, in the operator's order."""
    return [
        TensorType(
            MLIR_ELEMENT_TYPES[element.mlir], [1 if d == 1 else DYNAMIC_INDEX for d in pattern]
        )
        for element, pattern in zip(
            signature.present_types, signature.present_patterns, strict=True
        )
    ]


def signature_function(signature: Signature) -> func.FuncOp:
    """`func.func @<id>(%grad_output, %self, %target, <present optional inputs>)` returning
    the lossgrad op's result."""
    block = Block(arg_types=argument_types(signature))
    for arg, name in zip(block.args, signature.present, strict=True):
        arg.name_hint = name
    op = make_op(
        signature.op_type,
        dict(zip(signature.present, block.args, strict=True)),
        signature.attributes,
    )
    block.add_ops([op, func.ReturnOp(op.result)])
    return func.FuncOp(signature.id, (block.arg_types, [op.result.type]), Region(block))


def lossgrad_module(signatures: Iterable[Signature]) -> ModuleOp:
    """A module with one function per signature (each signature once)."""
    unique = {s.id: s for s in signatures}
    return ModuleOp([signature_function(s) for s in unique.values()])
