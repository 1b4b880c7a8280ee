"""`lower-lossgrad` for the classification operators (spec.ShapeRule.CLASSES): the level-2
ops around a class formula of passes/lower_lossgrad.py (docs/level2.md, "Beyond
elementwise").

One all-parallel `linalg.generic` over self's shape reads every input through an
order-preserving map (target and grad_output along the row loops, weight along the class
loop, one-element inputs through a map to `()` or `(0)`) and computes the gradient; the
class position is `linalg.index`. A second generic is the target check: it counts, into a
0-d `i64`, the targets outside [0, C) that are not ignore_index, and the function returns
that count after the gradient (`lossgrad.checks`).

CrossEntropyLossGrad adds reductions over the batch or the classes before the gradient
(`lossgrad.reductions`): each sums a term of its formula into a zero-filled 0-d tensor in C,
which the gradient reads through a map to `()`; the weight of a row's target is a
`tensor.extract` of the captured weight at `select(valid, t, 0)` (a gather that cannot leave
the weight, whatever the target holds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import AffineMapAttr, IndexType, i32, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue

from lossgrad_compiler import spec
from lossgrad_compiler.dialects.lossgrad import MLIR_FLOAT_TYPES, LossGradOp
from lossgrad_compiler.passes.lowering_utils import (
    ScalarBuilder,
    affine_map_attr,
    iterator_types,
    tensor_type,
    yield_op,
)

IndexMap = tuple[int | None, ...]


@dataclass(frozen=True)
class ClassBodyValues:
    """The scalar operands of a classification formula at one element (row i, class j)."""

    g: SSAValue  # grad_output of the row, in C
    t: SSAValue  # the row's target, as i64
    j: SSAValue  # the class position, as i64 (`linalg.index` of the class loop)
    classes: SSAValue  # C, as i64
    ignore_index: SSAValue  # as i64
    compute: spec.FloatType  # C
    compute_type: Attribute
    result: spec.FloatType  # the result's element type
    total_weight: SSAValue | None  # in C, where the reduction divides by it (mean)
    weight: SSAValue | None  # the weight of class j, in C; None: every class weighs 1
    log_prob: SSAValue | None = None  # self's value, in C, where the formula reads it
    weight_of: WeightOf | None = None  # the gather of a row's weight; None: no weight
    label_smoothing: SSAValue | None = None  # in C; None where it is 0
    classes_float: SSAValue | None = None  # C in the compute type
    reduced: Mapping[str, SSAValue] = field(default_factory=dict)  # reductions, in C


@dataclass(frozen=True)
class RowValues:
    """The scalar operands of a reduction's term at one element of the input it sums."""

    t: SSAValue | None  # the row's target as i64 (a reduction over target)
    element: SSAValue | None  # the summed input's element in C (a reduction over weight)
    classes: SSAValue
    ignore_index: SSAValue
    compute_type: Attribute
    weight_of: WeightOf | None


WeightOf = Callable[[ScalarBuilder, SSAValue, SSAValue], SSAValue]
"""(b, valid, t) -> w[select(valid, t, 0)] in C: the weight of a row's target, read where
the target is valid and at class 0 elsewhere (docs/level2.md, "A gather")."""


@dataclass(frozen=True)
class ClassReduction:
    """A reduction a classification formula reads: its name (`lossgrad.reductions`), the
    input whose elements it sums (target or weight) and the term it adds per element."""

    name: str
    over: str
    term: Callable[[ScalarBuilder, RowValues], SSAValue]


ClassFormula = Callable[[ScalarBuilder, ClassBodyValues], SSAValue]
BadTarget = Callable[[ScalarBuilder, SSAValue, SSAValue, SSAValue], SSAValue]
"""lower_lossgrad.bad_target: (b, t, C, ignore_index) -> the i1 the target check counts."""


def _narrower(element: spec.FloatType | spec.IndexType, compute: spec.FloatType) -> bool:
    return isinstance(element, spec.FloatType) and element.bits < compute.bits


def _live(ops: list[Operation], value: SSAValue) -> list[Operation]:
    """The ops `value` depends on, in order; the others (a widening the formula did not
    read) are dropped, so that a body holds no dead op."""
    live: set[Operation] = set()
    stack = [value]
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, Operation) and owner not in live:
            live.add(owner)
            stack.extend(owner.operands)
    for op in reversed(ops):
        if op not in live:
            op.drop_all_references()
    return [op for op in ops if op in live]


class ClassLowering:
    """The level-2 ops replacing one classification op (before it, in order)."""

    def __init__(
        self,
        op: LossGradOp,
        formula: ClassFormula,
        bad_target: BadTarget,
        parameters: Mapping[str, SSAValue] | None = None,
        reductions: tuple[ClassReduction, ...] = (),
        reads_self: bool = False,
    ) -> None:
        self.reads_self = reads_self  # CrossEntropyLossGrad reads log_prob; NLL never does
        self.op = op
        self.formula = formula
        self.bad_target = bad_target
        self.reductions = reductions
        self.parameters = dict(parameters or {})  # ignore_index as a function argument
        self.inputs = op.input_values()
        self.checked = op.check()
        self.compute = self.checked.compute
        self.compute_type = MLIR_FLOAT_TYPES[self.compute.mlir]
        self.ops: list[Operation] = []
        self.outer = ScalarBuilder(self.ops)
        shape = self.checked.shapes["self"]
        assert shape is not None, "a ranked self (the dialect's operands are ranked)"
        self.shape = shape
        self.loops = len(shape)
        self.class_dim = self.checked.class_dim
        self.row_loops = tuple(d for d in range(self.loops) if d != self.class_dim)

    # ----------------------------------------------------------------- maps

    def map_of(self, name: str) -> IndexMap:
        """The loops an input's dimensions are read on (None: the 0 of a size-1 dim)."""
        shape = self.checked.shapes[name]
        assert shape is not None
        if name == "self":
            return tuple(range(self.loops))
        if name == "weight":
            return (self.class_dim,)
        per_row = self.checked.reduction is spec.Reduction.NONE and self.loops >= 2
        if name == "target" or (name == "grad_output" and per_row):  # the classes rule
            return self.row_loops
        return tuple(None for _ in shape)  # one element: () or (0)

    def element_of(self, name: str) -> spec.FloatType | spec.IndexType:
        return self.checked.types.get(name) or self.checked.index_types[name]

    def mlir_element(self, name: str) -> Attribute:
        element = self.element_of(name)
        if isinstance(element, spec.IndexType):
            return i64 if element.bits == 64 else i32
        return MLIR_FLOAT_TYPES[element.mlir]

    # ----------------------------------------------------------------- values from above

    def classes(self) -> SSAValue:
        """C as i64: a constant for a static class dimension, else from tensor.dim."""
        size = self.shape[self.class_dim]
        if isinstance(size, int):
            static = self.outer.integer_constant(size)
            static.name_hint = "classes"
            return static
        dim = self.outer.dim(self.inputs["self"], self.class_dim)
        dim.name_hint = "classes"
        as_i64 = self.outer.cast(arith.IndexCastOp, dim, i64)
        as_i64.name_hint = "classes_i64"
        return as_i64

    def sizes(self) -> list[SSAValue]:
        """The dynamic sizes of self, for tensor.empty."""
        sizes = []
        for axis, d in enumerate(self.shape):
            if not isinstance(d, int):
                sizes.append(self.outer.dim(self.inputs["self"], axis))
                sizes[-1].name_hint = "dim"
        return sizes

    # ----------------------------------------------------------------- the generics

    def _target_i64(self, b: ScalarBuilder, arg: SSAValue) -> SSAValue:
        if arg.type == i64:
            return arg
        return b.cast(arith.ExtSIOp, arg, i64)

    def widen(self, b: ScalarBuilder, value: SSAValue, element: spec.FloatType) -> SSAValue:
        if _narrower(element, self.compute):
            return b.cast(arith.ExtFOp, value, self.compute_type)
        return value

    def weight_of(self) -> WeightOf | None:
        """The gather of a row's weight, where the operator has a weight input."""
        weight = self.inputs.get("weight")
        if weight is None:
            return None
        element = self.checked.types["weight"]

        def gather(b: ScalarBuilder, valid: SSAValue, t: SSAValue) -> SSAValue:
            safe = b.select(valid, t, b.integer_constant(0))
            index = b.cast(arith.IndexCastOp, safe, IndexType())
            value = b.extract(weight, [index], MLIR_FLOAT_TYPES[element.mlir])
            return self.widen(b, value, element)

        return gather

    def scalars(self, classes: SSAValue) -> tuple[SSAValue | None, SSAValue | None]:
        """(label_smoothing, C), both in C and from above; (None, None) where it is 0 in C
        (as the reference and the run-time parameters judge it)."""
        value = self.checked.in_compute(spec.LABEL_SMOOTHING)
        if value == 0.0:
            return None, None
        given = self.parameters.get(spec.LABEL_SMOOTHING.name)
        if given is None:
            ls = self.outer.constant(value, self.compute_type)
        elif given.type != self.compute_type:
            ls = self.outer.cast(arith.TruncFOp, given, self.compute_type)
        else:
            ls = given
        ls.name_hint = spec.LABEL_SMOOTHING.name
        size = self.shape[self.class_dim]
        if isinstance(size, int):
            classes_float = self.outer.constant(float(size), self.compute_type)
        else:
            classes_float = self.outer.cast(arith.UIToFPOp, classes, self.compute_type)
        classes_float.name_hint = "classes_f"
        return ls, classes_float

    def reduction(self, reduction: ClassReduction, classes: SSAValue, ignore: SSAValue) -> SSAValue:
        """A sum over the elements of target or weight into a zero-filled 0-d C tensor."""
        source = self.inputs[reduction.over]
        element = self.mlir_element(reduction.over)
        rank = len(self.checked.shapes[reduction.over] or ())
        block = Block(arg_types=[element, self.compute_type])
        ops: list[Operation] = []
        b = ScalarBuilder(ops)
        arg = block.args[0]
        over_target = reduction.over == "target"
        values = RowValues(
            t=self._target_i64(b, arg) if over_target else None,
            element=None if over_target else self.widen(b, arg, self.checked.types[reduction.over]),
            classes=classes,
            ignore_index=ignore,
            compute_type=self.compute_type,
            weight_of=self.weight_of(),
        )
        term = reduction.term(b, values)
        value = b.addf(block.args[1], term) if rank else term
        ops = _live(ops, value)
        ops.append(yield_op(value))
        block.add_ops(ops)
        output = self.outer.empty([], tensor_type(self.compute_type, ()))
        output.name_hint = f"no_{reduction.name}"
        if rank:
            output = self.outer.fill(self.outer.constant(0.0, self.compute_type), output)
            output.name_hint = f"zero_{reduction.name}"
        summed = self.outer.generic(
            [source],
            output,
            block,
            [affine_map_attr(rank, tuple(range(rank))), affine_map_attr(rank, ())],
            iterator_types((True,) * rank),
        )
        summed.name_hint = reduction.name
        return summed

    def gradient(
        self, classes: SSAValue, ignore: SSAValue, reduced: Mapping[str, SSAValue]
    ) -> SSAValue:
        """The all-parallel generic over self's shape: the formula at every element, reading
        the inputs and then the reductions (through a map to `()`)."""
        names = list(self.inputs)
        result = self.checked.result_type
        result_type = MLIR_FLOAT_TYPES[result.mlir]
        block = Block(
            arg_types=[
                *(self.mlir_element(n) for n in names),
                *(self.compute_type for _ in reduced),
                result_type,
            ]
        )
        ops: list[Operation] = []
        b = ScalarBuilder(ops)
        args = dict(zip(names, block.args, strict=False))
        reduced_args = dict(zip(reduced, block.args[len(names) :], strict=False))

        def widened(name: str) -> SSAValue:
            element = self.element_of(name)
            assert isinstance(element, spec.FloatType)
            return self.widen(b, args[name], element)

        j = b.cast(arith.IndexCastOp, b.loop_index(self.class_dim), i64)
        divides = self.checked.divisor is spec.Divisor.TOTAL_WEIGHT
        ls, classes_float = self.smoothing
        values = ClassBodyValues(
            g=widened("grad_output"),
            t=self._target_i64(b, args["target"]),
            j=j,
            classes=classes,
            ignore_index=ignore,
            compute=self.compute,
            compute_type=self.compute_type,
            result=result,
            total_weight=widened("total_weight") if divides else None,
            weight=widened("weight") if "weight" in args else None,
            log_prob=widened("self") if self.reads_self else None,
            weight_of=self.weight_of(),
            label_smoothing=ls,
            classes_float=classes_float,
            reduced=reduced_args,
        )
        value = self.formula(b, values)
        if _narrower(result, self.compute):
            value = b.cast(arith.TruncFOp, value, result_type)
        ops = _live(ops, value)
        ops.append(yield_op(value))
        block.add_ops(ops)
        output = self.outer.empty(self.sizes(), tensor_type(result_type, self.shape))
        output.name_hint = "init"
        maps = [self.map_attr(self.map_of(n)) for n in names]
        maps += [self.map_attr(()) for _ in reduced]
        maps.append(self.map_attr(tuple(range(self.loops))))
        grad = self.outer.generic(
            [*(self.inputs[n] for n in names), *reduced.values()],
            output,
            block,
            maps,
            iterator_types((False,) * self.loops),
        )
        return grad

    def status(self, classes: SSAValue, ignore: SSAValue) -> SSAValue:
        """The target check: the count of targets outside [0, C) that are not ignore_index,
        added in row-major order into a zero-filled 0-d i64."""
        target = self.inputs["target"]
        rank = len(self.checked.shapes["target"] or ())
        block = Block(arg_types=[self.mlir_element("target"), i64])
        ops: list[Operation] = []
        b = ScalarBuilder(ops)
        t = self._target_i64(b, block.args[0])
        bad = b.cast(arith.ExtUIOp, self.bad_target(b, t, classes, ignore), i64)
        value = b.addi(block.args[1], bad) if rank else bad
        ops = _live(ops, value)
        ops.append(yield_op(value))
        block.add_ops(ops)
        zero = self.outer.integer_constant(0)
        zero.name_hint = "zero"
        output = self.outer.empty([], tensor_type(i64, ()))
        output.name_hint = "no_targets"
        if rank:
            output = self.outer.fill(zero, output)
            output.name_hint = "zero_count"
        status = self.outer.generic(
            [target],
            output,
            block,
            [affine_map_attr(rank, tuple(range(rank))), affine_map_attr(rank, ())],
            iterator_types((True,) * rank),
        )
        status.name_hint = "bad_targets"
        return status

    def map_attr(self, index_map: IndexMap) -> AffineMapAttr:
        return affine_map_attr(self.loops, index_map)

    def build(self) -> tuple[SSAValue, SSAValue]:
        """Append the replacement ops; return (the gradient, the target check's count)."""
        classes = self.classes()
        ignore = self.parameters.get("ignore_index")
        if ignore is None:
            ignore = self.outer.integer_constant(int(self.checked.attrs["ignore_index"]))
            ignore.name_hint = "ignore_index"
        self.smoothing = self.scalars(classes)
        reduced = {r.name: self.reduction(r, classes, ignore) for r in self.reductions}
        return self.gradient(classes, ignore, reduced), self.status(classes, ignore)

