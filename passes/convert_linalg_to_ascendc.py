"""`convert-linalg-to-ascendc`: level-2 IR → the `ascendc` dialect.

Per function (one signature), read through lossgrad_compiler.level2 (ascendc_level2.py),
the elementwise `linalg.generic` becomes

* on the host, the aclnn layer's l0 graph: `ascendc.broadcast_to` for every input the
  kernel reads through a broadcasting indexing map (one-element inputs excepted: the
  kernel reads those as scalars), `ascendc.launch` of the kernel over the iteration space,
  `ascendc.reduce_sum` when the generic sums into a smaller result, and
  `ascendc.tensor_cast` for the narrowing generic that follows such a sum;
* an `ascendc.kernel`: VECIN queues for the inputs it reads as tiles, one VECOUT queue,
  Init-time scalars (GetValue of one-element inputs, the captured reduction scale as a
  tiling scalar), and a tile loop whose Compute stage is the body translated op by op
  (ascendc_body_rules.py). Compute temporaries stay `ascendc.temp` until
  `ascendc-plan-buffers` places them.

The host scalars (the scale's `tensor.dim`/`arith` chain) stay in the function: the tiling
function evaluates them from the iteration shape through the launch's indexing maps.
A body with an integer class-index operand, `linalg.index` or a map that is not
right-aligned (the classification operators) becomes an element kernel instead
(ascendc_element_kernel.py: scalar code per output element, no BroadcastTo on the host). A
value check returned after the result (the target check) stays in the function: the aclnn
wrapper counts it from the input's values before it launches anything.
IR outside docs/level2.md raises Level2ContractError; float64, which the vector units
cannot compute, raises UnsupportedByBackendError, and so does any construct without a rule
(a body op, a value check the wrapper does not count): the error names each one.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.linalg.ops import FillOp
from xdsl.ir import Attribute, Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from lossgrad_compiler import level2, spec
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.passes.ascendc_body_rules import (
    AscendcBodyRules,
    Mask,
    Scalar,
    Tile,
    Value,
)
from lossgrad_compiler.passes.ascendc_element_kernel import (
    ELEMENT_OPS,
    build_element_kernel,
    needs_elements,
)
from lossgrad_compiler.passes.ascendc_level2 import (
    HOST_CHECKS,
    KernelSource,
    affine_map,
    kernel_frame,
    kernel_source,
    untranslated_constructs,
)

OUTPUT_NAME = "out"
DATA_COPY_BYTES = 32  # DataCopy moves whole 32-byte blocks


@dataclass(frozen=True)
class ConvertLinalgToAscendcPass(ModulePass):
    """Convert every level-2 function of the module (see the module docstring)."""

    name = "convert-linalg-to-ascendc"

    batch_sums: str = "per_core"  # ascendc_element_kernel.BATCH_SUMS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            convert_function(function, self.batch_sums)


# --------------------------------------------------------------------------- the generic


def _needs_broadcast(operand: level2.GenericOperand, loops: int) -> bool:
    """Read through a broadcasting map (a one-element input is read as a scalar instead)."""
    return not operand.is_identity(loops) and not operand.is_scalar


def _tensor(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


# --------------------------------------------------------------------------- conversion


def convert_function(function: func.FuncOp, batch_sums: str = "per_core") -> None:
    source = kernel_source(function)
    if source is None:
        return
    where = function.sym_name.data
    if any(o.element is spec.FLOAT64 for o in source.main.inputs):
        raise UnsupportedByBackendError(
            where,
            "element type",
            "float64 is not supported by the Ascend C backend (its vector units have no fp64 "
            "arithmetic); use the onnx or ort target",
        )
    elements = needs_elements(source.main) or bool(source.reductions)
    _refuse_untranslated(source, where, elements)
    kernel_name = f"{where}_kernel"
    if elements:
        kernel = build_element_kernel(source, kernel_name, OUTPUT_NAME, where, batch_sums)
    else:
        kernel = build_kernel(source, kernel_name, where)
    function.parent_block().insert_op_after(kernel, function)
    _rewrite_host(source, kernel_name, broadcast=not elements)


def _refuse_untranslated(source: KernelSource, where: str, elements: bool) -> None:
    """A valid function whose constructs have no Ascend C rule is refused by naming them
    (the first one is the error's construct), never half translated: body ops without a
    tile rule (or, in the element form, without an element rule), and value checks the
    aclnn wrapper does not count (ascendc_level2.HOST_CHECKS)."""
    rules = ELEMENT_OPS if elements else AscendcBodyRules.RULES
    found = untranslated_constructs(source, lambda op: type(op) in rules, HOST_CHECKS)
    if found:
        raise UnsupportedByBackendError(
            where,
            found[0][0],
            f"the Ascend C backend has no {'element' if elements else 'tile'} rule for "
            + "; ".join(description for _, description in found)
            + "; use the onnx or ort target",
        )


def _static_numel(source: KernelSource) -> int | None:
    total = 1
    for size in source.main.loop_sizes():
        if not isinstance(size, int):
            return None
        total *= size
    return total


def build_kernel(source: KernelSource, name: str, where: str) -> asc.KernelOp:
    main = source.main
    out_element = main.value.type
    inputs = len(main.inputs)
    kernel, loop = kernel_frame(source, name, OUTPUT_NAME)
    block = kernel.entry
    init = Builder(InsertPoint.before(loop))
    copy_in = Builder(InsertPoint.at_end(loop.stage("copy_in")))
    compute = Builder(InsertPoint.at_end(loop.stage("compute")))
    copy_out = Builder(InsertPoint.at_end(loop.stage("copy_out")))
    n_static = _static_numel(source)

    def pad(element: Attribute) -> bool:
        return n_static is None or n_static * asc.element_bits(element) // 8 % DATA_COPY_BYTES != 0

    env: dict[SSAValue, Value] = {}
    for value, arg in zip(source.scalars, block.args[inputs + 1 :], strict=True):
        env[value] = Scalar(arg)
    in_offset, in_count = loop.stage("copy_in").args
    queues_to_free: list[tuple[SSAValue, SSAValue]] = []
    for i, operand in enumerate(main.inputs):
        if not operand.reads:
            continue
        gm = block.args[i]
        element = operand.block_arg.type
        if operand.is_scalar:  # one element: every iteration reads element 0
            env[operand.block_arg] = Scalar(init.insert(asc.GetValueOp(gm)).result)
            continue
        queue = init.insert(asc.QueueOp(asc.Position.VECIN, element)).result
        local = copy_in.insert(asc.AllocOp(queue)).result
        copy_in.insert(asc.CopyInOp(local, gm, in_offset, in_count, pad(element)))
        copy_in.insert(asc.EnqueOp(queue, local))
        tile = compute.insert(asc.DequeOp(queue)).result
        env[operand.block_arg] = Tile(tile)
        queues_to_free.append((queue, tile))
    out_queue = init.insert(asc.QueueOp(asc.Position.VECOUT, out_element)).result
    out_tile = compute.insert(asc.AllocOp(out_queue)).result

    rules = AscendcBodyRules(init, compute, loop.stage("compute").args[1], where)
    rules.translate_all(main.live_ops(), env)
    _write_result(rules, env[main.value], out_tile)
    compute.insert(asc.EnqueOp(out_queue, out_tile))
    for queue, tile in queues_to_free:
        compute.insert(asc.FreeOp(queue, tile))

    out_offset, out_count = loop.stage("copy_out").args
    result = copy_out.insert(asc.DequeOp(out_queue)).result
    copy_out.insert(asc.CopyOutOp(block.args[inputs], out_offset, result, out_count,
                                  pad(out_element)))  # fmt: skip
    copy_out.insert(asc.FreeOp(out_queue, result))
    return kernel


def _write_result(rules: AscendcBodyRules, value: Value, out_tile: SSAValue) -> None:
    """Make the Compute stage's last write land in the output tile."""
    if isinstance(value, Mask):
        raise level2.Level2ContractError(out_tile.owner, "a body yields a number, not a comparison")
    if isinstance(value, Scalar):
        rules.compute.insert(asc.DuplicateOp(out_tile, value.value, rules.count))
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
    rules.materialize(value, into=out_tile)


# --------------------------------------------------------------------------- host graph


def _rewrite_host(source: KernelSource, kernel_name: str, broadcast: bool = True) -> None:
    main = source.main
    builder = Builder(InsertPoint.before(main.op))
    sizes: list[SSAValue] = []
    shape: list[int] = []
    for size in source.main.loop_sizes():
        if isinstance(size, int):
            shape.append(size)
            continue
        i, axis = size
        index = builder.insert(arith.ConstantOp(IntegerAttr(axis, IndexType()))).result
        sizes.append(builder.insert(tensor.DimOp(main.inputs[i].value, index)).result)
        shape.append(DYNAMIC_INDEX)
    inputs: list[SSAValue] = []
    for operand in source.tensor_inputs:
        value = operand.value
        if broadcast and operand.reads and _needs_broadcast(operand, main.loops):
            target = TensorType(operand.block_arg.type, shape)
            value = builder.insert(asc.BroadcastToOp(value, sizes, target)).result
        inputs.append(value)
    maps = [AffineMapAttr(affine_map(o.index_map, main.loops)) for o in source.tensor_inputs]
    launch = builder.insert(
        asc.LaunchOp(
            kernel_name, inputs, sizes, source.scalars, maps, TensorType(main.value.type, shape)
        )
    )
    result = launch.result
    if main.reduces:
        out_type = _tensor(main.op.results[0])
        out_map = AffineMapAttr(affine_map(main.output.index_map, main.loops))
        result = builder.insert(asc.ReduceSumOp(result, out_map, out_type)).result
    if source.narrowing is not None:
        narrow_type = _tensor(source.narrowing.results[0])
        result = builder.insert(
            asc.TensorCastOp(result, narrow_type, asc.RoundMode.CAST_RINT)
        ).result
        source.narrowing.results[0].replace_all_uses_with(result)
        Rewriter.erase_op(source.narrowing)
    else:
        main.op.results[0].replace_all_uses_with(result)
    Rewriter.erase_op(main.op, safe_erase=False)
    for reduction in reversed(source.reductions):  # computed inside the kernel
        Rewriter.erase_op(reduction.generic.op)
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
