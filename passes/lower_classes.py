"""`lower-lossgrad` for the classification operators (spec.ShapeRule.CLASSES): the level-2
ops around a class formula of passes/lower_lossgrad.py (docs/level2.md, "Beyond
elementwise").

One all-parallel `linalg.generic` over self's shape reads every input through an
order-preserving map (target and grad_output along the row loops, weight along the class
loop, one-element inputs through a map to `()` or `(0)`) and computes the gradient; the
class position is `linalg.index`. A second generic is the target check: it counts, into a
0-d `i64`, the targets outside [0, C) that are not ignore_index, and the function returns
that count after the gradient (`lossgrad.checks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import AffineMapAttr, i32, i64
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


ClassFormula = Callable[[ScalarBuilder, ClassBodyValues], SSAValue]
BadTarget = Callable[[ScalarBuilder, SSAValue, SSAValue, SSAValue], SSAValue]
"""lower_lossgrad.bad_target: (b, t, C, ignore_index) -> the i1 the target check counts."""


def _narrower(element: spec.FloatType | spec.IndexType, compute: spec.FloatType) -> bool:
    return isinstance(element, spec.FloatType) and element.bits < compute.bits


class ClassLowering:
    """The level-2 ops replacing one classification op (before it, in order)."""

    def __init__(
        self,
        op: LossGradOp,
        formula: ClassFormula,
        bad_target: BadTarget,
        parameters: Mapping[str, SSAValue] | None = None,
    ) -> None:
        self.op = op
        self.formula = formula
        self.bad_target = bad_target
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

    def gradient(self, classes: SSAValue, ignore: SSAValue) -> SSAValue:
        """The all-parallel generic over self's shape: the formula at every element."""
        names = list(self.inputs)
        result = self.checked.result_type
        result_type = MLIR_FLOAT_TYPES[result.mlir]
        block = Block(arg_types=[*(self.mlir_element(n) for n in names), result_type])
        ops: list[Operation] = []
        b = ScalarBuilder(ops)
        args = dict(zip(names, block.args, strict=False))

        def widened(name: str) -> SSAValue:
            if _narrower(self.element_of(name), self.compute):
                return b.cast(arith.ExtFOp, args[name], self.compute_type)
            return args[name]

        j = b.cast(arith.IndexCastOp, b.loop_index(self.class_dim), i64)
        divides = self.checked.divisor is spec.Divisor.TOTAL_WEIGHT
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
        )
        value = self.formula(b, values)
        if _narrower(result, self.compute):
            value = b.cast(arith.TruncFOp, value, result_type)
        ops.append(yield_op(value))
        block.add_ops(ops)
        output = self.outer.empty(self.sizes(), tensor_type(result_type, self.shape))
        output.name_hint = "init"
        maps = [self.map_attr(self.map_of(n)) for n in names]
        maps.append(self.map_attr(tuple(range(self.loops))))
        grad = self.outer.generic(
            [self.inputs[n] for n in names],
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
        ops.append(yield_op(b.addi(block.args[1], bad) if rank else bad))
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
        return self.gradient(classes, ignore), self.status(classes, ignore)

