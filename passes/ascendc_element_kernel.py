"""The element form of `convert-linalg-to-ascendc`: a kernel whose Compute stage computes
each element of the output tile with scalar code (`ascendc.element_loop`).

The tile rules (ascendc_body_rules.py) read every operand as a tile of the flat iteration
space, broadcast on the host. A body that reads an integer class-index operand, the loop
position (`linalg.index`) or an operand through a map that is not right-aligned (an
order-preserving map that skips loops, docs/level2.md) has no tile form there; it is
translated here one op per rule, each op becoming the same op on scalars:

* a block argument: `ascendc.read_element` of its global tensor through its indexing map
  (a one-element input: GetValue(0), once, in Init);
* `linalg.index k`: `ascendc.position k`;
* every other body op (float arithmetic, cmpf/cmpi, andi/xori, extf/truncf/extsi,
  index_cast, select, constants): itself, on the scalars of its operands;
* a value captured from above (the class count, ignore_index): a tiling scalar.

An op whose operands are all the same for every element (one-element inputs, captured
values, constants: the quotient g / total_weight) is computed once, in Init.

Every address is a position inside the iteration space read through a map, never a value
read from an input, so no target value can make the kernel read or write out of bounds.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint

from lossgrad_compiler import level2, spec
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.passes.ascendc_level2 import KernelSource, affine_map, kernel_frame

ELEMENT_OPS: frozenset[type[Operation]] = (level2.SCALAR_OPS | level2.CLASS_OPS) - {
    math.ExpOp,
    math.LogOp,
    arith.ExtUIOp,
    arith.AddiOp,
}
"""The body ops the element form translates. exp and log stay vector instructions (the tile
rules; no element body needs them, and a scalar libm would not round as the vector unit
does); extui and addi belong to the value checks, which the aclnn wrapper counts."""


def needs_elements(main: level2.Level2Generic) -> bool:
    """Whether the generic's body has no tile form: a class-index operand, a class op, or a
    read operand whose map is not right-aligned (the host's BroadcastTo cannot expand it)."""
    if any(type(op) in level2.CLASS_OPS for op in main.body_ops):
        return True
    return any(
        o.reads
        and (
            isinstance(o.element, spec.IndexType)
            or not level2.is_right_aligned(o.index_map, main.loops)
        )
        for o in main.inputs
    )


def untranslatable(main: level2.Level2Generic) -> list[str]:
    """The body ops (names) the element form has no rule for."""
    return sorted({op.name for op in main.body_ops if type(op) not in ELEMENT_OPS})


def build_element_kernel(
    source: KernelSource, name: str, out_name: str, where: str
) -> asc.KernelOp:
    """The kernel of `source` in element form (see the module docstring)."""
    main = source.main
    missing = untranslatable(main)
    if missing:
        raise UnsupportedByBackendError(
            where,
            missing[0],
            f"the Ascend C element kernel has no rule for {', '.join(missing)}; use the onnx "
            "or ort target",
        )
    out_element = main.value.type
    inputs = len(main.inputs)
    kernel, loop = kernel_frame(source, name, out_name)
    block = kernel.entry
    init = Builder(InsertPoint.before(loop))
    compute = Builder(InsertPoint.at_end(loop.stage("compute")))
    copy_out = Builder(InsertPoint.at_end(loop.stage("copy_out")))

    out_queue = init.insert(asc.QueueOp(asc.Position.VECOUT, out_element)).result
    out_tile = compute.insert(asc.AllocOp(out_queue)).result
    count = loop.stage("compute").args[1]
    elements = compute.insert(asc.ElementLoopOp(out_tile, count, main.loops))
    body = Builder(InsertPoint.at_end(elements.block))

    env: dict[SSAValue, SSAValue] = {}
    invariant: set[SSAValue] = set()  # the same for every element: computed once, in Init
    for value, arg in zip(main.captured, block.args[inputs + 1 :], strict=True):
        env[value] = arg
        invariant.add(value)
    for i, operand in enumerate(main.inputs):
        if not operand.reads:
            continue
        if operand.is_scalar:  # one element: GetValue(0) once
            env[operand.block_arg] = init.insert(asc.GetValueOp(block.args[i])).result
            invariant.add(operand.block_arg)
            continue
        read = asc.ReadElementOp(block.args[i], affine_map(operand.index_map, main.loops))
        env[operand.block_arg] = body.insert(read).result
    for op in main.live_ops():
        if isinstance(op, IndexOp):
            env[op.results[0]] = body.insert(asc.PositionOp(op.dim.value.data)).result
            continue
        new = op.clone()
        for k, operand in enumerate(op.operands):
            new.operands[k] = env.get(operand, operand)
        if all(v in invariant for v in op.operands):
            init.insert(new)
            invariant.add(op.results[0])
        else:
            body.insert(new)
        env[op.results[0]] = new.results[0]
    body.insert(asc.StoreElementOp(env[main.value]))
    compute.insert(asc.EnqueOp(out_queue, out_tile))

    out_offset, out_count = loop.stage("copy_out").args
    result = copy_out.insert(asc.DequeOp(out_queue)).result
    copy_out.insert(asc.CopyOutOp(block.args[inputs], out_offset, result, out_count, True))
    copy_out.insert(asc.FreeOp(out_queue, result))
    return kernel
