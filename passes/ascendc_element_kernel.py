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
* `tensor.extract %w[%i]` (the gather of a captured rank-1 input): `ascendc.gather`, at
  the index the level-2 verifier proved inside the tensor;
* `math.exp` (and the widening before it) of an input read through the identity map: the
  vector unit's Exp over the input's tile, in the Compute stage before the element loop
  (the tile rules), read back per element with `ascendc.read_tile`; the scalar unit has no
  exp, and the vector one rounds as the tile kernels do;
* every other body op (float arithmetic, cmpf/cmpi, andi/xori, extf/truncf/extsi,
  index_cast, select, constants): itself, on the scalars of its operands;
* a value captured from above (the class count, ignore_index): a tiling scalar;
* a reduction the body reads as `()` (docs/level2.md, "Reductions"): `ascendc.sum_loop` in
  Init, its body translated by the same rules, so every core computes the sum itself, in
  level 2's order (the reduction strategy: BATCH_SUMS below).

An op whose operands are all the same for every element (one-element inputs, captured
values, constants, the reductions: the quotient g / D) is computed once, in Init.

Every address is a position inside the iteration space read through a map, or a gather
index the verifier bounds, never a raw value read from an input, so no target value can
make the kernel read or write out of bounds.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith, math, tensor
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from lossgrad_compiler import level2, spec
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.passes.ascendc_body_rules import AscendcBodyRules, Tile, Value
from lossgrad_compiler.passes.ascendc_level2 import KernelSource, affine_map, kernel_frame

ELEMENT_OPS: frozenset[type[Operation]] = (
    level2.SCALAR_OPS | level2.CLASS_OPS | {tensor.ExtractOp}
) - {math.LogOp, arith.ExtUIOp, arith.AddiOp}
"""The body ops the element form translates. log has no element rule (no class body needs
it); extui and addi belong to the value checks, which the aclnn wrapper counts. exp is a
vector instruction over a whole input tile (see the module docstring)."""

TILE_PRELUDE_OPS: frozenset[type[Operation]] = frozenset({math.ExpOp, arith.ExtFOp})
"""The ops computed on tiles before the element loop: exp and the widening of its input."""


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


def untranslatable(source: KernelSource) -> list[str]:
    """The body ops (names) of the main generic and the reductions the element form has no
    rule for."""
    generics = [source.main, *(r.generic for r in source.reductions)]
    return sorted({op.name for g in generics for op in g.body_ops if type(op) not in ELEMENT_OPS})


def _tile_slice(main: level2.Level2Generic, where: str) -> tuple[list[Operation], set[SSAValue]]:
    """(the body ops computed on tiles before the element loop, the input block arguments
    they read): every exp and what it is computed from, which must be inputs read through
    the identity map (whole tiles of the flat iteration space) widened by extf."""
    exps = [op for op in main.live_ops() if isinstance(op, math.ExpOp)]
    tiled: set[Operation] = set()
    reads: set[SSAValue] = set()
    identity = {o.block_arg for o in main.inputs if o.is_identity(main.loops)}
    stack = [v for op in exps for v in op.operands]
    tiled.update(exps)
    while stack:
        value = stack.pop()
        if value in identity:
            reads.add(value)
            continue
        owner = value.owner
        if not isinstance(owner, Operation) or type(owner) not in TILE_PRELUDE_OPS:
            raise UnsupportedByBackendError(
                where,
                "math.exp",
                "the Ascend C element kernel computes exp only of an input read whole (the "
                "identity map), on its tiles; use the onnx or ort target",
            )
        if owner not in tiled:
            tiled.add(owner)
            stack.extend(owner.operands)
    return [op for op in main.body_ops if op in tiled], reads


def _element_live(main: level2.Level2Generic, leaves: set[SSAValue]) -> list[Operation]:
    """The body ops the value depends on once the tile values (`leaves`) are given."""
    live: set[Operation] = set()
    stack = [main.value]
    while stack:
        value = stack.pop()
        owner = value.owner
        if value in leaves or not isinstance(owner, Operation):
            continue
        if owner.parent_block() is main.body and owner not in live:
            live.add(owner)
            stack.extend(owner.operands)
    return [op for op in main.body_ops if op in live]


def _extents(source: KernelSource) -> dict[SSAValue, int]:
    """Per rank-1 function argument: the loop whose size is its length (its main map)."""
    return {
        o.value: o.index_map[0]
        for o in source.tensor_inputs
        if o.rank == 1 and o.index_map[0] is not None
    }


def _translate(
    op: Operation,
    env: dict[SSAValue, SSAValue],
    gm: dict[SSAValue, SSAValue],
    extents: dict[SSAValue, int],
) -> Operation:
    """The op itself on scalars, a gather for `tensor.extract`."""
    if isinstance(op, tensor.ExtractOp):
        (index,) = op.indices
        return asc.GatherOp(gm[op.tensor], env[index], extents[op.tensor])
    new = op.clone()
    for k, operand in enumerate(op.operands):
        new.operands[k] = env.get(operand, operand)
    return new


def _sum_loop(
    init: Builder,
    reduction: level2.Level2Reduction,
    env: dict[SSAValue, SSAValue],
    gm: dict[SSAValue, SSAValue],
    extents: dict[SSAValue, int],
    split: bool,
) -> SSAValue:
    """The reduction as an Init-time sum over its input, term by term in order (`split`:
    the workspace strategy, see ascendc.sum_loop)."""
    generic = reduction.generic
    (operand,) = generic.inputs
    accumulation = generic.accumulation
    assert accumulation is not None
    source_gm = gm[operand.value]
    extent = extents[operand.value]
    loop = init.insert(
        asc.SumLoopOp(source_gm, extent, accumulation.init or 0.0, generic.value.type, split)
    )
    body = Builder(InsertPoint.at_end(loop.block))
    local = dict(env)
    local[operand.block_arg] = body.insert(
        asc.GatherOp(source_gm, loop.block.args[0], extent)
    ).result
    for op in generic.live_ops():
        new = body.insert(_translate(op, local, gm, extents))
        local[op.results[0]] = new.results[0]
    body.insert(asc.SumTermOp(local[generic.value]))
    return loop.result


BATCH_SUMS = ("per_core", "workspace")
"""How a reduction over the batch meets the cores, `convert-linalg-to-ascendc`'s option:

* per_core (the default): every core computes D and W itself in Init, in level 2's order:
  bit-identical to the reference, no workspace, no barrier; it costs each core 2N + C
  scalar GM reads (the targets, their weights, the weights) beside its share of the
  3NC reads of the element loop, an overhead of about 2P/(3C) + P/(3N) on P cores;
* workspace: each core a share of every sum, the partial sums through the workspace and
  SyncAll, then every core adds them in core order: (2N + C)/P reads, two barriers, and
  sums in another order than level 2's (TIGHT, not bit-identical).

In the emulator's cost model (lossgrad_emu/cost.h) the workspace form is faster on many
cores with few classes (3.7x at N=4096, C=10, 48 cores) and within 1% of per_core from a
few thousand classes up (the case the operator exists for), where per_core keeps the
reference's bits and needs no cross-core synchronisation: per_core is the default."""


def build_element_kernel(
    source: KernelSource, name: str, out_name: str, where: str, batch_sums: str = "per_core"
) -> asc.KernelOp:
    """The kernel of `source` in element form (see the module docstring)."""
    if batch_sums not in BATCH_SUMS:
        raise ValueError(f"batch_sums must be one of {BATCH_SUMS}, not {batch_sums!r}")
    main = source.main
    missing = untranslatable(source)
    if missing:
        raise UnsupportedByBackendError(
            where,
            missing[0],
            f"the Ascend C element kernel has no rule for {', '.join(missing)}; use the onnx "
            "or ort target",
        )
    tile_ops, tile_reads = _tile_slice(main, where)
    out_element = main.value.type
    inputs = len(source.tensor_inputs)
    kernel, loop = kernel_frame(source, name, out_name)
    block = kernel.entry
    init = Builder(InsertPoint.before(loop))
    compute = Builder(InsertPoint.at_end(loop.stage("compute")))
    copy_out = Builder(InsertPoint.at_end(loop.stage("copy_out")))
    gm = {o.value: block.args[i] for i, o in enumerate(source.tensor_inputs)}
    extents = _extents(source)

    env: dict[SSAValue, SSAValue] = {}
    invariant: set[SSAValue] = set()  # the same for every element: computed once, in Init
    for value, arg in zip(source.scalars, block.args[inputs + 1 :], strict=True):
        env[value] = arg
        invariant.add(value)
    for reduction in source.reductions:
        arg = main.inputs[reduction.position].block_arg
        env[arg] = _sum_loop(init, reduction, env, gm, extents, batch_sums == "workspace")
        invariant.add(arg)

    tiles = _tile_prelude(source, tile_ops, tile_reads, kernel, loop, where)
    out_queue = init.insert(asc.QueueOp(asc.Position.VECOUT, out_element)).result
    out_tile = compute.insert(asc.AllocOp(out_queue)).result
    count = loop.stage("compute").args[1]
    elements = compute.insert(asc.ElementLoopOp(out_tile, count, main.loops))
    body = Builder(InsertPoint.at_end(elements.block))
    for value, local in tiles.items():
        env[value] = body.insert(asc.ReadTileOp(local)).result

    live = _element_live(main, set(tiles))
    needed = {v for op in live for v in op.operands} | {main.value}
    for i, operand in enumerate(source.tensor_inputs):
        if operand.block_arg not in needed:
            continue
        if operand.is_scalar:  # one element: GetValue(0) once
            env[operand.block_arg] = init.insert(asc.GetValueOp(block.args[i])).result
            invariant.add(operand.block_arg)
            continue
        read = asc.ReadElementOp(block.args[i], affine_map(operand.index_map, main.loops))
        env[operand.block_arg] = body.insert(read).result
    for op in live:
        if isinstance(op, IndexOp):
            env[op.results[0]] = body.insert(asc.PositionOp(op.dim.value.data)).result
            continue
        new = _translate(op, env, gm, extents)
        if not isinstance(op, tensor.ExtractOp) and all(v in invariant for v in op.operands):
            init.insert(new)
            invariant.add(op.results[0])
        else:
            body.insert(new)
        env[op.results[0]] = new.results[0]
    body.insert(asc.StoreElementOp(env[main.value]))
    compute.insert(asc.EnqueOp(out_queue, out_tile))
    for queue, tile in _input_tiles(loop.stage("compute")):
        compute.insert(asc.FreeOp(queue, tile))

    out_offset, out_count = loop.stage("copy_out").args
    result = copy_out.insert(asc.DequeOp(out_queue)).result
    copy_out.insert(asc.CopyOutOp(block.args[inputs], out_offset, result, out_count, True))
    copy_out.insert(asc.FreeOp(out_queue, result))
    return kernel


def _tile_prelude(
    source: KernelSource,
    tile_ops: list[Operation],
    tile_reads: set[SSAValue],
    kernel: asc.KernelOp,
    loop: asc.TileLoopOp,
    where: str,
) -> dict[SSAValue, SSAValue]:
    """The tile values of the body (exp of an input), computed with vector instructions
    at the start of the Compute stage: {body value: its tile}. The inputs they read are
    copied in tile by tile (VECIN queues), as in the tile kernels."""
    if not tile_ops:
        return {}
    block = kernel.entry
    init = Builder(InsertPoint.before(loop))
    copy_in = Builder(InsertPoint.at_end(loop.stage("copy_in")))
    compute = Builder(InsertPoint.at_end(loop.stage("compute")))
    in_offset, in_count = loop.stage("copy_in").args
    env: dict[SSAValue, Value] = {}
    for i, operand in enumerate(source.tensor_inputs):
        if operand.block_arg not in tile_reads:
            continue
        element = operand.block_arg.type
        queue = init.insert(asc.QueueOp(asc.Position.VECIN, element)).result
        local = copy_in.insert(asc.AllocOp(queue)).result
        copy_in.insert(asc.CopyInOp(local, block.args[i], in_offset, in_count, True))
        copy_in.insert(asc.EnqueOp(queue, local))
        env[operand.block_arg] = Tile(compute.insert(asc.DequeOp(queue)).result)
    rules = AscendcBodyRules(init, compute, loop.stage("compute").args[1], where)
    rules.translate_all(tile_ops, env)
    tiles: dict[SSAValue, SSAValue] = {}
    for op in tile_ops:
        if isinstance(op, math.ExpOp):
            value = env[op.results[0]]
            assert isinstance(value, Tile)
            tiles[op.results[0]] = rules.materialize(value).local
    return tiles


def _input_tiles(compute: Block) -> list[tuple[SSAValue, SSAValue]]:
    """(queue, tile) of every input tile the Compute stage dequeued (freed after use)."""
    return [(op.queue, op.result) for op in compute.ops if isinstance(op, asc.DequeOp)]
