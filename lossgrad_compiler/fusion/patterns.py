"""A small matcher for expression patterns over an ONNX graph.

Patterns are trees of `Op` (an ONNX op over sub-patterns), `Var` (any value), `Const` (a
constant holding one value everywhere) and `Lit` (a constant equal to a given number).
Repeated names must bind the same value (Var) or equal numbers (Const). Commutative ops
match in either operand order and a comparison matches its mirrored form (a < b is b > a).

Before an `Op` is matched the value is looked through Identity and through a Reshape that
provably keeps the shape (a shape of zeros, `copy this dimension`, as long as the value's
rank: this project's inline mode checks sizes that way). A `Var` also looks through an
Expand and a Cast to a wider float type: the fused operator broadcasts and widens
half types itself, and the pass checks the resulting shape and type afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from onnx import NodeProto, TensorProto

from lossgrad_compiler.fusion.graph import (
    GraphIndex,
    ValueType,
    int_attribute,
    readable,
    uniform,
)

COMMUTATIVE = frozenset({"Add", "Mul", "And", "Or", "Equal", "Max", "Min"})
MIRRORED = {
    "Less": "Greater",
    "Greater": "Less",
    "LessOrEqual": "GreaterOrEqual",
    "GreaterOrEqual": "LessOrEqual",
}
HALF_TYPES = frozenset({TensorProto.FLOAT16, TensorProto.BFLOAT16})
FLOAT_TYPES = HALF_TYPES | {TensorProto.FLOAT, TensorProto.DOUBLE}
# An Op of this name matches its operand with or without a Cast to a float type around it
# (for values every float type holds exactly: signs).
OPTIONAL_FLOAT_CAST = "FloatCast?"
# The same for a Cast to a wider float type only (exact for every value; a narrowing Cast
# can turn a tiny difference into 0 and change its sign).
OPTIONAL_WIDENING_CAST = "WideningCast?"
# An Op of this name matches its operand, or a sum of it back to a smaller shape: ReduceSum
# over constant axes, optionally followed by a Squeeze or a Reshape to a constant shape (the
# exporter sums a factor before multiplying by one that is constant along the summed axes).
OPTIONAL_SUM_BACK = "SumBack?"


_OPTIONAL = frozenset({OPTIONAL_FLOAT_CAST, OPTIONAL_WIDENING_CAST, OPTIONAL_SUM_BACK})

VARIES = "varies"  # what a Const binds when its constant holds more than one value


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Const:
    name: str


@dataclass(frozen=True)
class Lit:
    value: float


@dataclass(frozen=True)
class Op:
    op_type: str
    inputs: tuple[Pattern, ...]


Pattern = Op | Var | Const | Lit


class _Builder:
    """`P.Mul(a, b)` builds Op("Mul", (a, b))."""

    def __getattr__(self, op_type: str):
        return lambda *inputs: Op(op_type, tuple(inputs))


P = _Builder()


@dataclass(frozen=True)
class Binding:
    values: dict[str, str] = field(default_factory=dict)
    # what each Var was matched at, before looking through Expand and widening Casts: the
    # pass takes operands there when the graph computes in a wider type than the leaves'
    raw: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, float | str] = field(default_factory=dict)
    nodes: tuple[NodeProto, ...] = ()  # the nodes matched by Op patterns, root first
    # (ReduceSum, the Reshape or Squeeze after it or None) of each SumBack? that summed:
    # the pass checks that each sums exactly the operator's broadcast axes
    sums: tuple[tuple[NodeProto, NodeProto | None], ...] = ()

    def with_value(self, name: str, value: str, raw: str) -> Binding:
        return replace(self, values={**self.values, name: value}, raw={**self.raw, name: raw})

    def with_number(self, name: str, number: float | str) -> Binding:
        return replace(self, numbers={**self.numbers, name: number})

    def with_node(self, node: NodeProto) -> Binding:
        return replace(self, nodes=(*self.nodes, node))

    def with_sum(self, reduce: NodeProto, after: NodeProto | None) -> Binding:
        nodes = (*self.nodes, reduce) + ((after,) if after is not None else ())
        return replace(self, nodes=nodes, sums=(*self.sums, (reduce, after)))


class Matcher:
    def __init__(self, index: GraphIndex) -> None:
        self.index = index

    def match(
        self, pattern: Pattern, value: str, binding: Binding | None = None
    ) -> Iterator[Binding]:
        """Every way `pattern` matches the graph value `value`."""
        binding = binding or Binding()
        if isinstance(pattern, Var):
            bound = self.leaf(value)
            if pattern.name in binding.values:
                if binding.values[pattern.name] == bound:
                    yield binding
                return
            yield binding.with_value(pattern.name, bound, value)
            return
        if isinstance(pattern, Const | Lit):
            constant = self.index.constant(self.through_identity(value))
            if constant is None:
                return
            number = uniform(constant)
            if isinstance(pattern, Lit):
                if number == pattern.value:
                    yield binding
                return
            # a constant that is not one number binds VARIES: the form's check says why
            # it cannot be the operator's attribute
            found = VARIES if number is None else number
            if pattern.name in binding.numbers:
                if binding.numbers[pattern.name] == found:
                    yield binding
                return
            yield binding.with_number(pattern.name, found)
            return
        node = self.index.producer.get(self.through_identity(value))
        if pattern.op_type not in _OPTIONAL and (
            node is None
            or (node.op_type != pattern.op_type and MIRRORED.get(node.op_type) != pattern.op_type)
        ):
            return  # another op: nothing below can match (the common case, answered first)
        if node is not None and not readable(node):
            node = None  # an attribute the pass does not read: nothing is matched through it
        if pattern.op_type in (OPTIONAL_FLOAT_CAST, OPTIONAL_WIDENING_CAST):
            yield from self.match(pattern.inputs[0], value, binding)
            if node is None or node.op_type != "Cast":
                return
            widening = _widens(self.index.type_of(node.input[0]), node)
            if widening or (
                pattern.op_type == OPTIONAL_FLOAT_CAST and _cast_to(node) in FLOAT_TYPES
            ):
                yield from self.match(pattern.inputs[0], node.input[0], binding.with_node(node))
            return
        if pattern.op_type == OPTIONAL_SUM_BACK:
            yield from self.match(pattern.inputs[0], value, binding)
            after = None
            if node is not None and node.op_type in ("Reshape", "Squeeze"):
                after, node = node, self.index.producer.get(node.input[0])
            if node is not None and node.op_type == "ReduceSum" and readable(node):
                yield from self.match(
                    pattern.inputs[0], node.input[0], binding.with_sum(node, after)
                )
            return
        if node is None:
            return
        inputs = list(node.input)
        if node.op_type == pattern.op_type:
            orders = [inputs]
            if node.op_type in COMMUTATIVE and len(inputs) == 2:
                orders.append(inputs[::-1])
        elif MIRRORED.get(node.op_type) == pattern.op_type:
            orders = [inputs[::-1]]
        else:
            return
        if len(inputs) != len(pattern.inputs):
            return
        for order in orders:
            yield from self._match_all(pattern.inputs, order, binding.with_node(node))

    def _match_all(
        self, patterns: tuple[Pattern, ...], values: list[str], binding: Binding
    ) -> Iterator[Binding]:
        if not patterns:
            yield binding
            return
        for first in self.match(patterns[0], values[0], binding):
            yield from self._match_all(patterns[1:], values[1:], first)

    # ------------------------------------------------------------------ looking through

    def through_identity(self, value: str) -> str:
        """The value behind Identity nodes and shape-keeping Reshapes."""
        while True:
            node = self.index.producer.get(value)
            if node is None or not readable(node):
                return value
            if node.op_type == "Identity" or (
                node.op_type == "Reshape" and self._keeps_shape(node)
            ):
                value = node.input[0]
                continue
            return value

    def leaf(self, value: str) -> str:
        """What a Var binds: also behind Expand and half→float32 Casts."""
        while True:
            value = self.through_identity(value)
            node = self.index.producer.get(value)
            if node is None or not readable(node):
                return value
            if node.op_type == "Expand":
                value = node.input[0]
                continue
            if node.op_type == "Cast" and _widens(self.index.type_of(node.input[0]), node):
                value = node.input[0]
                continue
            return value

    def _keeps_shape(self, node: NodeProto) -> bool:
        allowzero = int_attribute(node, "allowzero", 0)
        data = self.index.type_of(node.input[0])
        if allowzero != 0 or data is None or data.shape is None:
            return False
        length = self._zeros_length(node.input[1])
        return length is not None and length == len(data.shape)

    def _zeros_length(self, value: str) -> int | None:
        """The length of a 1-D int tensor that is all zeros whenever it is computed (a
        Gather from zeros fails at run time instead of giving anything else); 0 for a 0-d
        zero, which broadcasts; None if not provably zeros."""
        constant = self.index.constant(value)
        if constant is not None:
            if constant.ndim > 1 or constant.dtype.kind not in "iu" or constant.any():
                return None
            return int(constant.size) if constant.ndim == 1 else 0
        node = self.index.producer.get(value)
        if node is None or not readable(node):
            return None
        if node.op_type == "Add":
            lengths = [self._zeros_length(v) for v in node.input]
            if any(n is None for n in lengths):
                return None
            nonzero = {n for n in lengths if n}
            return None if len(nonzero) > 1 else (nonzero.pop() if nonzero else 0)
        if node.op_type == "Gather" and int_attribute(node, "axis", 0) in (0, -1):
            data = self.index.constant(node.input[0])
            indices = self.index.type_of(node.input[1])
            if data is None or data.dtype.kind not in "iu" or data.any() or data.ndim != 1:
                return None
            if indices is None or indices.shape is None or len(indices.shape) > 1:
                return None
            if not indices.shape:
                return 0
            return indices.shape[0] if isinstance(indices.shape[0], int) else None
        return None


_BITS = {TensorProto.FLOAT16: 16, TensorProto.BFLOAT16: 16, TensorProto.FLOAT: 32}
_BITS[TensorProto.DOUBLE] = 64


def _widens(source: ValueType | None, node: NodeProto) -> bool:
    """A Cast from a float type to a wider one (exact: the operator widens its inputs to the
    compute type itself)."""
    to = _cast_to(node)
    if (
        source is None
        or source.elem_type not in _BITS
        or to not in (TensorProto.FLOAT, TensorProto.DOUBLE)
    ):
        return False
    return _BITS[source.elem_type] < _BITS[to]


def _cast_to(node: NodeProto) -> int | None:
    return int_attribute(node, "to", None)


def cast_target(node: NodeProto) -> int | None:
    return _cast_to(node) if node.op_type == "Cast" else None
