"""Translate one level-2 `func.func` into ONNX nodes.

Each op kind has its own rule (rules.py, generic.py), registered by op class; this module only
walks the function, keeps the SSA-value → ONNX mapping and finishes the outputs. An op without
a rule is an error, never a silent skip (docs/level2.md)."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass

from onnx import NodeProto, helper
from xdsl.dialects import func
from xdsl.ir import Block, Operation, SSAValue

from lossgrad_compiler.backends.onnx.sink import NodeSink
from lossgrad_compiler.backends.onnx.types import Level2TranslationError, static_shape
from lossgrad_compiler.backends.onnx.values import (
    Accumulator,
    DimOf,
    EmptyTensor,
    FilledTensor,
    IndexProduct,
    ScalarConstant,
    ShapeEntry,
    Tensor,
    Value,
)

Rule = Callable[["Translator", Operation], None]
RULES: dict[type[Operation], Rule] = {}


def rule(*op_classes: type[Operation]) -> Callable[[Rule], Rule]:
    """Register the translation rule of one or more op classes."""

    def register(fn: Rule) -> Rule:
        for op_class in op_classes:
            RULES[op_class] = fn
        return fn

    return register


class Translator:
    """The state of one function's translation: where values live and the nodes so far."""

    def __init__(self, sink: NodeSink) -> None:
        self.sink = sink
        self.env: MutableMapping[SSAValue, Value] = {}

    def lookup(self, value: SSAValue, op: Operation) -> Value:
        try:
            return self.env[value]
        except KeyError:
            raise Level2TranslationError(op, "uses a value defined outside the function") from None

    def tensor(self, value: SSAValue, op: Operation) -> Tensor:
        """The operand as an ONNX value, creating the nodes of a symbolic value if needed."""
        found = self.lookup(value, op)
        if isinstance(found, Tensor):
            return found
        if isinstance(found, ScalarConstant):
            return Tensor(self.sink.scalar(found), 0)
        if isinstance(found, IndexProduct):
            return Tensor(self.sink.element_count(found), 0)
        if isinstance(found, FilledTensor):
            fill = (
                found.fill
                if isinstance(found.fill, Tensor)
                else Tensor(self.sink.scalar(found.fill), 0)
            )
            shape = self.sink.shape(found.empty.shape)
            rank = len(found.empty.shape)
            expanded = self.sink.expand(fill.name, shape, rank)
            return Tensor(expanded, rank, shape=found.empty.shape)
        if isinstance(found, EmptyTensor):
            raise Level2TranslationError(op, "reads the contents of a tensor.empty")
        assert isinstance(found, Accumulator)
        raise Level2TranslationError(
            op, "reads the output operand of a linalg.generic outside `arith.addf %acc, %v`"
        )

    def shape_entries(self, value: SSAValue, op: Operation) -> tuple[ShapeEntry, ...]:
        """The shape of a tensor operand: static sizes, and sizes to read at run time."""
        found = self.lookup(value, op)
        if isinstance(found, EmptyTensor):
            return found.shape
        if isinstance(found, FilledTensor):
            return found.empty.shape
        tensor = self.tensor(value, op)
        if tensor.shape is not None:
            return tensor.shape
        dims = static_shape(value.type)
        return tuple(
            d if d is not None else DimOf(tensor.name, len(dims), j) for j, d in enumerate(dims)
        )

    def run_block(self, block: Block, stop: Callable[[Operation], bool]) -> Operation:
        """Translate the ops of `block` up to the first op for which `stop` holds; return it."""
        for op in block.ops:
            if stop(op):
                return op
            fn = RULES.get(type(op))
            if fn is None:
                raise Level2TranslationError(op, "is not in the level-2 op list")
            fn(self, op)
        raise Level2TranslationError(None, "block has no terminator")

    def nested(self) -> Translator:
        """A translator for a region: its own values over those of the enclosing scope."""
        inner = Translator(self.sink)
        inner.env = ChainMap({}, self.env)
        return inner


@dataclass(frozen=True)
class TranslatedFunction:
    """ONNX nodes computing a level-2 function from `inputs` to `outputs` (value names)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[NodeProto, ...]


def translate_function(
    function: func.FuncOp,
    input_names: Sequence[str],
    output_names: Sequence[str],
    prefix: str = "",
) -> TranslatedFunction:
    """ONNX nodes for `function`; intermediate values are named `<prefix>t<k>_<hint>`."""
    from lossgrad_compiler.backends.onnx import generic, rules  # noqa: F401  (register rules)

    block = function.body.block
    if len(block.args) != len(input_names):
        raise Level2TranslationError(
            function, f"has {len(block.args)} arguments, {len(input_names)} names were given"
        )
    sink = NodeSink(prefix)
    translator = Translator(sink)
    for arg, name in zip(block.args, input_names, strict=True):
        translator.env[arg] = Tensor(name, len(static_shape(arg.type)))
    ret = translator.run_block(block, lambda op: isinstance(op, func.ReturnOp))
    if len(ret.operands) != len(output_names):
        raise Level2TranslationError(
            ret, f"returns {len(ret.operands)} values, {len(output_names)} names were given"
        )
    produced = {out for node in sink.nodes for out in node.output}
    renamed: dict[str, str] = {}
    for value, name in zip(ret.operands, output_names, strict=True):
        result = translator.tensor(value, ret).name
        if result in produced and result not in renamed:
            renamed[result] = name
        else:
            sink.nodes.append(_identity(renamed.get(result, result), name))
    return TranslatedFunction(tuple(input_names), tuple(output_names), _rename(sink.nodes, renamed))


def _identity(source: str, name: str) -> NodeProto:
    return helper.make_node("Identity", [source], [name], name=name)


def _rename(nodes: Sequence[NodeProto], renamed: dict[str, str]) -> tuple[NodeProto, ...]:
    """The nodes with value names replaced (results that become the function's outputs)."""
    if not renamed:
        return tuple(nodes)
    for node in nodes:
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
        for i, name in enumerate(node.output):
            if name in renamed:
                node.output[i] = renamed[name]
                if node.name == name:
                    node.name = renamed[name]
    return tuple(nodes)
