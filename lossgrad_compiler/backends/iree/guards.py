"""Run-time size checks in front of level-2 functions, in every module the IREE target
compiles: whole models, and the modules of signatures that `evaluation.iree.evaluate`
caches and `runtime.iree.load` runs (whose callers need not have been validated).

A level-2 function assumes that the dynamic sizes on one loop are equal (a dynamic dimension
is never broadcast; docs/level2.md) and IREE compares no dynamic sizes: a call that breaks
the assumption reads past its buffers. A guard compares them with `tensor.dim` and
`cf.assert`, whose message is the project's error line with its aclnn code, and then calls
the function. IREE raises the message from the call. In a whole model the guard is
`<id>__checked`; in a module of signatures the guard is exported as `<id>` and the level-2
function becomes the private `<id>__unchecked`, so no exported function skips the check.
An exported guard of a function with value checks also says in its `iree.reflection` which
results are their counts (checks.py), for runtime.iree to raise."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, cf, func, tensor
from xdsl.dialects.builtin import IndexType, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue

from lossgrad_compiler import messages, spec
from lossgrad_compiler.backends.iree.checks import function_checks, reflect
from lossgrad_compiler.level2 import Level2Function, signature_functions

GUARD_SUFFIX = "__checked"
UNCHECKED_SUFFIX = "__unchecked"

DimEntry = tuple[int, int]  # (operand position, dimension)


def guarded_name(function_name: str) -> str:
    return function_name + GUARD_SUFFIX


def add_guards(module: ModuleOp) -> dict[str, str]:
    """Add a guard for every signature function of `module`; the guard's name by function."""
    guards = [guard_function(f) for f in signature_functions(module)]
    for guard in guards:
        module.body.block.add_op(guard)
    return {g.sym_name.data.removesuffix(GUARD_SUFFIX): g.sym_name.data for g in guards}


def guard_exports(module: ModuleOp) -> None:
    """Put every signature function of `module` behind a guard that takes over its name and
    visibility; the function itself becomes private `<name>__unchecked`."""
    for function in list(signature_functions(module)):
        wrapped = function.function
        name, visibility = wrapped.sym_name.data, wrapped.sym_visibility
        wrapped.sym_name = StringAttr(name + UNCHECKED_SUFFIX)
        wrapped.sym_visibility = StringAttr("private")
        guard = guard_function(function, name)
        guard.sym_visibility = visibility
        reflect(guard, function_checks(function))
        module.body.block.add_op(guard)


def loop_groups(function: Level2Function) -> list[list[DimEntry]]:
    """Per loop, the operand dimensions that read it (broadcast 1s read no loop)."""
    groups: list[list[DimEntry]] = [[] for _ in range(function.loops)]
    for operand in function.operands:
        for dim, loop in enumerate(operand.generic.index_map):
            if loop is not None:
                groups[loop].append((operand.position, dim))
    return groups


def guard_function(function: Level2Function, name: str | None = None) -> func.FuncOp:
    """`name` (by default `<id>__checked`): the function's type, the size checks, then the
    call."""
    wrapped = function.function
    types = list(wrapped.function_type.inputs.data)
    results = list(wrapped.function_type.outputs.data)
    block = Block(arg_types=types)
    args = block.args
    ops = []
    for loop, group in enumerate(loop_groups(function)):
        sizes = []
        for position, dim in group:
            static = function.operands[position].generic.shape[dim]
            index = arith.ConstantOp.from_int_and_width(dim, IndexType())
            if static is None:
                size = tensor.DimOp(args[position], index)
                ops += [index, size]
                sizes.append(((position, dim), size.result))
            else:
                constant = arith.ConstantOp.from_int_and_width(static, IndexType())
                ops.append(constant)
                sizes.append(((position, dim), constant.result))
        first_entry, first = sizes[0] if sizes else (None, None)
        for entry, size in sizes[1:]:
            assert first_entry is not None and first is not None
            equal = arith.CmpiOp(first, size, "eq")
            message = mismatch_message(
                function.op.name, loop, first_entry, entry, function.input_names
            )
            ops += [equal, cf.AssertOp(equal, message)]
    ops += class_count_check(function, args)
    operands = [SSAValue.get(a) for a in args[: len(types)]]
    call = func.CallOp(wrapped.sym_name.data, operands, results)
    ops += [call, func.ReturnOp(*call.results)]
    block.add_ops(ops)
    guard_name = name or guarded_name(wrapped.sym_name.data)
    guard = func.FuncOp(guard_name, (types, results), Region(block))
    guard.sym_visibility = wrapped.sym_visibility
    return guard


def class_count_check(function: Level2Function, args: Sequence[SSAValue]) -> list[Operation]:
    """`C >= min_classes` for a dynamic class dimension (spec's classes rule: the gather of
    an invalid row reads class 0, so it needs one)."""
    op = function.op
    x = function.operand("self")
    if not op.has_classes or op.min_classes == 0 or x is None:
        return []
    axis = op.class_dim(x.generic.rank)
    if x.generic.shape[axis] is not None:
        return []  # a static C was checked when the call was validated
    index = arith.ConstantOp.from_int_and_width(axis, IndexType())
    size = tensor.DimOp(args[x.position], index)
    least = arith.ConstantOp.from_int_and_width(op.min_classes, IndexType())
    enough = arith.CmpiOp(size, least, "uge")
    shape = tuple("?" for _ in range(x.generic.rank))
    message = messages.CLASS_SHAPE(
        op.name, input="self", shape=shape, expected=f"C >= {op.min_classes} along dimension "
        f"{axis}", self_shape=shape,
    )  # fmt: skip
    return [index, size, least, enough, cf.AssertOp(enough, str(message))]


def mismatch_message(
    op: str,
    loop: int,
    first: DimEntry,
    other: DimEntry,
    inputs: tuple[str, ...] = spec.INPUT_NAMES,
) -> str:
    """The error line raised when two sizes of one loop differ at run time (`inputs`: the
    names of the function's operands, the inputs given)."""
    a, b = (f"{inputs[p]} dimension {d}" for p, d in (first, other))
    names = ", ".join(dict.fromkeys(inputs[p] for p, _ in (first, other)))
    return str(messages.DYNAMIC_SIZES(op, inputs=names, first=a, second=b, loop=loop))
