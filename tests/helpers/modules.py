"""Modules tests build from cases: one lossgrad-level function per call, with the call's
static shapes or as its signature (every dim dynamic but a broadcast 1)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, ModuleOp, TensorType
from xdsl.ir import Block, Region

from lossgrad_compiler import spec
from lossgrad_compiler.dialects.lossgrad import MLIR_FLOAT_TYPES, make_op
from tests.helpers.cases import Case


def signature_shape(shape: tuple[int, ...], iteration: tuple[int, ...]) -> list[int]:
    """The frontend's signature form: every dim dynamic except a broadcast static 1."""
    offset = len(iteration) - len(shape)
    return [
        1 if d == 1 and iteration[offset + j] != 1 else DYNAMIC_INDEX for j, d in enumerate(shape)
    ]


def case_function(case: Case, *, dynamic: bool, name: str = "f") -> func.FuncOp:
    """`func.func @name(grad_output, self, target, <optional inputs given>)` returning the
    op's result, lossgrad level."""
    iteration = tuple(case.checked.iteration_shape)  # type: ignore[arg-type]
    types = []
    for input_name in case.checked.present:
        array = case.inputs[input_name]
        shape = signature_shape(array.shape, iteration) if dynamic else list(array.shape)
        types.append(TensorType(MLIR_FLOAT_TYPES[spec.float_type(array.dtype).mlir], shape))
    block = Block(arg_types=types)
    attrs = spec.check_attributes(spec.operator(case.op_type), case.attrs)
    op = make_op(case.op_type, dict(zip(case.checked.present, block.args, strict=True)), attrs)
    block.add_ops([op, func.ReturnOp(op.result)])
    return func.FuncOp(name, (types, [op.result.type]), Region(block))


def build_module(case: Case, *, dynamic: bool) -> ModuleOp:
    """A module of one function `@f` for the case."""
    return ModuleOp([case_function(case, dynamic=dynamic)])


def cases_module(cases: Sequence[Case], *, dynamic: bool) -> ModuleOp:
    """One function per case, `@f0`, `@f1`, ..., in the cases' order."""
    return ModuleOp([case_function(c, dynamic=dynamic, name=f"f{k}") for k, c in enumerate(cases)])
