"""The one analysis of level 2: what a `linalg.generic` and a lowered signature function
compute, and how (docs/level2.md). Every backend reads level 2 through these records."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerType, ModuleOp, Signedness, TensorType
from xdsl.dialects.linalg.ops import FillOp, GenericOp, YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap

from lossgrad_compiler import spec
from lossgrad_compiler.dialects.lossgrad import element_float_type
from lossgrad_compiler.level2.contract import Level2ContractError, constant_value
from lossgrad_compiler.level2.identity import (
    DIVISOR_ATTR,
    PARAMETER_N,
    parameter_type,
    read_checks,
    read_divisor,
    read_identity,
    read_inputs,
    read_parameters,
    read_reductions,
)

LoopSize = int | tuple[int, int]
"""A loop's size: static, or (input, axis) of the input dimension that gives it."""

IndexMap = tuple[int | None, ...]
"""Per operand dimension: the loop that reads it, or None for the constant 0 of a
broadcast 1. The elementwise operators' maps are right-aligned (loop = loops - rank +
dimension); a classification operator's keep the order of the loops but skip some (target
[N] of a [N, C] space reads d0, weight [C] reads d1)."""

Element = spec.FloatType | spec.IndexType
"""An operand's element type: one of the four floats, or a class index (i64, i32)."""


@dataclass(frozen=True)
class GenericOperand:
    """One operand of a generic: its value, block argument, type, shape and map."""

    value: SSAValue
    block_arg: BlockArgument
    element: Element
    shape: tuple[int | None, ...]  # None: dynamic
    index_map: IndexMap

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_scalar(self) -> bool:
        """One element for the whole iteration space (rank 0, or every dim a broadcast 1)."""
        return all(loop is None for loop in self.index_map)

    def is_identity(self, loops: int) -> bool:
        """Reads every loop in order: no broadcasting."""
        return self.index_map == tuple(range(loops))

    @property
    def reads(self) -> bool:
        return bool(self.block_arg.uses)


@dataclass(frozen=True)
class Accumulation:
    """How a summing generic adds each element: `addf %acc, %v` (`addi` for the target
    check's count) into a filled output."""

    add: arith.AddfOp | arith.AddiOp
    accumulator_first: bool
    init: float | None  # the constant the output is filled with (None: not a fill)


@dataclass(frozen=True)
class Level2Generic:
    op: GenericOp
    loops: int
    reduction_loops: tuple[bool, ...]
    inputs: tuple[GenericOperand, ...]
    output: GenericOperand
    body_ops: tuple[Operation, ...]  # the body but linalg.yield and the accumulating addf
    value: SSAValue  # each iteration's value: the yielded one, or what is added to %acc
    accumulation: Accumulation | None
    captured: tuple[SSAValue, ...]  # values from above the body, in first-use order

    @property
    def body(self) -> Block:
        return self.op.body.block

    @property
    def reduces(self) -> bool:
        return any(self.reduction_loops)

    def live_ops(self) -> list[Operation]:
        """The body ops the value depends on, in body order (a dead op computes nothing)."""
        live: set[Operation] = set()
        stack = [self.value]
        while stack:
            owner = stack.pop().owner
            inside = isinstance(owner, Operation) and owner.parent_block() is self.body
            if inside and owner not in live:
                live.add(owner)
                stack.extend(owner.operands)
        return [op for op in self.body_ops if op in live]

    def loop_sizes(self) -> list[LoopSize]:
        """Per loop: its static size, or (input, axis) of an input whose dimension gives it
        at run time (a dynamic dimension is never broadcast, so any such input will do)."""
        sizes: list[LoopSize] = []
        for loop in range(self.loops):
            static, dynamic = 1, None
            for i, operand in enumerate(self.inputs):
                for axis, read in enumerate(operand.index_map):
                    if read != loop:
                        continue
                    size = operand.shape[axis]
                    if size is not None and size != 1:
                        static = size
                    elif size is None and dynamic is None:
                        dynamic = (i, axis)
            sizes.append(static if static != 1 or dynamic is None else dynamic)
        return sizes


def index_map(op: Operation, amap: AffineMap, value_type: Attribute, loops: int) -> IndexMap:
    """The IndexMap of an operand, after checking docs/level2.md's rule for it."""
    if not isinstance(value_type, TensorType):
        raise Level2ContractError(op, f"operand of type {value_type} is not a ranked tensor")
    shape = value_type.get_shape()
    rank = len(shape)
    if amap.num_dims != loops or amap.num_symbols or len(amap.results) != rank or rank > loops:
        raise Level2ContractError(op, f"indexing map {amap} does not fit its operand")
    entries: list[int | None] = []
    previous = -1
    for j, expr in enumerate(amap.results):
        if isinstance(expr, AffineDimExpr) and expr.position > previous:
            entries.append(expr.position)
            previous = expr.position
        elif isinstance(expr, AffineConstantExpr) and expr.value == 0 and shape[j] == 1:
            entries.append(None)
        else:
            raise Level2ContractError(
                op,
                f"indexing map {amap}: result {j} must be a loop after the ones before it, "
                "or 0 at a size-1 dimension",
            )
    return tuple(entries)


def is_right_aligned(index_map_: IndexMap, loops: int) -> bool:
    """Whether each dimension j of a rank-r operand is read on loop loops - r + j (or is a
    broadcast 0): the elementwise operators' maps."""
    rank = len(index_map_)
    return all(loop is None or loop == loops - rank + j for j, loop in enumerate(index_map_))


def tensor_shape(value: SSAValue) -> tuple[int | None, ...]:
    t = value.type
    assert isinstance(t, TensorType)
    return tuple(None if d < 0 else d for d in t.get_shape())


def _float_element(op: Operation, value: SSAValue) -> spec.FloatType:
    t = value.type
    element = element_float_type(t.element_type) if isinstance(t, TensorType) else None
    if element is None:
        raise Level2ContractError(op, f"operand type {t} is not a tensor of a level-2 float")
    return element


def _element(op: Operation, value: SSAValue) -> Element:
    """A float element type, or a class index (a signless i64/i32)."""
    t = value.type
    if isinstance(t, TensorType) and isinstance(t.element_type, IntegerType):
        found = spec.index_type(f"i{t.element_type.width.data}")
        if found is not None and t.element_type.signedness.data is Signedness.SIGNLESS:
            return found
    return _float_element(op, value)


def analyze_generic(op: GenericOp) -> Level2Generic:
    """The structure of one level-2 `linalg.generic` (Level2ContractError if it has none)."""
    if len(op.outputs) != 1 or len(op.results) != 1:
        raise Level2ContractError(op, "must have exactly one output")
    maps = [m.data for m in op.indexing_maps]
    iterators = [str(it.data) for it in op.iterator_types]
    loops = len(iterators)
    operands = [*op.inputs, *op.outputs]
    block = op.body.block
    if len(maps) != len(operands) or len(block.args) != len(operands):
        raise Level2ContractError(op, "needs one indexing map and one block argument per operand")
    described: list[GenericOperand] = []
    for value, arg, amap in zip(operands, block.args, maps, strict=True):
        element = _element(op, value)
        if arg.type != value.type.element_type:  # type: ignore[attr-defined]
            raise Level2ContractError(op, "block argument types must be the operand elements")
        described.append(
            GenericOperand(
                value, arg, element, tensor_shape(value), index_map(op, amap, value.type, loops)
            )
        )
    output = described[-1]
    reduction_loops = tuple(it == "reduction" for it in iterators)
    if any(it not in ("parallel", "reduction") for it in iterators):
        raise Level2ContractError(op, f"iterator types must be parallel or reduction: {iterators}")
    present = {loop for loop in output.index_map if loop is not None}
    for loop, reduced in enumerate(reduction_loops):
        if reduced == (loop in present):
            raise Level2ContractError(
                op,
                f"loop d{loop} must be a reduction exactly when the output map does not read it",
            )
    yielded = block.last_op
    if not isinstance(yielded, YieldOp) or len(yielded.operands) != 1:
        raise Level2ContractError(op, "a body ends in linalg.yield of one value")
    value = SSAValue.get(yielded.operands[0])
    accumulation = None
    body_ops = [o for o in block.ops if o is not yielded]
    acc_uses = list(output.block_arg.uses)
    if any(reduction_loops):
        add = value.owner
        adds = arith.AddiOp if isinstance(output.element, spec.IndexType) else arith.AddfOp
        if not isinstance(add, adds) or output.block_arg not in (add.lhs, add.rhs):
            raise Level2ContractError(op, f"a summing body yields `{adds.name} %acc, %v`")
        if len(acc_uses) != 1:
            raise Level2ContractError(op, "the accumulator is read only by the yielded addf")
        first = add.lhs == output.block_arg
        value = SSAValue.get(add.rhs if first else add.lhs)
        accumulation = Accumulation(add, first, _fill_constant(output.value))
        body_ops = [o for o in body_ops if o is not add]
    elif acc_uses:
        raise Level2ContractError(op, "an elementwise body does not read its output")
    return Level2Generic(
        op=op,
        loops=loops,
        reduction_loops=reduction_loops,
        inputs=tuple(described[:-1]),
        output=output,
        body_ops=tuple(body_ops),
        value=value,
        accumulation=accumulation,
        captured=tuple(captured_values(block)),
    )


def _fill_constant(output: SSAValue) -> float | None:
    fill = output.owner
    if isinstance(fill, FillOp) and len(fill.inputs) == 1:
        source = SSAValue.get(fill.inputs[0]).owner
        if isinstance(source, arith.ConstantOp):
            return float(constant_value(source))
    return None


def captured_values(block: Block) -> Iterator[SSAValue]:
    """Values a block reads from above it, in first-use order, each once."""
    seen: set[SSAValue] = set()
    for op in block.ops:
        for v in op.operands:
            owner_block = v.block if isinstance(v, BlockArgument) else v.owner.parent_block()
            if owner_block is not block and v not in seen:
                seen.add(v)
                yield v


# --------------------------------------------------------------------------- one function


@dataclass(frozen=True)
class Level2Operand:
    """One input of a signature function, as the body reads it."""

    name: str  # the operator's input name (grad_output, self, target, weight, ...)
    position: int  # among the function's tensor arguments
    argument: BlockArgument  # the function argument
    generic: GenericOperand  # the same operand in the main generic
    widening: arith.ExtFOp | arith.ExtSIOp | None
    """The one extf to the compute type (extsi to i64 for an i32 class index), if it is
    read that way."""

    @property
    def storage(self) -> Element:
        return self.generic.element

    @property
    def is_class_index(self) -> bool:
        return isinstance(self.storage, spec.IndexType)

    @property
    def reads(self) -> bool:
        return self.generic.reads

    @property
    def loaded(self) -> SSAValue:
        """The body value that is this operand in the compute type."""
        return self.widening.result if self.widening is not None else self.generic.block_arg


@dataclass(frozen=True)
class Level2Scale:
    """The reduction scale: 1/n, which grad_output is multiplied by before the formula
    (spec.Scaling.GRAD_OUTPUT) or which the formula multiplies by where it says
    (RECIPROCAL), or n itself, which the formula divides by (DIVISOR)."""

    value: SSAValue | None  # the captured scalar, in the compute type (None: see _scale)
    divisor: spec.Divisor  # what n counts (the function's `lossgrad.divisor`)
    parameter: BlockArgument | None  # %n, in the runtime-parameter form
    ops: tuple[Operation, ...]  # the function ops computing `value`, in program order

    @property
    def static_value(self) -> float | None:
        """The scale itself when it is a constant (static shapes)."""
        if self.value is None:
            return None
        owner = self.value.owner
        return float(constant_value(owner)) if isinstance(owner, arith.ConstantOp) else None


@dataclass(frozen=True)
class Level2Check:
    """A check of the values (docs/level2.md, "Beyond elementwise"): a generic that counts
    the failing elements into a 0-d i64, returned after the gradient. A backend that runs
    with the values raises the rule's error (messages, by `rule`) when the count is not 0."""

    rule: str  # a messages.Rule key: "target_range"
    generic: Level2Generic
    result_index: int  # which function result the count is (the gradient is 0)
    inputs: tuple[str, ...]  # the operator inputs its generic reads, in operand order


@dataclass(frozen=True)
class Level2Reduction:
    """A sum the gradient reads (docs/level2.md, "Reductions"): a generic before the main
    one that adds a term per element of one input into a zero-filled 0-d tensor in C; the
    main generic reads its result after the function's inputs, through a map to `()`."""

    name: str  # a `lossgrad.reductions` name: kept_weight, class_weight
    generic: Level2Generic
    input: str  # the operator input it sums over (target, weight)
    position: int  # among the main generic's inputs


@dataclass(frozen=True)
class Level2Function:
    """A lowered signature function, as every backend reads it."""

    function: func.FuncOp
    op: spec.OperatorSpec
    attributes: dict[str, Any]
    parameters: dict[str, BlockArgument]  # run-time parameters by name
    operands: tuple[Level2Operand, ...]  # the present inputs, in the operator's order
    compute: spec.FloatType
    result: spec.FloatType  # the returned tensor's element type
    main: Level2Generic
    narrowing: GenericOp | None  # the all-parallel truncf generic after a sum
    final_truncf: arith.TruncFOp | None  # the elementwise body's narrowing before yield
    value: SSAValue  # per element, in the compute type, before narrowing or summing
    compute_ops: tuple[Operation, ...]  # the body ops computing `value` from the loaded operands
    scale: Level2Scale | None
    checks: tuple[Level2Check, ...] = ()  # results 1, 2, ...: counts of failing elements
    reductions: tuple[Level2Reduction, ...] = ()  # the sums before the main generic

    @property
    def name(self) -> str:
        return self.function.sym_name.data

    @property
    def loops(self) -> int:
        return self.main.loops

    @property
    def reduces(self) -> bool:
        return self.main.reduces

    def operand(self, name: str) -> Level2Operand | None:
        """The operand of an input, None when the input is absent."""
        return next((o for o in self.operands if o.name == name), None)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.operands)

    @property
    def result_operand(self) -> Level2Operand | None:
        """The operand whose shape a summed result takes (spec's `differentiates`)."""
        return self.operand(self.op.differentiates) if self.op.differentiates else None

    @property
    def captured(self) -> tuple[SSAValue, ...]:
        return self.main.captured


def analyze_function(function: func.FuncOp) -> Level2Function:
    """What a lowered signature function computes and how (Level2ContractError if it is not
    one: see docs/level2.md, "One function per signature")."""
    where = function.sym_name.data
    op, attrs = read_identity(function)
    names = read_inputs(function, op)
    parameter_names = read_parameters(function)
    block = function.body.block
    n_inputs = len(names)
    if len(block.args) != n_inputs + len(parameter_names):
        raise Level2ContractError(
            function,
            f"takes {', '.join(names)} and then its parameters "
            f"{list(parameter_names)}; it has {len(block.args)} arguments",
            where,
        )
    parameters = dict(zip(parameter_names, block.args[n_inputs:], strict=True))
    for name, arg in parameters.items():
        if arg.type != parameter_type(name):
            raise Level2ContractError(
                function, f"parameter '{name}' must be {parameter_type(name)}", where
            )
    check_rules = read_checks(function)
    reduction_names = read_reductions(function)
    all_generics = [o for o in block.ops if isinstance(o, GenericOp)]
    reduction_generics = all_generics[: len(reduction_names)]
    generics = all_generics[len(reduction_names) : len(all_generics) - len(check_rules)]
    if not 1 <= len(generics) <= 2:
        raise Level2ContractError(
            function,
            "holds one linalg.generic per reduction, one or two more, and then one per "
            f"check, found {len(all_generics)}",
            where,
        )
    main = analyze_generic(generics[0])
    arguments = list(block.args[:n_inputs])
    sums = [g.results[0] for g in reduction_generics]
    if [i.value for i in main.inputs] != [*arguments, *sums]:
        reads = ", ".join([*names, *reduction_names])
        raise Level2ContractError(generics[0], f"reads ({reads}) in order", where)
    reductions = tuple(
        _reduction(name, generic, n_inputs + k, names, arguments)
        for k, (name, generic) in enumerate(
            zip(reduction_names, reduction_generics, strict=True)
        )
    )
    narrowing = generics[1] if len(generics) == 2 else None
    results = _returned(function, 1 + len(check_rules))
    returned = results[0]
    last = narrowing if narrowing is not None else main.op
    if returned != last.results[0]:
        raise Level2ContractError(function, "returns the result of its last generic", where)
    checks = tuple(
        _check(function, rule, generic, results[k], k, names, arguments)
        for k, (rule, generic) in enumerate(
            zip(check_rules, all_generics[len(all_generics) - len(check_rules) :], strict=True),
            start=1,
        )
    )
    if narrowing is not None:
        _check_narrowing(narrowing, main)
    if not op.has_classes:
        for name, operand in zip(names, main.inputs, strict=True):
            if not is_right_aligned(operand.index_map, main.loops):
                raise Level2ContractError(
                    main.op,
                    f"'{name}': an elementwise operator's maps are right-aligned (dimension j "
                    "of a rank-r operand on loop loops - r + j)",
                    where,
                )
    operands = tuple(
        Level2Operand(name, i, arguments[i], main.inputs[i], None) for i, name in enumerate(names)
    )
    for reduction in reductions:
        if not main.inputs[reduction.position].is_scalar:
            raise Level2ContractError(
                main.op, f"reads the reduction '{reduction.name}' through a map to ()", where
            )
    types = {o.name: o.storage for o in operands if isinstance(o.storage, spec.FloatType)}
    compute = spec.compute_type(spec.promote_types(types.values()))
    operands = tuple(_with_widening(o, compute, main.op) for o in operands)
    value = main.value
    final_truncf = None
    if not main.reduces and isinstance(value.owner, arith.TruncFOp):
        final_truncf = value.owner
        value = SSAValue.get(final_truncf.input)
    if element_float_type(value.type) != compute:
        raise Level2ContractError(
            main.op, f"the per-element value must be computed in {compute.mlir}", where
        )
    result = _float_element(function, returned)
    if result != op.result_type(types):
        raise Level2ContractError(
            function, f"{op.name} returns {op.result_type(types).mlir}, not {result.mlir}", where
        )
    widenings = {o.widening for o in operands if o.widening is not None}
    compute_ops = tuple(o for o in main.body_ops if o not in widenings and o is not final_truncf)
    return Level2Function(
        function=function,
        op=op,
        attributes=attrs,
        parameters=parameters,
        operands=operands,
        compute=compute,
        result=result,
        main=main,
        narrowing=narrowing,
        final_truncf=final_truncf,
        value=value,
        compute_ops=compute_ops,
        scale=_scale(function, op, operands, main, parameters),
        checks=checks,
        reductions=reductions,
    )


def _returned(function: func.FuncOp, count: int = 1) -> list[SSAValue]:
    ret = function.body.block.last_op
    if not isinstance(ret, func.ReturnOp) or len(ret.operands) != count:
        what = "one tensor" if count == 1 else f"the gradient and {count - 1} check count(s)"
        raise Level2ContractError(function, f"returns exactly {what}")
    return [SSAValue.get(v) for v in ret.operands]


def _check(
    function: func.FuncOp,
    rule: str,
    op: GenericOp,
    returned: SSAValue,
    index: int,
    names: Sequence[str],
    arguments: Sequence[BlockArgument],
) -> Level2Check:
    """A check generic: reads function inputs only, counts into a 0-d i64 it returns."""
    generic, inputs = _reading(op, names, arguments)
    if (
        returned != op.results[0]
        or generic.output.element != spec.INT64
        or generic.output.rank != 0
        or None in inputs
    ):
        raise Level2ContractError(
            op, f"a check ('{rule}') reads function inputs and returns its 0-d i64 count"
        )
    return Level2Check(rule, generic, index, tuple(n for n in inputs if n is not None))


def _reading(
    op: GenericOp, names: Sequence[str], arguments: Sequence[BlockArgument]
) -> tuple[Level2Generic, list[str | None]]:
    """A side generic (a check, a reduction) and, per input, the operator input it reads
    (None: not a function argument)."""
    generic = analyze_generic(op)
    by_argument = dict(zip(arguments, names, strict=True))
    inputs = [by_argument.get(i.value) for i in generic.inputs]  # type: ignore[call-overload]
    return generic, inputs


def _reduction(
    name: str,
    op: GenericOp,
    position: int,
    names: Sequence[str],
    arguments: Sequence[BlockArgument],
) -> Level2Reduction:
    """A reduction generic: sums one function input into a 0-d tensor of a float type."""
    generic, inputs = _reading(op, names, arguments)
    if (
        len(inputs) != 1
        or inputs[0] is None
        or generic.output.rank != 0
        or not isinstance(generic.output.element, spec.FloatType)
        or not all(generic.reduction_loops)
        or (generic.loops and (generic.accumulation is None or generic.accumulation.init != 0.0))
    ):
        raise Level2ContractError(
            op,
            f"a reduction ('{name}') sums one function input into a zero-filled 0-d float",
        )
    return Level2Reduction(name, generic, inputs[0], position)


def _check_narrowing(narrowing: GenericOp, main: Level2Generic) -> None:
    g = analyze_generic(narrowing)
    ops = list(g.body_ops)
    if (
        [i.value for i in g.inputs] != [main.op.results[0]]
        or g.reduces
        or len(ops) != 1
        or not isinstance(ops[0], arith.TruncFOp)
        or ops[0].input != g.inputs[0].block_arg
        or g.value != ops[0].result
    ):
        raise Level2ContractError(
            narrowing, "a second generic only narrows the first one's sum (truncf + yield)"
        )


def _with_widening(operand: Level2Operand, compute: spec.FloatType, op: GenericOp) -> Level2Operand:
    """The operand with its widening extf, when the body reads it through one (a class
    index: through one extsi to i64, or as it is)."""
    users = [use.operation for use in operand.generic.block_arg.uses]
    widening = users[0] if len(users) == 1 else None
    if operand.is_class_index:
        if isinstance(widening, arith.ExtSIOp):
            return Level2Operand(
                operand.name, operand.position, operand.argument, operand.generic, widening
            )
        return operand
    if isinstance(widening, arith.ExtFOp) and element_float_type(widening.result.type) == compute:
        return Level2Operand(
            operand.name, operand.position, operand.argument, operand.generic, widening
        )
    if users and operand.storage != compute:
        raise Level2ContractError(
            op,
            f"'{operand.name}' ({operand.storage.mlir}) is read only through one arith.extf "
            f"to {compute.mlir}",
        )
    return operand


def _scale(
    function: func.FuncOp,
    op: spec.OperatorSpec,
    operands: Sequence[Level2Operand],
    main: Level2Generic,
    parameters: Mapping[str, BlockArgument],
) -> Level2Scale | None:
    """The scale, when the function says it scales (`lossgrad.divisor`, docs/level2.md):
    `mulf(grad_output, %scale)` with %scale from above the body, or, for a formula that
    places the scale itself, the one captured value computed from sizes alone (not from a
    float parameter such as beta)."""
    divisor = read_divisor(function)
    if divisor is None or divisor in (spec.Divisor.TOTAL_WEIGHT, spec.Divisor.KEPT_WEIGHT):
        return None  # an operand (total_weight) or a reduction, which the formula divides by
    n = parameters.get(PARAMETER_N)
    if op.scaling is not spec.Scaling.GRAD_OUTPUT:
        value = _placed_scale(function, main, parameters)
        ops = tuple(_defining_ops(function, value)) if value is not None else ()
        return Level2Scale(value, divisor, n, ops)
    loaded = operands[0].loaded
    for use in loaded.uses:
        user = use.operation
        if isinstance(user, arith.MulfOp):
            other = SSAValue.get(user.rhs if user.lhs == loaded else user.lhs)
            if other in main.captured:
                return Level2Scale(other, divisor, n, tuple(_defining_ops(function, other)))
    raise Level2ContractError(
        main.op,
        f"'{DIVISOR_ATTR}' says grad_output is scaled by 1/({divisor.value}): the body starts "
        "with `arith.mulf %grad_output, %scale`",
    )


def _placed_scale(
    function: func.FuncOp, main: Level2Generic, parameters: Mapping[str, BlockArgument]
) -> SSAValue | None:
    """The scale of a formula that places it itself (1/n or n): the one captured value
    computed from the sizes (`arith.uitofp` of n, or the parameter n), else the one captured
    constant (static shapes). None when constants hoisted out of the body (canonicalize)
    make the static scale one of several: a backend reads the divisor, not this value."""
    floats = {p for name, p in parameters.items() if name != PARAMETER_N}
    sized, constants = [], []
    for v in main.captured:
        chain = _defining_values(function, v)
        if floats & set(chain):
            continue
        counted = PARAMETER_N in parameters and parameters[PARAMETER_N] in chain
        if counted or any(isinstance(c.owner, arith.UIToFPOp) for c in chain):
            sized.append(v)
        elif isinstance(v.owner, arith.ConstantOp):
            constants.append(v)
    if len(sized) > 1:
        raise Level2ContractError(
            main.op, f"the body reads {len(sized)} values computed from sizes; one is the scale"
        )
    if sized:
        return sized[0]
    return constants[0] if len(constants) == 1 else None


def _defining_values(function: func.FuncOp, value: SSAValue) -> list[SSAValue]:
    """`value` and every value of the function it is computed from (arguments included)."""
    block = function.body.block
    seen: list[SSAValue] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.append(v)
        owner = v.owner
        if isinstance(owner, Operation) and owner.parent_block() is block:
            stack.extend(owner.operands)
    return seen


def _defining_ops(function: func.FuncOp, value: SSAValue) -> list[Operation]:
    """The function-level ops `value` depends on, in program order."""
    block = function.body.block
    needed: set[Operation] = set()
    stack = [value]
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, Operation) and owner.parent_block() is block and owner not in needed:
            needed.add(owner)
            stack.extend(owner.operands)
    return [o for o in block.ops if o in needed]


def signature_functions(module: ModuleOp) -> Iterator[Level2Function]:
    """analyze_function of every function of a module, in order."""
    for op in module.ops:
        if not isinstance(op, func.FuncOp):
            raise Level2ContractError(op, "a level-2 module holds only func.func")
        yield analyze_function(op)
