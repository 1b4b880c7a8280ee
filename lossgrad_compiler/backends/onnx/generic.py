"""`linalg.generic` → ONNX: indexing maps become ONNX broadcasting, reduction iterators a
`ReduceSum`.

The maps of level 2 are right-aligned: an operand of rank r reads `d{n-r+j}` (or the constant
0 at a static size-1 dimension) in its dimension j, which is exactly how ONNX aligns
dimensions, so operands enter the body unchanged. The body's scalar ops then run on whole
tensors. Each value records the iteration axes along which it has the full extent; an
`Expand` is added only where the result must have an extent that no operand of its
computation had (a reduction over an axis the summand does not vary along, or an output
axis the body never reads).

All of this relies on level 2's rule that the dynamic sizes on one loop are equal at run
time, so the sizes the loops equate are checked first (size_check.py): a call that breaks
the rule fails in ONNX Runtime instead of returning numbers for other shapes."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap

from lossgrad_compiler.backends.onnx.size_check import (
    SizePair,
    emit_size_check,
    equal_size_pairs,
    gate,
)
from lossgrad_compiler.backends.onnx.translator import Translator, rule
from lossgrad_compiler.backends.onnx.types import Level2TranslationError, static_shape
from lossgrad_compiler.backends.onnx.values import (
    Accumulator,
    DimOf,
    FilledTensor,
    ScalarConstant,
    ShapeEntry,
    Tensor,
)


def aligned_axes(
    op: Operation, amap: AffineMap, value_type: Attribute, loops: int
) -> frozenset[int]:
    """The iteration axes an operand covers, after checking that its map is right-aligned."""
    shape = static_shape(value_type)
    rank = len(shape)
    if len(amap.results) != rank or amap.num_dims != loops or rank > loops:
        raise Level2TranslationError(op, f"indexing map {amap} does not fit its operand")
    axes = set()
    for j, expr in enumerate(amap.results):
        axis = loops - rank + j
        if isinstance(expr, AffineDimExpr) and expr.position == axis:
            axes.add(axis)
        elif not (isinstance(expr, AffineConstantExpr) and expr.value == 0 and shape[j] == 1):
            raise Level2TranslationError(
                op,
                f"indexing map {amap}: result {j} must be d{axis}, or 0 at a size-1 dimension",
            )
    return frozenset(axes)


@rule(GenericOp)
def generic(t: Translator, op: GenericOp) -> None:
    maps = [m.data for m in op.indexing_maps]
    iterators = [str(it.data) for it in op.iterator_types]
    loops = len(iterators)
    if len(op.outputs) != 1 or len(maps) != len(op.inputs) + 1:
        raise Level2TranslationError(op, "expected exactly one output")
    output = op.outputs[0]
    body = t.nested()
    block = op.body.block
    pairs = equal_size_pairs(t, op, maps)
    ok = emit_size_check(t, pairs) if pairs else None
    values = [t.tensor(operand, op) for operand in op.inputs]
    gated = _operands_to_gate(op, values, pairs) if ok is not None else set()
    for i, (arg, operand, amap) in enumerate(zip(block.args, op.inputs, maps, strict=False)):
        value = values[i]
        name = gate(t, value.name, value.rank, ok) if i in gated and ok else value.name
        body.env[arg] = Tensor(name, value.rank, aligned_axes(op, amap, operand.type, loops))
    body.env[block.args[-1]] = Accumulator()
    out_axes = aligned_axes(op, maps[-1], output.type, loops)
    reduced = frozenset(k for k, it in enumerate(iterators) if it == "reduction")
    out_rank = len(static_shape(output.type))
    if any(k not in reduced for k in range(loops - out_rank)) or any(
        k not in out_axes and k not in reduced for k in range(loops - out_rank, loops)
    ):
        raise Level2TranslationError(op, "a parallel iterator is missing from the output map")

    accumulate = _accumulating_add(op) if reduced else None
    yield_op = body.run_block(block, lambda o: o is accumulate or isinstance(o, YieldOp))
    if accumulate is not None:
        acc = block.args[-1]
        summand: SSAValue = accumulate.rhs if accumulate.lhs is acc else accumulate.lhs
        if any(use.operation is not accumulate for use in acc.uses):
            raise Level2TranslationError(op, "the accumulator is read outside its addf")
        value = body.tensor(summand, accumulate)
        value = _reduce(t, op, value, reduced, loops, out_rank, maps)
        value = _add_initial(t, op, value, output, out_axes)
    else:
        assert isinstance(yield_op, YieldOp)
        if reduced:
            raise Level2TranslationError(op, "a reduction must yield `arith.addf %acc, %v`")
        value = body.tensor(yield_op.operands[0], yield_op)
    result = _complete(t, op, value, output, out_rank, loops, out_axes)
    if ok is not None and not gated:  # the body reads no operand: the result waits instead
        result = Tensor(gate(t, result.name, result.rank, ok), result.rank, shape=result.shape)
    t.env[op.results[0]] = result


def _operands_to_gate(op: GenericOp, values: list[Tensor], pairs: list[SizePair]) -> set[int]:
    """The inputs that wait for the size check: those the body reads whose sizes are checked
    (the body's first node mixing mismatched operands would otherwise fail first, with ONNX
    Runtime's broadcasting message), else every input the body reads."""
    read = [i for i, arg in enumerate(op.body.block.args[: len(op.inputs)]) if arg.uses]
    checked = {e.tensor for pair in pairs for e in pair if isinstance(e, DimOf)}
    return {i for i in read if values[i].name in checked} or set(read)


def _accumulating_add(op: GenericOp) -> arith.AddfOp:
    """The `arith.addf %acc, %v` whose result the body yields."""
    block = op.body.block
    yielded = block.last_op
    if isinstance(yielded, YieldOp) and len(yielded.operands) == 1:
        add = yielded.operands[0].owner
        acc = block.args[-1]
        if isinstance(add, arith.AddfOp) and acc in (add.lhs, add.rhs):
            return add
    raise Level2TranslationError(op, "a reduction must yield `arith.addf %acc, %v`")


def _reduce(
    t: Translator,
    op: GenericOp,
    value: Tensor,
    reduced: frozenset[int],
    loops: int,
    out_rank: int,
    maps: Sequence[AffineMap],
) -> Tensor:
    """ReduceSum over the reduction axes; leading axes absent from the output are dropped,
    the others stay as the size-1 dimensions the output map reads with constant 0."""
    if not reduced <= value.axes:
        # Summing along an axis the summand does not vary along repeats it: expand first.
        shape = t.sink.shape(_iteration_shape(t, op, loops, maps))
        value = Tensor(t.sink.expand(value.name, shape, loops), loops, frozenset(range(loops)))
    offset = loops - value.rank
    dropped = sorted(k for k in reduced if k < loops - out_rank)
    kept = reduced - set(dropped)
    axes = t.sink.int64s([k - offset for k in sorted(reduced)])
    name = t.sink.add("ReduceSum", [value.name, axes], "sum", keepdims=1 if kept else 0)
    if kept and dropped:
        name = t.sink.add("Squeeze", [name, t.sink.int64s([k - offset for k in dropped])], "sum")
    return Tensor(name, value.rank - len(dropped), value.axes - reduced)


def _add_initial(
    t: Translator, op: GenericOp, value: Tensor, output: SSAValue, out_axes: frozenset[int]
) -> Tensor:
    """Add the accumulator's initial value (which has the output's full shape), unless it is
    a fill with zero."""
    init = t.lookup(output, op)
    if (
        isinstance(init, FilledTensor)
        and isinstance(init.fill, ScalarConstant)
        and init.fill.value == 0
    ):
        return value
    start = t.tensor(output, op)
    name = t.sink.add("Add", [start.name, value.name], "acc")
    return Tensor(name, max(start.rank, value.rank), value.axes | out_axes)


def _complete(
    t: Translator,
    op: GenericOp,
    value: Tensor,
    output: SSAValue,
    out_rank: int,
    loops: int,
    out_axes: frozenset[int],
) -> Tensor:
    """The result with the output's full shape: Expand when the rank or an extent is missing."""
    shape = static_shape(output.type)
    needed = {k for k in out_axes if shape[k - (loops - out_rank)] != 1}
    entries = t.shape_entries(output, op)
    if value.rank == out_rank and needed <= value.axes:
        return Tensor(value.name, out_rank, shape=entries)
    expanded = t.sink.expand(value.name, t.sink.shape(entries), out_rank)
    return Tensor(expanded, out_rank, shape=entries)


def _iteration_shape(
    t: Translator, op: GenericOp, loops: int, maps: Sequence[AffineMap]
) -> list[ShapeEntry]:
    """The size of each loop, read from an operand whose map reads that loop directly."""
    operands = [*op.inputs, *op.outputs]
    sizes: list[ShapeEntry | None] = [None] * loops
    for operand, amap in zip(operands, maps, strict=True):
        entries = t.shape_entries(operand, op)
        for j, expr in enumerate(amap.results):
            if isinstance(expr, AffineDimExpr):
                known = sizes[expr.position]
                if known is None or (not isinstance(known, int) and isinstance(entries[j], int)):
                    sizes[expr.position] = entries[j]
    if any(s is None for s in sizes):
        raise Level2TranslationError(op, "a loop is read by no operand, its size is unknown")
    return [s for s in sizes if s is not None]
