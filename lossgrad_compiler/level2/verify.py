"""`verify_level2`: the first op outside docs/level2.md, as a Level2ContractError."""

from __future__ import annotations

from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import IndexType, IntegerType, ModuleOp, TensorType
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Block, Operation, SSAValue

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
                if isinstance(inner, tensor.ExtractOp):
                    _verify_gather(inner, op.body.block, where)
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


def _conjuncts(condition: SSAValue) -> list[Operation]:
    """The ops an i1 is the `andi` of (itself where it is no `andi`)."""
    owner = condition.owner
    if isinstance(owner, arith.AndIOp):
        return _conjuncts(owner.lhs) + _conjuncts(owner.rhs)
    return [owner] if isinstance(owner, Operation) else []


def _compares(op: Operation, predicate: str, lhs: SSAValue) -> SSAValue | None:
    """The right-hand side of `cmpi predicate, lhs, rhs`, else None."""
    if not isinstance(op, arith.CmpiOp) or op.lhs != lhs:
        return None
    name = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    return SSAValue.get(op.rhs) if name == predicate else None


def _is_integer(value: SSAValue | None, expected: int | None = None) -> int | None:
    owner = value.owner if value is not None else None
    if isinstance(owner, arith.ConstantOp):
        found = int(constant_value(owner))
        return found if expected is None or found == expected else None
    return None


def _bounds_source(bound: SSAValue, size: int | None, body: Block) -> bool:
    """Whether `bound` is at most the gathered tensor's size: a constant not above a static
    size, or a class count from above the body (`index_cast` of `tensor.dim`), which the
    classes rule makes the weight's size (checked before a kernel runs)."""
    static = _is_integer(bound)
    if static is not None:
        return size is not None and 0 <= static <= size
    owner = bound.owner
    return (
        isinstance(owner, arith.IndexCastOp)
        and owner.parent_block() is not body
        and isinstance(SSAValue.get(owner.input).owner, tensor.DimOp)
    )


def _verify_gather(op: tensor.ExtractOp, body: Block, where: str) -> None:
    """A gather reads a rank-1 tensor from above at `index_cast(select(%c, %t, 0))`, %c the
    `andi` of `%t >= 0` and `%t < n` (and anything else), n at most the tensor's size: the
    index is in range whatever %t holds."""
    source = SSAValue.get(op.tensor)
    source_type = source.type
    rule = (
        "a gather reads a rank-1 tensor from above the body at index_cast(select(%c, %t, 0)), "
        "%c the andi of (%t sge 0) and (%t slt n), n at most the tensor's size"
    )
    owner = source.owner
    defined_in = owner if isinstance(owner, Block) else owner.parent_block()
    if (
        defined_in is body
        or not isinstance(source_type, TensorType)
        or len(source_type.get_shape()) != 1
        or len(op.indices) != 1
    ):
        raise Level2ContractError(op, rule, where)
    cast = SSAValue.get(op.indices[0]).owner
    select = SSAValue.get(cast.input).owner if isinstance(cast, arith.IndexCastOp) else None
    if not isinstance(select, arith.SelectOp) or _is_integer(select.rhs, 0) is None:
        raise Level2ContractError(op, rule, where)
    t = SSAValue.get(select.lhs)
    conjuncts = _conjuncts(SSAValue.get(select.cond))
    size = source_type.get_shape()[0]
    lower = any(_is_integer(_compares(c, "sge", t), 0) is not None for c in conjuncts)
    upper = any(
        (bound := _compares(c, "slt", t)) is not None
        and _bounds_source(bound, size if size >= 0 else None, body)
        for c in conjuncts
    )
    if not (lower and upper):
        raise Level2ContractError(op, rule, where)
