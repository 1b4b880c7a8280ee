"""`convert-linalg-to-ascendc`: level-2 IR → the `ascendc` dialect.

Per function (one signature), the elementwise `linalg.generic` becomes

* on the host, the aclnn layer's l0 graph: `ascendc.broadcast_to` for every input the
  kernel reads through a broadcasting indexing map (one-element inputs excepted: the
  kernel reads those as scalars), `ascendc.launch` of the kernel over the iteration space,
  `ascendc.reduce_sum` when the generic sums into a smaller result, and
  `ascendc.tensor_cast` for the narrowing generic that follows such a sum;
* an `ascendc.kernel`: VECIN queues for the inputs it reads as tiles, one VECOUT queue,
  Init-time scalars (GetValue of one-element inputs, the captured reduction scale as a
  tiling scalar), and a tile loop whose Compute stage is the body translated op by op
  (lossgrad_compiler/backends/ascendc/body_translator.py). Compute temporaries stay
  `ascendc.temp` until `ascendc-plan-buffers` places them.

The host scalars (the scale's `tensor.dim`/`arith` chain) stay in the function: the tiling
function evaluates them from the iteration shape through the launch's indexing maps.
"""

from __future__ import annotations

from dataclasses import dataclass

from lossgrad_compiler.dialects import ascendc as asc
from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    Float64Type,
    IndexType,
    IntegerAttr,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.linalg.ops import FillOp, GenericOp, YieldOp
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendc.body_translator import (
    Mask,
    Scalar,
    Tile,
    TileContext,
    TranslationError,
    Value,
    translate_op,
)

INPUT_NAMES = spec.INPUT_NAMES
OUTPUT_NAME = "out"
DATA_COPY_BYTES = 32  # DataCopy moves whole 32-byte blocks


@dataclass(frozen=True)
class ConvertLinalgToAscendcPass(ModulePass):
    """Convert every level-2 function of the module (see the module docstring)."""

    name = "convert-linalg-to-ascendc"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            convert_function(function)


# --------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class Elementwise:
    """The generic of a function and what the kernel needs to know about it."""

    generic: GenericOp
    narrowing: GenericOp | None  # the truncf-only generic after a sum, if any
    maps: tuple[AffineMap, ...]  # of the three inputs
    out_map: AffineMap
    summed: bool  # reduction iterators: the kernel's result is summed into the output
    final: SSAValue  # the body value the kernel writes (before `addf %acc`)

    @property
    def loops(self) -> int:
        return self.out_map.num_dims

    @property
    def body(self) -> Block:
        return self.generic.body.block

    def reads(self, i: int) -> bool:
        return bool(self.body.args[i].uses)

    def is_scalar_input(self, i: int) -> bool:
        """A one-element input: its map names no loop, so every element reads element 0."""
        return not any(isinstance(e, AffineDimExpr) for e in self.maps[i].results)

    def needs_broadcast(self, i: int) -> bool:
        return self.maps[i] != AffineMap.identity(self.loops) and not self.is_scalar_input(i)


def analyse(function: func.FuncOp) -> Elementwise | None:
    """The elementwise generic of a level-2 function; None when there is none left."""
    generics = [op for op in function.body.block.ops if isinstance(op, GenericOp)]
    if not generics:
        return None
    where = function.sym_name.data
    main = [g for g in generics if len(g.inputs) == len(INPUT_NAMES)]
    if len(main) != 1:
        raise TranslationError(where, "linalg.generic", "expected one generic over the 3 inputs")
    generic = main[0]
    others = [g for g in generics if g is not generic]
    narrowing = others[0] if others else None
    if len(others) > 1 or (narrowing is not None and not _is_narrowing(narrowing, generic)):
        raise TranslationError(where, "linalg.generic", "only a truncf generic may follow")
    maps = tuple(m.data for m in generic.indexing_maps)
    summed = any(str(it.data) == "reduction" for it in generic.iterator_types)
    (yielded,) = _yield(generic.body.block).operands
    final = yielded
    if summed:
        final = _summand(yielded, generic.body.block.args[-1], where)
    return Elementwise(generic, narrowing, maps[:3], maps[3], summed, final)


def _yield(block: Block) -> YieldOp:
    last = block.last_op
    assert isinstance(last, YieldOp)
    return last


def _summand(yielded: SSAValue, acc: SSAValue, where: str) -> SSAValue:
    op = yielded.owner
    if isinstance(op, arith.AddfOp) and acc in op.operands:
        return op.rhs if op.lhs == acc else op.lhs
    raise TranslationError(where, "linalg.yield", "a sum must yield arith.addf(%acc, value)")


def _is_narrowing(g: GenericOp, producer: GenericOp) -> bool:
    ops = list(g.body.block.ops)
    return (
        len(g.inputs) == 1
        and g.inputs[0] == producer.results[0]
        and len(ops) == 2
        and isinstance(ops[0], arith.TruncFOp)
    )


def iteration_sizes(e: Elementwise) -> list[int | tuple[int, int]]:
    """Per loop: its static size, or (input, axis) of an input whose dim gives it."""
    sizes: list[int | tuple[int, int]] = []
    for loop in range(e.loops):
        static, dynamic = 1, None
        for i, amap in enumerate(e.maps):
            shape = _tensor(e.generic.inputs[i]).get_shape()
            for axis, expr in enumerate(amap.results):
                if isinstance(expr, AffineDimExpr) and expr.position == loop:
                    if shape[axis] >= 0 and shape[axis] != 1:
                        static = shape[axis]
                    elif shape[axis] < 0 and dynamic is None:
                        dynamic = (i, axis)
        sizes.append(static if static != 1 or dynamic is None else dynamic)
    return sizes


def _tensor(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


def _element(value: SSAValue) -> Attribute:
    return _tensor(value).element_type


# --------------------------------------------------------------------------- conversion


def convert_function(function: func.FuncOp) -> None:
    e = analyse(function)
    if e is None:
        return
    where = function.sym_name.data
    if any(isinstance(_element(v), Float64Type) for v in e.generic.inputs):
        raise TranslationError(
            where,
            "element type",
            "float64 is not supported by the Ascend C backend (its vector units have no fp64 "
            "arithmetic); use the onnx or ort target",
        )
    captured = _captured_scalars(e)
    kernel_name = f"{where}_kernel"
    kernel = build_kernel(e, kernel_name, captured, where)
    function.parent_block().insert_op_after(kernel, function)
    _rewrite_host(e, kernel_name, captured)


def _captured_scalars(e: Elementwise) -> list[SSAValue]:
    """Values the body uses but does not define (the reduction scale), in first-use order."""
    found: list[SSAValue] = []
    inside = set(e.body.ops)
    for op in e.body.ops:
        for operand in op.operands:
            owner = operand.owner
            defined_inside = owner in inside or (isinstance(owner, Block) and owner is e.body)
            if not defined_inside and operand not in found:
                found.append(operand)
    return found


def _static_numel(e: Elementwise) -> int | None:
    total = 1
    for size in iteration_sizes(e):
        if not isinstance(size, int):
            return None
        total *= size
    return total


def build_kernel(e: Elementwise, name: str, captured: list[SSAValue], where: str) -> asc.KernelOp:
    out_element = e.final.type
    args: list[tuple[str, Attribute]] = [
        (n, asc.GlobalTensorType(_element(v)))
        for n, v in zip(INPUT_NAMES, e.generic.inputs, strict=True)
    ]
    args.append((OUTPUT_NAME, asc.GlobalTensorType(out_element)))
    for k, value in enumerate(captured):
        args.append((value.name_hint or f"scalar{k}", value.type))
    kernel = asc.KernelOp(name, args, num_inputs=len(INPUT_NAMES))
    block = kernel.entry
    loop = asc.TileLoopOp()
    block.add_op(loop)
    init = Builder(InsertPoint.before(loop))
    copy_in = Builder(InsertPoint.at_end(loop.stage("copy_in")))
    compute = Builder(InsertPoint.at_end(loop.stage("compute")))
    copy_out = Builder(InsertPoint.at_end(loop.stage("copy_out")))
    n_static = _static_numel(e)

    def pad(element: Attribute) -> bool:
        return n_static is None or n_static * asc.element_bits(element) // 8 % DATA_COPY_BYTES != 0

    env: dict[SSAValue, Value] = {}
    for value, arg in zip(captured, block.args[len(INPUT_NAMES) + 1 :], strict=True):
        env[value] = Scalar(arg)
    in_offset, in_count = loop.stage("copy_in").args
    queues_to_free: list[tuple[SSAValue, SSAValue]] = []
    for i in range(len(INPUT_NAMES)):
        if not e.reads(i):
            continue
        gm = block.args[i]
        element = _element(e.generic.inputs[i])
        if e.is_scalar_input(i):
            env[e.body.args[i]] = Scalar(init.insert(asc.GetValueOp(gm)).result)
            continue
        queue = init.insert(asc.QueueOp(asc.Position.VECIN, element)).result
        local = copy_in.insert(asc.AllocOp(queue)).result
        copy_in.insert(asc.CopyInOp(local, gm, in_offset, in_count, pad(element)))
        copy_in.insert(asc.EnqueOp(queue, local))
        tile = compute.insert(asc.DequeOp(queue)).result
        env[e.body.args[i]] = Tile(tile)
        queues_to_free.append((queue, tile))
    out_queue = init.insert(asc.QueueOp(asc.Position.VECOUT, out_element)).result
    out_tile = compute.insert(asc.AllocOp(out_queue)).result

    ctx = TileContext(init, compute, loop.stage("compute").args[1], where)
    for op in _live_ops(e):
        operands = [_lookup(env, v, op, where) for v in op.operands]
        env[op.results[0]] = translate_op(ctx, op, operands)
    _write_result(ctx, _lookup(env, e.final, e.final.owner, where), out_tile, where)
    compute.insert(asc.EnqueOp(out_queue, out_tile))
    for queue, tile in queues_to_free:
        compute.insert(asc.FreeOp(queue, tile))

    out_offset, out_count = loop.stage("copy_out").args
    result = copy_out.insert(asc.DequeOp(out_queue)).result
    copy_out.insert(asc.CopyOutOp(block.args[len(INPUT_NAMES)], out_offset, result, out_count,
                                  pad(out_element)))  # fmt: skip
    copy_out.insert(asc.FreeOp(out_queue, result))
    return kernel


def _lookup(env: dict[SSAValue, Value], value: SSAValue, op: object, where: str) -> Value:
    if value not in env:
        raise TranslationError(where, getattr(op, "name", "value"), "uses an unsupported value")
    return env[value]


def _live_ops(e: Elementwise) -> list[Operation]:
    """The body ops the final value depends on, in body order (dead ops emit nothing)."""
    live: set[Operation] = set()
    stack = [e.final]
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, Operation) and owner.parent_block() is e.body and owner not in live:
            live.add(owner)
            stack.extend(owner.operands)
    return [op for op in e.body.ops if op in live]


def _write_result(ctx: TileContext, value: Value, out_tile: SSAValue, where: str) -> None:
    """Make the Compute stage's last write land in the output tile."""
    if isinstance(value, Mask):
        raise TranslationError(where, "linalg.yield", "cannot yield a comparison")
    if isinstance(value, Scalar):
        ctx.compute.insert(asc.DuplicateOp(out_tile, value.value, ctx.count))
        return
    temp = value.local.owner
    fresh = (
        value.plain
        and isinstance(temp, asc.TempOp)
        and temp.parent_block() is out_tile.owner.parent_block()
    )
    if fresh:
        temp.result.replace_all_uses_with(out_tile)
        Rewriter.erase_op(temp)
        return
    ctx.materialize(value, into=out_tile)


# --------------------------------------------------------------------------- host graph


def _rewrite_host(e: Elementwise, kernel_name: str, captured: list[SSAValue]) -> None:
    builder = Builder(InsertPoint.before(e.generic))
    sizes: list[SSAValue] = []
    shape: list[int] = []
    for size in iteration_sizes(e):
        if isinstance(size, int):
            shape.append(size)
            continue
        i, axis = size
        index = builder.insert(arith.ConstantOp(IntegerAttr(axis, IndexType()))).result
        sizes.append(builder.insert(tensor.DimOp(e.generic.inputs[i], index)).result)
        shape.append(DYNAMIC_INDEX)
    inputs: list[SSAValue] = []
    for i, value in enumerate(e.generic.inputs):
        if e.reads(i) and e.needs_broadcast(i):
            target = TensorType(_element(value), shape)
            value = builder.insert(asc.BroadcastToOp(value, sizes, target)).result
        inputs.append(value)
    launch = builder.insert(
        asc.LaunchOp(
            kernel_name,
            inputs,
            sizes,
            captured,
            [AffineMapAttr(m) for m in e.maps],
            TensorType(e.final.type, shape),
        )
    )
    result = launch.result
    if e.summed:
        out_type = _tensor(e.generic.results[0])
        result = builder.insert(asc.ReduceSumOp(result, AffineMapAttr(e.out_map), out_type)).result
    replaced = e.generic
    if e.narrowing is not None:
        narrow_type = _tensor(e.narrowing.results[0])
        result = builder.insert(
            asc.TensorCastOp(result, narrow_type, asc.RoundMode.CAST_RINT)
        ).result
        e.narrowing.results[0].replace_all_uses_with(result)
        Rewriter.erase_op(e.narrowing)
    else:
        replaced.results[0].replace_all_uses_with(result)
    Rewriter.erase_op(e.generic, safe_erase=False)
    _erase_dead(launch.parent_block())


_DEAD_IF_UNUSED = (tensor.EmptyOp, FillOp, arith.ConstantOp, tensor.DimOp)


def _erase_dead(block: Block | None) -> None:
    """Drop the output tensors and constants the generics alone used."""
    assert block is not None
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.ops)):
            if isinstance(op, _DEAD_IF_UNUSED) and not any(r.uses for r in op.results):
                Rewriter.erase_op(op)
                changed = True
