"""`convert-linalg-to-hfusion`: level-2 IR → the HFusion form that AscendNPU IR takes.

AscendNPU IR's HFusion pipeline (`bishengir-opt --lower-hfusion-pipeline`) fuses, schedules
and tiles named elementwise ops on tensors, and rejects a `linalg.generic` whose body holds
more than one op. Per signature function, read through lossgrad_compiler.level2, the pass
replaces the elementwise `linalg.generic` (and the narrowing one after a sum) by:

* per input the body reads: a one-element input becomes a scalar (`tensor.extract`, widened
  by a scalar `arith.extf`) unless exp or log reads it or the scalar unit and a vector op
  would both read its load; any other input is widened at its own shape (`hfusion.cast`),
  its broadcast 1s collapsed (`tensor.collapse_shape`) and broadcast to the iteration shape
  (`linalg.broadcast`);
* the body, one named op per scalar op in level 2's order (hfusion_body_rules.py), so half
  types are computed in f32 and rounded once, as level 2 does;
* a result summed over broadcast dimensions: `linalg.reduce` (addf from the fill's constant)
  over the reduction loops, `tensor.expand_shape` back to the operand's broadcast 1s (a
  `linalg.broadcast` of the one element when all its dimensions are 1s), then the narrowing
  `hfusion.cast`, or, for a sum with no narrowing, `max(sum, sum)`: the same numbers, and
  what keeps AscendNPU IR 1.2.0's reduction schedule from summing into a buffer it never
  initialised (see `Shapes._not_returned_as_reduced`).

A classification function (docs/level2.md, "Beyond elementwise") is read the same way: a
class-index input is loaded like any other (an i32 one widened by `hfusion.cast` to i64) and
broadcast along the loops its map skips (target along the class loop, weight along the
rows), the class position is an `hfusion.arange` along its loop, broadcast, and a rounding
of a scalar to a half type is a 0-d cast kept through a bitcast pair (`Shapes.rounded`). Each
value check's generic (the target check) becomes the same named ops over its own iteration
space, its count a `linalg.reduce` of `addi` into the 0-d i64 and `max(s, s)`, returned
where the check's result was.

The function keeps its name, arguments, results, the lossgrad.* attributes and the scale's
scalar ops, and gains `hacc.entry` and `hacc.function_kind = #hacc.function_kind<HOST>`.
IR outside docs/level2.md raises Level2ContractError. Float64 (the vector units have no fp64)
and the run-time-parameter form (AscendNPU IR 1.2.0 crashes on an f64 scalar argument) raise
UnsupportedByBackendError naming what to use instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    i1,
    i64,
)
from xdsl.dialects.linalg.ops import BroadcastOp, FillOp, ReduceOp, YieldOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from lossgrad_compiler import level2, spec
from lossgrad_compiler.dialects.hfusion import (
    HACC_ENTRY,
    HACC_FUNCTION_KIND,
    ArangeOp,
    BinaryFn,
    BitcastOp,
    CastOp,
    CompareFn,
    CompareOp,
    ElemwiseBinaryOp,
    FunctionKind,
    FunctionKindAttr,
    SelectOp,
)
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.passes.hfusion_body_rules import (
    VECTOR_ONLY_OPS,
    Emitter,
    Gathered,
    HfusionBodyRules,
    Scalar,
    Tensor,
    Value,
)

REDUCTION_ATTR = "lossgrad.reduction"
"""Marks the op whose result is a reduction's 0-d sum, by the reduction's name (one of
`lossgrad.reductions`): the ascendnpu-ir target compiles each such sum as a kernel of its
own (backends/ascendnpu_ir/split.py)."""

Loops = tuple[int | None, ...]
"""Dimensions of a tensor by the loop each one has the size of (None: a broadcast 1)."""


@dataclass(frozen=True)
class ConvertLinalgToHfusionPass(ModulePass):
    """Convert every level-2 function of the module (see the module docstring)."""

    name = "convert-linalg-to-hfusion"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            convert_function(function)


def convert_function(function: func.FuncOp) -> None:
    _convert(function, _loads_both_units_read(function))


def _loads_both_units_read(function: func.FuncOp) -> frozenset[int]:
    """The positions of the one-element inputs that are broadcast rather than read as
    scalars, because the `tensor.extract` of each would be read both by the scalar unit's
    arithmetic and by a vector op. AscendNPU IR 1.2.0 fails to outline many such kernels
    ("outline single kernel failed", its fusion kind inferred UNKNOWN): HuberLossBackward in
    float32 with a 0-d grad_output, whose `(-g)*delta` and `g*delta` are scalar and `d*g` a
    vector op. A widened load is read by its one `arith.extf` only, and compiles. The rule
    is wider than the failure (bishengir takes some mixed chains, such as `(d*(g*c))*g`, and
    not `(d*g)*(g*c)`); no narrower condition was pinned down. Broadcasting changes no
    value, only which unit computes the scalar part. Found by converting a copy: each
    refusal turns the refused input's ops into vector ops, which may leave another load
    read by both, hence the loop."""
    refused: frozenset[int] = frozenset()
    while True:
        trial = function.clone()
        mixed = {
            position
            for position, load in _convert(trial, refused).items()
            if _read_by_both_units(load)
        }
        if mixed <= refused:
            return refused
        refused |= mixed


def _read_by_both_units(load: SSAValue) -> bool:
    users = [use.operation for use in load.uses]
    scalar = [u for u in users if u.dialect_name() in ("arith", "math")]
    return bool(scalar) and len(scalar) < len(users)


def _convert(function: func.FuncOp, refused: frozenset[int]) -> dict[int, SSAValue]:
    """Convert in place, every one-element input at a position in `refused` broadcast; the
    scalar loads made, by input position."""
    f = level2.analyze_function(function)
    _check_supported(f)
    sums = {r.position: _convert_side(f, r.generic, (r.input,)) for r in f.reductions}
    for reduction in f.reductions:  # marked for split.py: a kernel of its own
        sums[reduction.position].owner.attributes[REDUCTION_ATTR] = StringAttr(reduction.name)
    builder = Builder(InsertPoint.before(f.main.op))
    shapes = Shapes(builder, f, refused)
    env: dict[SSAValue, Value] = {}
    for operand in f.operands:
        if operand.reads:
            env[operand.loaded] = shapes.load(operand)
    for position, summed in sums.items():
        read = f.main.inputs[position]
        if read.reads:  # a 0-d sum computed here: broadcast, never a scalar of the kernel
            env[read.block_arg] = Tensor(shapes.spread(summed, ()))
    _translate(f, shapes, f.compute_ops, f.value, env, (f.narrowing or f.main.op).results[0])
    for generic in (f.narrowing, f.main.op):
        if generic is not None:
            Rewriter.erase_op(generic)
    for check in f.checks:
        _convert_side(f, check.generic, check.inputs)
    _erase_dead_ops(function.body.block)
    function.attributes[HACC_ENTRY] = UnitAttr()
    function.attributes[HACC_FUNCTION_KIND] = FunctionKindAttr(FunctionKind.HOST)
    return shapes.scalar_loads


def _translate(
    f: level2.Level2Function,
    shapes: Shapes,
    ops: tuple[Operation, ...],
    value: SSAValue,
    env: dict[SSAValue, Value],
    replaced: SSAValue,
) -> SSAValue:
    """The body ops of one generic as named ops over its iteration space, put in place of
    `replaced` (the generic's result); the value that replaced it."""
    generic = shapes.generic
    for captured in generic.captured:
        if isinstance(captured.type, TensorType):
            if captured not in f.function.body.block.args or captured.type.get_num_dims() != 1:
                raise level2.Level2ContractError(
                    generic.op, "a body reads scalars from above it, or gathers from an input"
                )
            env[captured] = Gathered(captured)
        else:
            env[captured] = Scalar(captured)
    if 0 in shapes.loop_sizes:
        result = shapes.nothing_to_compute()
    else:
        emitter = Emitter(shapes.builder.insert, shapes.iteration_empty, shapes.fill)
        emitter.arange = shapes.arange
        emitter.rounded = shapes.rounded
        emitter.gather = shapes.gather
        HfusionBodyRules(emitter, f.name).translate_all(ops, env)
        computed = env[value]
        if not isinstance(computed, Scalar | Tensor):
            raise level2.Level2ContractError(
                generic.op, "a body computes a number, not a comparison or a position"
            )
        result = shapes.finish(computed)
    if result.type != replaced.type:
        raise level2.Level2ContractError(
            generic.op,
            f"the iteration space gives {result.type}, the function returns {replaced.type}",
        )
    replaced.replace_all_uses_with(result)
    return result


def _convert_side(
    f: level2.Level2Function, generic: level2.Level2Generic, inputs: tuple[str, ...]
) -> SSAValue:
    """A generic beside the gradient, a check's count or a reduction the gradient reads
    (docs/level2.md, "Beyond elementwise"), in the same form: its inputs (function inputs,
    by `inputs`) loaded (an i32 target widened by `hfusion.cast`), its body as named ops,
    its sum a `linalg.reduce` into the 0-d result (`addi` into i64 for a count, `addf` into
    C for a reduction; then `max(s, s)`, as for a float32 sum). What replaced its result."""
    builder = Builder(InsertPoint.before(generic.op))
    shapes = Shapes(builder, f, generic=generic)
    env: dict[SSAValue, Value] = {}
    widenings: set[Operation] = set()
    for k, (name, operand) in enumerate(zip(inputs, generic.inputs, strict=True)):
        users = [use.operation for use in operand.block_arg.uses]
        widening = users[0] if len(users) == 1 and isinstance(users[0], arith.ExtSIOp) else None
        if widening is not None:
            widenings.add(widening)
        argument = f.function.body.block.args[f.input_names.index(name)]
        loaded = level2.Level2Operand(name, k, argument, operand, widening)
        if loaded.reads:
            env[loaded.loaded] = shapes.load(loaded)
    ops = tuple(o for o in generic.body_ops if o not in widenings)
    result = _translate(f, shapes, ops, generic.value, env, generic.op.results[0])
    Rewriter.erase_op(generic.op)
    return result


def _check_supported(f: level2.Level2Function) -> None:
    if f.parameters:
        raise UnsupportedByBackendError(
            f.name,
            "run-time parameters",
            "the HFusion form takes the default lower-lossgrad form (runtime_parameters=false): "
            "AscendNPU IR 1.2.0 crashes on the f64 beta argument",
        )
    if f.compute is spec.FLOAT64 or any(o.storage is spec.FLOAT64 for o in f.operands):
        raise UnsupportedByBackendError(
            f.name,
            "element type",
            "float64 is not supported by AscendNPU IR (Ascend vector units have no fp64 "
            "arithmetic); use the onnx, ort or iree target",
        )


def _erase_dead_ops(block: Block) -> None:
    """Erase what the generics left unused (their fills, empties and constants)."""
    for op in reversed(list(block.ops)):
        if op is not block.last_op and op.results and all(not r.uses for r in op.results):
            Rewriter.erase_op(op)


class Shapes:
    """Builds the tensors of one function: dynamic sizes, empties, loads, broadcasts, and the
    result's sum and reshape."""

    def __init__(
        self,
        builder: Builder,
        f: level2.Level2Function,
        refused: frozenset[int] = frozenset(),
        generic: level2.Level2Generic | None = None,
    ) -> None:
        self.builder = builder
        self.f = f
        self.generic = generic or f.main  # the gradient's, or a check's
        is_main = self.generic is f.main
        self.narrowing = f.narrowing if is_main else None
        self.final_truncf = f.final_truncf if is_main else None
        self.value_type = (f.value if is_main else self.generic.value).type
        self.refused = refused  # positions of one-element inputs broadcast, not loaded
        self.scalar_loads: dict[int, SSAValue] = {}  # the tensor.extract of each, by position
        self.loop_sizes: list[level2.LoopSize | SSAValue] = list(self.generic.loop_sizes())
        self.reduced: list[bool] = list(self.generic.reduction_loops)
        self.lifted = _lifted_class_loop(self.generic)
        """A class loop the level-2 generic does not have, added for its gather (see
        `gather`); None for most generics."""
        if self.lifted is not None:
            source = self.lifted_source = _gathered_sources(self.generic)[0]
            size = source.type.get_shape()[0]  # type: ignore[attr-defined]
            self.loop_sizes.append(size if size >= 0 else _UNSET)
            self.reduced.append(True)
        self.loops = len(self.loop_sizes)
        self.iteration: Loops = tuple(range(self.loops))
        self._dims: dict[tuple[SSAValue, int], SSAValue] = {}
        self._empties: dict[tuple[Loops, Attribute], SSAValue] = {}

    # ------------------------------------------------------------------ sizes and empties

    def _dim(self, value: SSAValue, axis: int) -> SSAValue:
        key = (value, axis)
        if key not in self._dims:
            index = self.builder.insert(arith.ConstantOp(IntegerAttr(axis, IndexType())))
            self._dims[key] = self.builder.insert(tensor.DimOp(value, index.result)).result
        return self._dims[key]

    def _loop_size(self, loop: int) -> int | SSAValue:
        size = self.loop_sizes[loop]
        if isinstance(size, int):
            return size
        if loop == self.lifted:
            return self._dim(self.lifted_source, 0)
        assert isinstance(size, tuple)
        operand, axis = size
        return self._dim(self.generic.inputs[operand].value, axis)

    def _sizes(self, loops: Loops) -> list[int | SSAValue]:
        return [1 if loop is None else self._loop_size(loop) for loop in loops]

    def empty(self, loops: Loops, element: Attribute) -> SSAValue:
        key = (loops, element)
        if key not in self._empties:
            sizes = self._sizes(loops)
            shape = [s if isinstance(s, int) else DYNAMIC_INDEX for s in sizes]
            dynamic = [s for s in sizes if not isinstance(s, int)]
            op = tensor.EmptyOp(dynamic, TensorType(element, shape))
            self._empties[key] = self.builder.insert(op).tensor
        return self._empties[key]

    def iteration_empty(self, element: Attribute) -> SSAValue:
        return self.empty(self.iteration, element)

    def fill(self, scalar: SSAValue, element: Attribute) -> SSAValue:
        out = self.iteration_empty(element)
        return self.builder.insert(FillOp([scalar], [out], [out.type])).results[0]

    def arange(self, loop: int, element: Attribute) -> SSAValue:
        """The position on `loop` at every element of the iteration space: a 1-d
        `hfusion.arange` along that loop, broadcast along the others. (AscendNPU IR 1.2.0
        rejects an arange over several dimensions once it drops a static unit dimension:
        "'linalg.index' op expected dim (1) to be lower than the number of loops (1)".)"""
        zero, one = (
            self.builder.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result
            for v in (0, 1)
        )
        line = self.empty((loop,), element)
        value = self.builder.insert(ArangeOp(zero, [one], line)).result
        if self.loops == 1:
            return value
        out = self.iteration_empty(element)
        added = [k for k in self.iteration if k != loop]
        op = BroadcastOp(value, out, DenseArrayBase.from_list(i64, added))
        return self.builder.insert(op).results[0]

    def rounded(self, scalar: SSAValue, element: Attribute) -> SSAValue:
        """A scalar rounded to `element`: filled into a 0-d tensor, `hfusion.cast` there,
        its bits passed through `hfusion.bitcast` to an integer and back, then broadcast to
        the iteration shape. AscendNPU IR 1.2.0 folds a cast to a narrower float and back
        into nothing, on scalars and on tensors alike (through a broadcast too), and the
        rounding PyTorch does is lost (a bfloat16 NLLLossBackward mean case came out one
        ulp off); the bitcasts, which change no bit, keep it."""
        one = self.empty((), scalar.type)
        filled = self.builder.insert(FillOp([scalar], [one], [one.type])).results[0]
        cast = self.builder.insert(CastOp(filled, self.empty((), element))).results[0]
        bits = IntegerType(element.bitwidth)  # type: ignore[attr-defined]
        as_bits = self.builder.insert(BitcastOp(cast, self.empty((), bits))).results[0]
        cast = self.builder.insert(BitcastOp(as_bits, self.empty((), element))).results[0]
        if self.loops == 0:
            return cast
        every = DenseArrayBase.from_list(i64, range(self.loops))
        out = self.iteration_empty(element)
        return self.builder.insert(BroadcastOp(cast, out, every)).results[0]

    def spread(self, value: SSAValue, kept: Loops) -> SSAValue:
        """A tensor whose dimensions are the loops `kept`, broadcast to the iteration shape."""
        element = value.type.get_element_type()  # type: ignore[attr-defined]
        if kept == self.iteration:
            return self._as_iteration_type(value, element)
        out = self.iteration_empty(element)
        added = [loop for loop in self.iteration if loop not in kept]
        return self.builder.insert(
            BroadcastOp(value, out, DenseArrayBase.from_list(i64, added))
        ).results[0]

    def gather(self, op: Operation, source: SSAValue, index: SSAValue) -> SSAValue:
        """`source[index]` at every element, without an address: along the class loop k
        (the loop the generic reads `source` on, or the lifted one), `select(j == index,
        source_j, -0.0)` summed over k from -0.0, and broadcast back along k. The index does
        not vary along k (level 2's verifier: a select of the row's target), so one term
        of each sum is source[index] and the others -0.0, which adds exactly to any float:
        the sum is source[index] bit for bit, NaN and signed zeros too. On the lifted loop
        the selection is left unsummed: the generic's own sum adds it up
        (`_lifted_class_loop`)."""
        loop = self.lifted if self.lifted is not None else _class_loop(self.generic, source)
        if loop is None:
            raise level2.Level2ContractError(
                op, "gathers from an input that the iteration space reads along a loop"
            )
        element = source.type.get_element_type()  # type: ignore[attr-defined]
        values = self.spread(source, (loop,))
        position = self.arange(loop, index.type.get_element_type())  # type: ignore[attr-defined]
        hit = CompareOp(position, index, self.iteration_empty(i1), CompareFn.VEQ)
        hits = self.builder.insert(hit).results[0]
        minus_zero = self.builder.insert(arith.ConstantOp(FloatAttr(-0.0, element))).result
        chosen = SelectOp(hits, values, minus_zero, self.iteration_empty(element))
        selected = self.builder.insert(chosen).results[0]
        if loop == self.lifted:
            return selected
        kept: Loops = tuple(k for k in self.iteration if k != loop)
        init_empty = self.empty(kept, element)
        init = self.builder.insert(FillOp([minus_zero], [init_empty], [init_empty.type]))
        body = Block(arg_types=[element, element])
        add = arith.AddfOp(body.args[0], body.args[1])
        body.add_ops([add, YieldOp(add.result)])
        reduce = ReduceOp(
            selected, init.results[0], DenseArrayBase.from_list(i64, [loop]), Region(body)
        )
        return self.spread(self.builder.insert(reduce).results[0], kept)

    # ------------------------------------------------------------------ inputs

    def load(self, operand: level2.Level2Operand) -> Scalar | Tensor:
        """The operand as the body reads it (widened when it is read widened)."""
        g = operand.generic
        compute = operand.widening.result.type if operand.widening else None
        if (
            g.is_scalar
            and self.loops > 0
            and operand.position not in self.refused
            and not _reaches_vector_only_op(operand.loaded)
        ):
            zero = self.builder.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
            element = operand.argument.type.get_element_type()  # type: ignore[attr-defined]
            extract = tensor.ExtractOp(operand.argument, [zero] * g.rank, element)
            value = self.builder.insert(extract).result
            self.scalar_loads[operand.position] = value
            if operand.widening is not None:
                widened = type(operand.widening)(value, compute)  # type: ignore[arg-type]
                value = self.builder.insert(widened).results[0]
            return Scalar(value)
        value = operand.argument
        if compute is not None:
            out = self.empty(g.index_map, compute)
            value = self.builder.insert(CastOp(value, out)).results[0]
        return Tensor(self._broadcast(value, g))

    def _broadcast(self, value: SSAValue, g: level2.GenericOperand) -> SSAValue:
        element = value.type.get_element_type()  # type: ignore[attr-defined]
        kept = [loop for loop in g.index_map if loop is not None]
        if kept == list(self.iteration):
            return self._as_iteration_type(value, element)
        if len(kept) != g.rank:
            collapsed = TensorType(element, [value.type.get_shape()[a] for a in _kept_axes(g)])  # type: ignore[attr-defined]
            value = self.builder.insert(
                tensor.CollapseShapeOp.build(
                    operands=[value],
                    result_types=[collapsed],
                    properties={"reassociation": _reassociation(g.index_map)},
                )
            ).results[0]
        out = self.iteration_empty(element)
        added = [loop for loop in self.iteration if loop not in kept]
        op = BroadcastOp(value, out, DenseArrayBase.from_list(i64, added))
        return self.builder.insert(op).results[0]

    def _as_iteration_type(self, value: SSAValue, element: Attribute) -> SSAValue:
        """The same tensor typed as the iteration space (a static size may be known only from
        another operand)."""
        wanted = self.iteration_empty(element).type
        if value.type == wanted:
            return value
        return self.builder.insert(tensor.CastOp(value, wanted)).dest  # type: ignore[arg-type]

    # ------------------------------------------------------------------ the result

    def finish(self, computed: Scalar | Tensor) -> SSAValue:
        """The function's result from the per-element value (in the compute type)."""
        compute = self.value_type
        value = (
            computed.value if isinstance(computed, Tensor) else self.fill(computed.value, compute)
        )
        if not self.generic.reduces:
            if self.final_truncf is not None:
                out = self.iteration_empty(self.final_truncf.result.type)
                value = self.builder.insert(CastOp(value, out)).results[0]
            return value
        return self._narrowed(self._sum(value, compute))

    def nothing_to_compute(self) -> SSAValue:
        """The result of a statically empty iteration space: an empty tensor, or, where it is
        summed into a non-empty result, the sum of nothing (the fill's constant), rounded
        like any sum. (AscendNPU IR 1.2.0 dies of a segmentation fault on the named ops
        over an empty tensor.)"""
        if not self.generic.reduces:
            element = self.final_truncf.result.type if self.final_truncf else self.value_type
            return self.iteration_empty(element)
        compute = self.value_type
        output_map = self.generic.output.index_map
        out = self.empty(output_map, compute)
        value = self.builder.insert(
            FillOp([self._init_constant(compute)], [out], [out.type])
        ).results[0]
        return self._narrowed(value)

    def _init_constant(self, compute: Attribute) -> SSAValue:
        accumulation = self.generic.accumulation
        if accumulation is None or accumulation.init is None:
            raise level2.Level2ContractError(
                self.generic.op, "a sum starts from a linalg.fill constant"
            )
        init = (
            IntegerAttr(int(accumulation.init), compute)
            if isinstance(compute, IntegerType)
            else FloatAttr(accumulation.init, compute)  # type: ignore[arg-type]
        )
        return self.builder.insert(arith.ConstantOp(init)).result

    def _narrowed(self, value: SSAValue) -> SSAValue:
        """A sum rounded to the result type by the narrowing generic's cast, if there is one."""
        narrowing = self.narrowing
        if narrowing is None:
            return value
        element = narrowing.results[0].type.get_element_type()  # type: ignore[attr-defined]
        out = self.empty(self.generic.output.index_map, element)
        return self.builder.insert(CastOp(value, out)).results[0]

    def _not_returned_as_reduced(self, summed: SSAValue, kept: Loops) -> SSAValue:
        """A sum that no narrowing cast follows, passed through `max(s, s)`, which is `s` for
        every float (NaN, ±0 and ±inf too) and one vector max per result element. Returned
        straight from the `linalg.reduce`, AscendNPU IR 1.2.0's reduction schedule (fusion
        kind ANY_PBR) drops the fill of the reduction's init and reduces the tiles' partial
        sums into a buffer nothing wrote; with the max (or a narrowing cast) between the
        reduce and the return it keeps the fill. What else was tried: bishengir folds `s * 1`
        and `s + 0` away (the defect stays), `s * fill(1)` still sums into the unwritten
        buffer, a `linalg.copy` fails its input/output caching, and an f32-to-f32
        `hfusion.cast` keeps the fill but becomes a `vcast` with a rounding mode, whose
        effect on the device could not be checked here."""
        if self.narrowing is not None:
            return summed
        out = self.empty(kept, summed.type.get_element_type())  # type: ignore[attr-defined]
        op = ElemwiseBinaryOp(summed, summed, out, BinaryFn.MAX_SIGNED)
        return self.builder.insert(op).results[0]

    def _sum(self, value: SSAValue, compute: Attribute) -> SSAValue:
        """`linalg.reduce` over the reduction loops, reshaped to the output's broadcast 1s."""
        main = self.generic
        accumulation = main.accumulation
        assert accumulation is not None
        output_map = main.output.index_map
        kept: Loops = tuple(loop for loop in output_map if loop is not None)
        init_value = self._init_constant(compute)
        init_empty = self.empty(kept, compute)
        init = self.builder.insert(FillOp([init_value], [init_empty], [init_empty.type])).results[0]
        reduced = [loop for loop in self.iteration if self.reduced[loop]]
        body = Block(arg_types=[compute, compute])
        element, acc = body.args
        adds = arith.AddiOp if isinstance(compute, IntegerType) else arith.AddfOp
        add = adds(acc, element) if accumulation.accumulator_first else adds(element, acc)
        body.add_ops([add, YieldOp(add.result)])
        op = ReduceOp(value, init, DenseArrayBase.from_list(i64, reduced), Region(body))
        summed = self._not_returned_as_reduced(self.builder.insert(op).results[0], kept)
        if len(kept) == len(output_map):
            return summed
        if not kept:
            # All 1s: MLIR's expand_shape from rank 0 (no reassociation) is one xDSL 0.74's
            # verifier rejects; broadcasting the one element is the same tensor.
            out = self.empty(output_map, compute)
            every_axis = DenseArrayBase.from_list(i64, range(len(output_map)))
            return self.builder.insert(BroadcastOp(summed, out, every_axis)).results[0]
        target = self.empty(output_map, compute).type
        assert isinstance(target, TensorType)
        sizes = self._sizes(output_map)
        expand = tensor.ExpandShapeOp(
            summed,
            [s for s in sizes if not isinstance(s, int)],
            _reassociation(output_map),
            [s if isinstance(s, int) else DYNAMIC_INDEX for s in sizes],
            target,
        )
        return self.builder.insert(expand).result


_UNSET = (-1, -1)
"""The size of a dynamic lifted loop, read from its gather's source (`Shapes._loop_size`)."""


def _gathered_sources(generic: level2.Level2Generic) -> list[SSAValue]:
    """The tensors from above that the body gathers from (the weight)."""
    return [v for v in generic.captured if isinstance(v.type, TensorType)]


def _class_loop(generic: level2.Level2Generic, source: SSAValue) -> int | None:
    """The loop the generic reads a rank-1 `source` on (the weight's class loop), if any."""
    for operand in generic.inputs:
        if operand.value == source and len(operand.index_map) == 1:
            return operand.index_map[0]
    return None


def _lifted_class_loop(generic: level2.Level2Generic) -> int | None:
    """The loop added to a summing generic that gathers from a tensor it reads along no loop
    (the kept weight, a sum of w[t] over target): its body is computed over one loop more,
    the classes, where the gather is `select(j == t, w_j, -0.0)`, and its sum adds over
    that loop too. AscendNPU IR 1.2.0 cannot outline the literal form, a sum over the
    classes (the gather) feeding the sum over the rows ("outline single kernel failed").
    Exact only when the sum is linear in the gathered value with -0.0 kept: the value may
    pass from the gather to the summed term through `extf` and through either branch of a
    `select` whose other branch is a zero constant, nothing else; other bodies are refused."""
    sources = _gathered_sources(generic)
    if not sources or _class_loop(generic, sources[0]) is not None:
        return None
    if len(sources) != 1 or not generic.reduces or not all(generic.reduction_loops):
        raise level2.Level2ContractError(
            generic.op, "gathers from one input, read along a loop or summed over all loops"
        )
    pending = [op.result for op in generic.body_ops if isinstance(op, tensor.ExtractOp)]
    while pending:
        value = pending.pop()
        if value == generic.value:
            continue
        for use in value.uses:
            user = use.operation
            if isinstance(user, arith.ExtFOp) or (
                isinstance(user, arith.SelectOp)
                and use.index > 0
                and _is_zero(user.operands[3 - use.index])
            ):
                pending.append(user.results[0])
                continue
            raise level2.Level2ContractError(
                user,
                "a sum over a gathered value reaches it only through extf and selects "
                "against 0 (the gather is summed over the classes with the rest)",
            )
    return generic.loops


def _is_zero(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, FloatAttr)
        and owner.value.value.data == 0.0
    )


def _reaches_vector_only_op(value: SSAValue) -> bool:
    """Whether exp or log reads the value, directly or through other body ops. Such a
    one-element input is broadcast like any other: AscendNPU IR 1.2.0 fails to outline a
    kernel ("outline single kernel failed") where a scalar read from an input also feeds the
    scalar unit's arithmetic beside the filled tensor exp/log need."""
    pending, seen = [value], set()
    while pending:
        for use in pending.pop().uses:
            user = use.operation
            if isinstance(user, VECTOR_ONLY_OPS):
                return True
            if user not in seen and user.results:
                seen.add(user)
                pending.extend(user.results)
    return False


def _kept_axes(g: level2.GenericOperand) -> list[int]:
    return [axis for axis, loop in enumerate(g.index_map) if loop is not None]


def _reassociation(index_map: Loops) -> ArrayAttr[ArrayAttr[IntegerAttr]]:
    """Groups of a tensor's dimensions around each non-broadcast one: a broadcast 1 joins
    the group of the dimension before it (leading ones join the first group)."""
    groups: list[list[int]] = []
    pending: list[int] = []
    for axis, loop in enumerate(index_map):
        if loop is None:
            (groups[-1] if groups else pending).append(axis)
        else:
            groups.append([*pending, axis])
            pending = []
    return ArrayAttr([ArrayAttr([IntegerAttr(a, i64) for a in group]) for group in groups])
