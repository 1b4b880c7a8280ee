"""Translate one level-2 `func.func` into ONNX nodes.

Scalar ops go through the backend's `level2.ScalarOpDispatch` (rules.py); index arithmetic
and tensor bookkeeping (bookkeeping.py) and the generics (generic.py) have one rule each.
This module only walks the function, keeps the SSA-value → ONNX mapping and finishes the
outputs. An op without a rule is an error, never a silent skip (docs/level2.md)."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Collection, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from onnx import NodeProto, helper
from xdsl.dialects import func
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import Block, Operation, SSAValue

from lossgrad_compiler.backends.onnx.alignment import loop_position
from lossgrad_compiler.backends.onnx.bookkeeping import BOOKKEEPING_RULES
from lossgrad_compiler.backends.onnx.generic import translate_generic
from lossgrad_compiler.backends.onnx.rules import OnnxScalarOps
from lossgrad_compiler.backends.onnx.sink import NodeSink
from lossgrad_compiler.backends.onnx.types import static_shape
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
from lossgrad_compiler.level2 import (
    Level2Check,
    Level2ContractError,
    analyze_function,
    read_checks,
    read_identity,
    read_inputs,
)


class Translator:
    """The state of one function's translation: where values live and the nodes so far."""

    def __init__(self, sink: NodeSink, scalar_ops: type[OnnxScalarOps] = OnnxScalarOps) -> None:
        self.sink = sink
        self.env: MutableMapping[SSAValue, Value] = {}
        self.loop_sizes: tuple[ShapeEntry, ...] | None = None
        self.scalar_ops = scalar_ops(self)

    def lookup(self, value: SSAValue, op: Operation) -> Value:
        try:
            return self.env[value]
        except KeyError:
            raise Level2ContractError(op, "uses a value defined outside the function") from None

    def tensor(self, value: SSAValue, op: Operation) -> Tensor:
        """The operand as an ONNX value, creating the nodes of a symbolic value if needed."""
        return self.materialize(self.lookup(value, op), op)

    def materialize(self, found: Value, op: Operation) -> Tensor:
        """`found` as an ONNX value, creating the nodes of a symbolic value if needed."""
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
            raise Level2ContractError(op, "reads the contents of a tensor.empty")
        assert isinstance(found, Accumulator)
        raise Level2ContractError(
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

    def run_block(
        self,
        block: Block,
        stop: Callable[[Operation], bool],
        skip: Collection[Operation] = (),
    ) -> Operation:
        """Translate the ops of `block` but `skip` up to the first op for which `stop` holds;
        return it."""
        for op in block.ops:
            if stop(op):
                return op
            if op not in skip:
                self.run_ops([op])
        raise Level2ContractError(None, "block has no terminator")

    def run_ops(self, ops: Iterable[Operation]) -> None:
        """Translate `ops` in order."""
        for op in ops:
            structural = _STRUCTURE_RULES.get(type(op))
            if structural is not None:
                value = structural(self, op)
            elif self.scalar_ops.has_rule(op):
                operands = [self.lookup(v, op) for v in op.operands]
                value = self.scalar_ops.translate(op, operands)
            else:
                raise Level2ContractError(op, "is not in the level-2 op list")
            self.env[op.results[0]] = value

    def nested(self) -> Translator:
        """A translator for a region: its own values over those of the enclosing scope."""
        inner = Translator(self.sink, type(self.scalar_ops))
        inner.env = ChainMap({}, self.env)
        return inner


_STRUCTURE_RULES: dict[type[Operation], Callable[[Translator, Any], Value]] = {
    **BOOKKEEPING_RULES,
    GenericOp: translate_generic,
    IndexOp: loop_position,
}
"""Ops that are not scalar: index arithmetic, tensor bookkeeping, the generics and the loop
positions in their bodies."""


@dataclass(frozen=True)
class TranslatedFunction:
    """ONNX nodes computing a level-2 function from `inputs` to `outputs` (value names).

    `inputs` are positional, as a node calling the function lists them: an operator's inputs
    up to the last one given, an absent optional input among them by name but read by no
    node (the call passes "" there)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[NodeProto, ...]
    unchecked: tuple[str, ...] = ()
    """The rule keys of the function's checks that these nodes do not compute (checks.py)."""


def translate_function(
    function: func.FuncOp,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    prefix: str = "",
    scalar_ops: type[OnnxScalarOps] = OnnxScalarOps,
) -> TranslatedFunction:
    """ONNX nodes for `function`; intermediate values are named `<prefix>t<k>_<hint>`.

    Without names, a function lowered from one operator takes the operator's input and output
    names from its identity attributes (`lossgrad.op_type`, `lossgrad.inputs`): its
    arguments are the inputs given, and the result's `inputs` are positional (an absent
    optional input before a given one keeps its place). `scalar_ops` is the dispatch of the
    scalar ops (a subclass adds an op: docs/level2.md, "Adding a level-2 op").

    A function with checks (`lossgrad.checks`) returns their counts after the gradient. They
    are translated when `output_names` names every result; with one name (the operator's
    output by default, as a node has one) the check generics are left out and their rules
    listed in `unchecked`: standard ONNX cannot raise on a value (checks.py)."""
    positional: Sequence[str] | None = None
    if input_names is None or output_names is None:
        op_spec, _ = read_identity(function)
        if input_names is None:
            input_names = read_inputs(function, op_spec)
            last = max(op_spec.input_names.index(n) for n in input_names)
            positional = op_spec.input_names[: last + 1]
        output_names = [op_spec.output] if output_names is None else output_names
    block = function.body.block
    if len(block.args) != len(input_names):
        raise Level2ContractError(
            function, f"has {len(block.args)} arguments, {len(input_names)} names were given"
        )
    sink = NodeSink(prefix)
    translator = Translator(sink, scalar_ops)
    for arg, name in zip(block.args, input_names, strict=True):
        translator.env[arg] = Tensor(name, len(static_shape(arg.type)))
    left_out = _checks_left_out(function, len(output_names))
    skip = {check.generic.op for check in left_out}
    ret = translator.run_block(block, lambda op: isinstance(op, func.ReturnOp), skip)
    dropped = {check.result_index for check in left_out}
    returned = [v for k, v in enumerate(ret.operands) if k not in dropped]
    if len(returned) != len(output_names):
        raise Level2ContractError(
            ret, f"returns {len(ret.operands)} values, {len(output_names)} names were given"
        )
    produced = {out for node in sink.nodes for out in node.output}
    renamed: dict[str, str] = {}
    for value, name in zip(returned, output_names, strict=True):
        result = translator.tensor(value, ret).name
        if result in produced and result not in renamed:
            renamed[result] = name
        else:
            sink.nodes.append(_identity(renamed.get(result, result), name))
    inputs = tuple(positional if positional is not None else input_names)
    nodes = _rename(sink.nodes, renamed)
    unchecked = tuple(check.rule for check in left_out)
    return TranslatedFunction(inputs, tuple(output_names), nodes, unchecked)


def _checks_left_out(function: func.FuncOp, names: int) -> tuple[Level2Check, ...]:
    """The function's checks, when `names` output names leave exactly their results out."""
    rules = read_checks(function)
    results = len(function.function_type.outputs)
    if not rules or names != results - len(rules):
        return ()
    return analyze_function(function).checks


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
