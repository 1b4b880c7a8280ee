"""The named elementwise ops of the HFusion form: `linalg.elemwise_binary`,
`linalg.elemwise_unary`, `hfusion.cast`, `hfusion.compare` and `hfusion.select`.

Each is a linalg structured op in destination-passing style, printed as MLIR prints named
linalg ops (attributes first, then `ins`, `outs` and the result type):

    %q = linalg.elemwise_binary {fun = #linalg.binary_fn<div>}
           ins(%d, %beta : tensor<?x40xf32>, f32) outs(%e : tensor<?x40xf32>) -> tensor<?x40xf32>

An input is a tensor of the output's shape or a scalar (AscendNPU IR's scalar operand). The
hidden region is the scalar body MLIR's (and AscendNPU IR's) region builder gives each op,
so the ops are ordinary structured ops for xDSL: they verify, generalize and interpret
(lossgrad_compiler/interpreter.py runs them element by element).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    IndexType,
    IntegerType,
    ShapedType,
    TensorType,
)
from xdsl.dialects.linalg.abstract_ops import NamedOperation
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import YieldOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from lossgrad_compiler.dialects.hfusion.attributes import (
    BinaryFn,
    BinaryFnAttr,
    CompareFn,
    CompareFnAttr,
    HfusionBinaryFn,
    HfusionBinaryFnAttr,
    RoundMode,
    RoundModeAttr,
    UnaryFn,
    UnaryFnAttr,
)

Body = list[Operation]
"""The ops of a hidden region; the last one's result is yielded."""


def _element(value: SSAValue) -> Attribute:
    t = value.type
    return t.get_element_type() if isinstance(t, ShapedType) else t


def _is_i1(element: Attribute) -> bool:
    return isinstance(element, IntegerType) and element.width.data == 1


def _width(element: Attribute) -> int | None:
    """The bit width of an integer element type (None: not an integer)."""
    return element.width.data if isinstance(element, IntegerType) else None


class ElementwiseNamedOp(NamedOperation):
    """A named elementwise op whose inputs are tensors of the output's shape or scalars.

    Subclasses set `ARITY` and implement `scalar_body`, `check_elements` and, where the
    attributes may name a function without a float body here, `modelled`."""

    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True
    ARITY: ClassVar[int] = 1

    # ---------------------------------------------------------------- structure

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        """An empty body: `_fill_body` adds the ops once the attributes are known."""
        return Region(Block(arg_types=cls.body_arg_types((*inputs, *outputs))))

    def _fill_body(self) -> None:
        """The scalar body; an op the verifier will reject (wrong element types, a function
        with no float form) yields its output element, so that the verifier's message is
        about the op and not about an empty region."""
        block = self.body.block
        if block.first_op is not None:
            return
        if self._elements_ok() and self.modelled():
            ops = self.scalar_body(block.args[:-1], block.args[-1].type)
            block.add_ops([*ops, YieldOp(ops[-1].results[0])])
        else:
            block.add_op(YieldOp(block.args[-1]))

    def _elements_ok(self) -> bool:
        try:
            self.check_elements([_element(v) for v in self.inputs], _element(self.outputs[0]))
        except VerifyException:
            return False
        return len(self.inputs) == self.ARITY

    def modelled(self) -> bool:
        """Whether the attributes name a function with a float body here."""
        return True

    def scalar_body(self, args: Sequence[SSAValue], out_element: Attribute) -> list[Operation]:
        raise NotImplementedError

    @classmethod
    def parse(cls, parser: Parser) -> ElementwiseNamedOp:
        op = super().parse(parser)
        assert isinstance(op, ElementwiseNamedOp)
        op._fill_body()
        return op

    def _build(self, inputs: Sequence[SSAValue], out: SSAValue, **properties: Attribute) -> None:
        super().__init__(
            ins=inputs,
            outs=[out],
            result_types=[out.type],
            properties=properties,
            hidden_region=self.get_hidden_region(inputs, [out]),
        )
        self._fill_body()

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        rank = self._rank()
        return tuple(
            AffineMap.identity(rank) if isinstance(v.type, ShapedType) else AffineMap(rank, 0, ())
            for v in self.operands
        )

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        return ArrayAttr((IteratorTypeAttr.parallel(),) * self._rank())

    def _rank(self) -> int:
        out = self.outputs[0].type
        assert isinstance(out, TensorType)
        return len(out.get_shape())

    # ---------------------------------------------------------------- verification

    def verify_(self) -> None:
        if len(self.outputs) != 1 or not isinstance(self.outputs[0].type, TensorType):
            raise VerifyException(f"'{self.name}' has one output, a ranked tensor")
        out = self.outputs[0].type
        if len(self.inputs) != self.ARITY:
            raise VerifyException(f"'{self.name}' takes {self.ARITY} inputs")
        if len(self.res) != 1 or self.res[0].type != out:
            raise VerifyException(f"'{self.name}' returns its output's type {out}")
        for value in self.inputs:
            t = value.type
            if isinstance(t, ShapedType) and (
                not isinstance(t, TensorType) or t.get_shape() != out.get_shape()
            ):
                raise VerifyException(
                    f"'{self.name}' inputs are scalars or tensors of the output's shape "
                    f"{out}, got {t}"
                )
        self.check_elements([_element(v) for v in self.inputs], out.get_element_type())
        if not self.modelled():
            raise VerifyException(f"'{self.name}' {self._attribute_text()} is not modelled")

    def check_elements(self, inputs: list[Attribute], out: Attribute) -> None:
        raise NotImplementedError

    def _attribute_text(self) -> str:
        shown = {k: v for k, v in self.properties.items() if k != "operandSegmentSizes"}
        return ", ".join(f"{k} = {v}" for k, v in shown.items())

    def _same_float(self, inputs: list[Attribute], out: Attribute) -> None:
        if not isinstance(out, AnyFloat) or any(e != out for e in inputs):
            raise VerifyException(
                f"'{self.name}' inputs and output have one float element type, got "
                f"{', '.join(map(str, inputs))} -> {out}"
            )


_BINARY: dict[BinaryFn, type[Operation]] = {
    BinaryFn.ADD: arith.AddfOp,
    BinaryFn.SUB: arith.SubfOp,
    BinaryFn.MUL: arith.MulfOp,
    BinaryFn.DIV: arith.DivfOp,
    BinaryFn.MAX_SIGNED: arith.MaximumfOp,
    BinaryFn.MIN_SIGNED: arith.MinimumfOp,
}
"""Float forms of linalg's binary functions (MLIR's RegionBuilderHelper::buildBinaryFn)."""

_INTEGER_BINARY: dict[BinaryFn, type[Operation]] = {
    BinaryFn.ADD: arith.AddiOp,
    BinaryFn.SUB: arith.SubiOp,
    BinaryFn.MUL: arith.MuliOp,
    BinaryFn.MAX_SIGNED: arith.MaxSIOp,
    BinaryFn.MIN_SIGNED: arith.MinSIOp,
}
"""Integer forms of linalg's binary functions (the class check's count: its sum and the
`max(s, s)` after it)."""

_HFUSION_BINARY: dict[HfusionBinaryFn, type[Operation]] = {
    HfusionBinaryFn.VAND: arith.AndIOp,
    HfusionBinaryFn.VOR: arith.OrIOp,
    HfusionBinaryFn.VXOR: arith.XOrIOp,
}
"""AscendNPU IR's bitwise binary functions (HFusionOps.cpp's region builder)."""

_INTEGER_COMPARE: dict[CompareFn, str] = {
    CompareFn.VEQ: "eq",
    CompareFn.VNE: "ne",
    CompareFn.VLE: "sle",
    CompareFn.VLT: "slt",
    CompareFn.VGE: "sge",
    CompareFn.VGT: "sgt",
    CompareFn.VULE: "ule",
    CompareFn.VULT: "ult",
    CompareFn.VUGE: "uge",
    CompareFn.VUGT: "ugt",
}
"""The arith.cmpi predicate of each compare function on integers: `v*` signed, `vu*`
unsigned."""

_UNARY: dict[UnaryFn, type[Operation]] = {
    UnaryFn.EXP: math.ExpOp,
    UnaryFn.LOG: math.LogOp,
    UnaryFn.ABS: math.AbsFOp,
    UnaryFn.NEGF: arith.NegfOp,
    UnaryFn.SQRT: math.SqrtOp,
}
"""Float forms of linalg's unary functions that the HFusion form uses or may come to use."""

_COMPARE: dict[CompareFn, str] = {
    CompareFn.VEQ: "oeq",
    CompareFn.VNE: "une",
    CompareFn.VLE: "ole",
    CompareFn.VULE: "ole",
    CompareFn.VLT: "olt",
    CompareFn.VULT: "olt",
    CompareFn.VGE: "oge",
    CompareFn.VUGE: "oge",
    CompareFn.VGT: "ogt",
    CompareFn.VUGT: "ogt",
}
"""The arith.cmpf predicate of each compare function on floats, as AscendNPU IR's
hfusion.compare region builder (HFusionOps.cpp, buildCompareFn) defines it: every float
comparison is ordered (false on NaN) except `vne`, which is true on NaN; the `vu*` cases
differ from the `v*` ones only for integers."""

COMPARE_FUNCTIONS: dict[str, CompareFn] = {
    predicate: fn for fn, predicate in _COMPARE.items() if not fn.value.startswith("vu")
}
"""The compare function of each cmpf predicate that hfusion.compare computes on floats."""


@irdl_op_definition
class ElemwiseBinaryOp(ElementwiseNamedOp):
    """linalg.elemwise_binary: `fun(lhs, rhs)` per element."""

    name = "linalg.elemwise_binary"
    ARITY: ClassVar[int] = 2
    fun = prop_def(BinaryFnAttr)

    def __init__(self, lhs: SSAValue, rhs: SSAValue, out: SSAValue, fun: BinaryFn) -> None:
        self._build([lhs, rhs], out, fun=BinaryFnAttr(fun))

    def modelled(self) -> bool:
        table = _INTEGER_BINARY if _width(_element(self.outputs[0])) else _BINARY
        return self.fun.data in table

    def scalar_body(self, args: Sequence[SSAValue], out_element: Attribute) -> Body:
        table = _INTEGER_BINARY if _width(out_element) else _BINARY
        return [table[self.fun.data](args[0], args[1])]

    def check_elements(self, inputs: list[Attribute], out: Attribute) -> None:
        if _width(out) and all(e == out for e in inputs):
            return  # integers: the target check's count
        self._same_float(inputs, out)


@irdl_op_definition
class HfusionElemwiseBinaryOp(ElementwiseNamedOp):
    """hfusion.elemwise_binary: AscendNPU IR's own binary functions, here `vand`/`vor`/
    `vxor` on i1 masks (or integers), bitwise per element."""

    name = "hfusion.elemwise_binary"
    ARITY: ClassVar[int] = 2
    fun = prop_def(HfusionBinaryFnAttr)

    def __init__(self, lhs: SSAValue, rhs: SSAValue, out: SSAValue, fun: HfusionBinaryFn):
        self._build([lhs, rhs], out, fun=HfusionBinaryFnAttr(fun))

    def scalar_body(self, args: Sequence[SSAValue], out_element: Attribute) -> Body:
        return [_HFUSION_BINARY[self.fun.data](args[0], args[1])]

    def check_elements(self, inputs: list[Attribute], out: Attribute) -> None:
        if not _width(out) or any(e != out for e in inputs):
            raise VerifyException(
                f"'{self.name}' inputs and output have one integer type here, got "
                f"{', '.join(map(str, inputs))} -> {out}"
            )


@irdl_op_definition
class ElemwiseUnaryOp(ElementwiseNamedOp):
    """linalg.elemwise_unary: `fun(x)` per element."""

    name = "linalg.elemwise_unary"
    ARITY: ClassVar[int] = 1
    fun = prop_def(UnaryFnAttr)

    def __init__(self, value: SSAValue, out: SSAValue, fun: UnaryFn) -> None:
        self._build([value], out, fun=UnaryFnAttr(fun))

    def modelled(self) -> bool:
        return self.fun.data in _UNARY

    def scalar_body(self, args: Sequence[SSAValue], out_element: Attribute) -> Body:
        return [_UNARY[self.fun.data](args[0])]

    def check_elements(self, inputs: list[Attribute], out: Attribute) -> None:
        self._same_float(inputs, out)


@irdl_op_definition
class CastOp(ElementwiseNamedOp):
    """hfusion.cast between float types; a narrowing cast rounds by `round_mode`."""

    name = "hfusion.cast"
    ARITY: ClassVar[int] = 1
    round_mode = prop_def(RoundModeAttr)

    def __init__(self, value: SSAValue, out: SSAValue, round_mode: RoundMode = RoundMode.RINT):
        self._build([value], out, round_mode=RoundModeAttr(round_mode))

    def _widens(self) -> bool:
        source, out = _element(self.inputs[0]), _element(self.outputs[0])
        return (
            isinstance(source, AnyFloat)
            and isinstance(out, AnyFloat)
            and (source.bitwidth < out.bitwidth)
        )

    def modelled(self) -> bool:
        if _width(_element(self.inputs[0])):
            return True  # integers: extended or truncated, no rounding
        # A narrowing cast is arith.truncf only when it rounds to nearest-even.
        return self._widens() or self.round_mode.data is RoundMode.RINT

    def scalar_body(self, args: Sequence[SSAValue], out_element: Attribute) -> Body:
        source = _width(args[0].type)
        if source is not None:
            target = _width(out_element) or 0
            if source == 1:
                return [arith.ExtUIOp(args[0], out_element)]  # a mask: 0 or 1
            if source < target:
                return [arith.ExtSIOp(args[0], out_element)]
            return [arith.TruncIOp(args[0], out_element)]
        if self._widens():
            return [arith.ExtFOp(args[0], out_element)]
        return [arith.TruncFOp(args[0], out_element)]

    def check_elements(self, inputs: list[Attribute], out: Attribute) -> None:
        floats = isinstance(inputs[0], AnyFloat) and isinstance(out, AnyFloat)
        integers = _width(inputs[0]) is not None and (_width(out) or 0) > 1
        if not (floats or integers):
            raise VerifyException(
                f"'{self.name}' casts between float types, or from an integer (i1 a mask) "
                f"to an integer but i1, here; got {inputs[0]} -> {out}"
            )


@irdl_op_definition
class CompareOp(ElementwiseNamedOp):
    """hfusion.compare: an i1 per element (see `_COMPARE` for the NaN rules)."""

    name = "hfusion.compare"
    ARITY: ClassVar[int] = 2
    compare_fn = prop_def(CompareFnAttr)

    def __init__(self, lhs: SSAValue, rhs: SSAValue, out: SSAValue, compare_fn: CompareFn):
        self._build([lhs, rhs], out, compare_fn=CompareFnAttr(compare_fn))

    def scalar_body(self, args: Sequence[SSAValue], out_element: Attribute) -> Body:
        if _width(args[0].type):
            return [arith.CmpiOp(args[0], args[1], _INTEGER_COMPARE[self.compare_fn.data])]
        return [arith.CmpfOp(args[0], args[1], _COMPARE[self.compare_fn.data])]

    def check_elements(self, inputs: list[Attribute], out: Attribute) -> None:
        comparable = isinstance(inputs[0], AnyFloat) or (_width(inputs[0]) or 0) > 1
        if not _is_i1(out) or not comparable or inputs[0] != inputs[1]:
            raise VerifyException(
                f"'{self.name}' compares two values of one float or integer type into i1, "
                f"got {inputs[0]}, {inputs[1]} -> {out}"
            )


@irdl_op_definition
class SelectOp(ElementwiseNamedOp):
    """hfusion.select: `cond ? lhs : rhs` per element."""

    name = "hfusion.select"
    ARITY: ClassVar[int] = 3

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue, out: SSAValue) -> None:
        self._build([cond, lhs, rhs], out)

    def scalar_body(self, args: Sequence[SSAValue], out_element: Attribute) -> Body:
        return [arith.SelectOp(args[0], args[1], args[2])]

    def check_elements(self, inputs: list[Attribute], out: Attribute) -> None:
        if not _is_i1(inputs[0]) or inputs[1] != out or inputs[2] != out:
            raise VerifyException(
                f"'{self.name}' takes an i1 condition and two values of the output's element "
                f"type {out}, got {', '.join(map(str, inputs))}"
            )


@irdl_op_definition
class BitcastOp(ElementwiseNamedOp):
    """hfusion.bitcast: the same bits as another type of the same width (the HFusion form
    uses bf16/f16 <-> i16 to keep a rounding that AscendNPU IR 1.2.0 would fold away)."""

    name = "hfusion.bitcast"
    ARITY: ClassVar[int] = 1

    def __init__(self, value: SSAValue, out: SSAValue) -> None:
        self._build([value], out)

    def scalar_body(self, args: Sequence[SSAValue], out_element: Attribute) -> Body:
        return [arith.BitcastOp(args[0], out_element)]

    def check_elements(self, inputs: list[Attribute], out: Attribute) -> None:
        widths = [_width(e) or getattr(e, "bitwidth", None) for e in (inputs[0], out)]
        if widths[0] is None or widths[0] != widths[1]:
            raise VerifyException(
                f"'{self.name}' reinterprets bits as a type of the same width, got "
                f"{inputs[0]} -> {out}"
            )


@irdl_op_definition
class ArangeOp(IRDLOperation):
    """hfusion.arange: each element is `offset + sum_k index_k * strides[k]` (an integer
    tensor); with stride 1 on one dimension and 0 elsewhere, the position on that axis
    (level 2's `linalg.index`). Printed as AscendNPU IR prints it:

        %j = hfusion.arange offset[%c0] strides[%c0, %c1] outs(%e : tensor<?x5xi64>)
               -> tensor<?x5xi64>
    """

    name = "hfusion.arange"
    offset = opt_operand_def(IndexType)
    strides = var_operand_def(IndexType)
    init = operand_def(TensorType)
    result = result_def(TensorType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, offset: SSAValue | None, strides: Sequence[SSAValue], init: SSAValue):
        super().__init__(
            operands=[[offset] if offset is not None else [], list(strides), init],
            result_types=[init.type],
        )

    def verify_(self) -> None:
        out = self.init.type
        assert isinstance(out, TensorType)
        if not _width(out.get_element_type()) or len(self.strides) != len(out.get_shape()):
            raise VerifyException(
                f"'{self.name}' fills an integer tensor and takes one stride per dimension"
            )
        if self.result.type != out:
            raise VerifyException(f"'{self.name}' returns its output's type {out}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" offset[")
        if self.offset is not None:
            printer.print_operand(self.offset)
        printer.print_string("] strides[")
        printer.print_list(self.strides, printer.print_operand)
        printer.print_string("] outs(")
        printer.print_operand(self.init)
        printer.print_string(" : ")
        printer.print_attribute(self.init.type)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ArangeOp:
        parser.parse_keyword("offset")
        offsets = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        parser.parse_keyword("strides")
        strides = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        parser.parse_keyword("outs")
        parser.parse_punctuation("(")
        init = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        init_type = parser.parse_type()
        parser.parse_punctuation(")")
        parser.parse_punctuation("->")
        parser.parse_type()
        index = IndexType()
        resolved = [parser.resolve_operand(o, index) for o in (*offsets, *strides)]
        return cls(
            resolved[0] if offsets else None,
            resolved[len(offsets) :],
            parser.resolve_operand(init, init_type),
        )


HFUSION_FORM_OPS: tuple[type[ElementwiseNamedOp], ...] = (
    ElemwiseBinaryOp,
    ElemwiseUnaryOp,
    HfusionElemwiseBinaryOp,
    CastOp,
    BitcastOp,
    CompareOp,
    SelectOp,
)
