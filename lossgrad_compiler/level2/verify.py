"""`verify_level2`: the first op outside docs/level2.md, as a Level2ContractError."""

from __future__ import annotations

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerType, ModuleOp, TensorType
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Operation

from lossgrad_compiler.dialects.lossgrad import element_float_type
from lossgrad_compiler.level2.analysis import analyze_function, analyze_generic
from lossgrad_compiler.level2.contract import (
    BODY_OPS,
    CONTRACT_INTEGER_PREDICATES,
    CONTRACT_PREDICATES,
    FUNCTION_OPS,
    Level2ContractError,
    constant_value,
    predicate_of,
)
from lossgrad_compiler.level2.identity import OP_TYPE_ATTR


def verify_level2(module: ModuleOp, body_ops: frozenset[type[Operation]] = BODY_OPS) -> None:
    """Raise Level2ContractError at the first op outside docs/level2.md. `body_ops` widens
    the body op set for tests of a new op."""
    for op in module.ops:
        if not isinstance(op, func.FuncOp):
            raise Level2ContractError(op, "a level-2 module holds only func.func")
        verify_function(op, body_ops)


def verify_function(function: func.FuncOp, body_ops: frozenset[type[Operation]] = BODY_OPS) -> None:
    where = function.sym_name.data
    if not function.body.blocks:
        raise Level2ContractError(function, "must have a body", where)
    scalar_ops = body_ops - {YieldOp}
    for op in function.body.block.ops:
        if type(op) not in (FUNCTION_OPS | scalar_ops):
            raise Level2ContractError(op, "is not in the level-2 op list", where)
        _verify_scalar(op, where)
        if isinstance(op, GenericOp):
            analyze_generic(op)
            for inner in op.body.block.ops:
                if type(inner) not in body_ops:
                    raise Level2ContractError(inner, "is not a level-2 body op", where)
                _verify_scalar(inner, where)
    if OP_TYPE_ATTR in function.attributes:
        analyze_function(function)


def _verify_scalar(op: Operation, where: str) -> None:
    if isinstance(op, arith.CmpfOp) and predicate_of(op).name not in CONTRACT_PREDICATES:
        allowed = ", ".join(sorted(CONTRACT_PREDICATES))
        raise Level2ContractError(
            op, f"predicate '{predicate_of(op).name}' is not level 2 (one of {allowed})", where
        )
    if isinstance(op, arith.CmpiOp):
        name = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        if name not in CONTRACT_INTEGER_PREDICATES:
            allowed = ", ".join(sorted(CONTRACT_INTEGER_PREDICATES))
            raise Level2ContractError(
                op, f"predicate '{name}' is not level 2 (one of {allowed}: targets are signed)",
                where,
            )
    if isinstance(op, arith.ConstantOp):
        constant_value(op)
    for result in op.results:
        t = result.type
        if not (
            element_float_type(t) is not None or isinstance(t, (IndexType, IntegerType, TensorType))
        ):
            raise Level2ContractError(op, f"result type {t} is not level 2", where)
