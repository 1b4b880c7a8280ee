"""`linalg.generic` → ONNX: indexing maps become ONNX broadcasting, reduction iterators a
`ReduceSum`.

The elementwise operators' maps are right-aligned: an operand of rank r reads `d{n-r+j}` (or
the constant 0 at a static size-1 dimension) in its dimension j, which is exactly how ONNX
aligns dimensions, so those operands enter the body unchanged; an order-preserving map that
skips loops (the classification operators') gets its size-1 dimensions first, and
`linalg.index` is a Range on its axis (alignment.py). The body's scalar ops then run on whole
tensors. Each value records the iteration axes along which it has the full extent; an
`Expand` is added only where the result must have an extent that no operand of its
computation had (a reduction over an axis the summand does not vary along, or an output
axis the body never reads).

All of this relies on level 2's rule that the dynamic sizes on one loop are equal at run
time, so the sizes the loops equate are checked first (size_check.py): a call that breaks
the rule fails in ONNX Runtime instead of returning numbers for other shapes."""

from __future__ import annotations

from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import SSAValue

from lossgrad_compiler import level2
from lossgrad_compiler.backends.onnx.alignment import aligned_operand, check_output_map
from lossgrad_compiler.backends.onnx.size_check import (
    SizePair,
    emit_size_check,
    equal_size_pairs,
    gate,
)
from lossgrad_compiler.backends.onnx.state import Translation
from lossgrad_compiler.backends.onnx.types import static_shape
from lossgrad_compiler.backends.onnx.values import (
    Accumulator,
    DimOf,
    FilledTensor,
    ScalarConstant,
    ShapeEntry,
    Tensor,
    Value,
)


def translate_generic(t: Translation, op: GenericOp) -> Value:
    """The generic's result, its structure read through `level2.analyze_generic`."""
    generic = level2.analyze_generic(op)
    loops = generic.loops
    output = generic.output
    check_output_map(output.index_map, loops)
    body = t.nested()
    if any(isinstance(o, IndexOp) for o in generic.body_ops):
        body.loop_sizes = tuple(_iteration_shape(t, generic))
    pairs = equal_size_pairs(t, generic)
    ok = emit_size_check(t, pairs) if pairs else None
    values = [t.tensor(operand.value, op) for operand in generic.inputs]
    gated = _operands_to_gate(generic, values, pairs) if ok is not None else set()
    for i, operand in enumerate(generic.inputs):
        value = values[i]
        name = gate(t, value.name, value.rank, ok) if i in gated and ok else value.name
        body.env[operand.block_arg] = (
            aligned_operand(t, name, operand.index_map, loops)
            if operand.reads
            else Tensor(name, value.rank, _axes(operand))  # never read: no alignment nodes
        )
    body.env[output.block_arg] = Accumulator()
    out_axes = _axes(output)
    reduced = frozenset(k for k, r in enumerate(generic.reduction_loops) if r)
    body.run_ops(generic.body_ops)
    value = body.tensor(generic.value, generic.accumulation.add if generic.accumulation else op)
    if generic.accumulation is not None:
        value = _reduce(t, generic, value, reduced, output.rank)
        value = _add_initial(t, op, value, output.value, out_axes)
    result = _complete(t, op, value, output.value, output.rank, loops, out_axes)
    if ok is not None and not gated:  # the body reads no operand: the result waits instead
        result = Tensor(gate(t, result.name, result.rank, ok), result.rank, shape=result.shape)
    return result


def _axes(operand: level2.GenericOperand) -> frozenset[int]:
    """The iteration axes along which an operand has its full extent."""
    return frozenset(loop for loop in operand.index_map if loop is not None)


def _operands_to_gate(
    generic: level2.Level2Generic, values: list[Tensor], pairs: list[SizePair]
) -> set[int]:
    """The inputs that wait for the size check: those the body reads whose sizes are checked
    (the body's first node mixing mismatched operands would otherwise fail first, with ONNX
    Runtime's broadcasting message), else every input the body reads."""
    read = [i for i, operand in enumerate(generic.inputs) if operand.reads]
    checked = {e.tensor for pair in pairs for e in pair if isinstance(e, DimOf)}
    return {i for i in read if values[i].name in checked} or set(read)


def _reduce(
    t: Translation,
    generic: level2.Level2Generic,
    value: Tensor,
    reduced: frozenset[int],
    out_rank: int,
) -> Tensor:
    """ReduceSum over the reduction axes; leading axes absent from the output are dropped,
    the others stay as the size-1 dimensions the output map reads with constant 0."""
    loops = generic.loops
    if not reduced <= value.axes:
        # Summing along an axis the summand does not vary along repeats it: expand first.
        shape = t.sink.shape(_iteration_shape(t, generic))
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
    t: Translation, op: GenericOp, value: Tensor, output: SSAValue, out_axes: frozenset[int]
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
    t: Translation,
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


def _iteration_shape(t: Translation, generic: level2.Level2Generic) -> list[ShapeEntry]:
    """The size of each loop, read from an operand that reads that loop directly."""
    sizes: list[ShapeEntry | None] = [None] * generic.loops
    for operand in (*generic.inputs, generic.output):
        entries = t.shape_entries(operand.value, generic.op)
        for j, loop in enumerate(operand.index_map):
            if loop is not None:
                known = sizes[loop]
                if known is None or (not isinstance(known, int) and isinstance(entries[j], int)):
                    sizes[loop] = entries[j]
    if any(s is None for s in sizes):
        raise level2.Level2ContractError(
            generic.op, "a loop is read by no operand, its size is unknown"
        )
    return [s for s in sizes if s is not None]
