"""What the rule modules may ask of the translation they run in: the state of one
function's translation as a small protocol. bookkeeping.py, generic.py, rules.py and
size_check.py import this module, never translator.py, so the translator (which imports
them to build its rule table) is the only module that knows them all."""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping, Sequence
from typing import Protocol

from xdsl.ir import Operation, SSAValue

from lossgrad_compiler.backends.onnx.sink import NodeSink
from lossgrad_compiler.backends.onnx.values import ShapeEntry, Tensor, Value


class ScalarEmitter(Protocol):
    """The scalar-op dispatch as the bookkeeping rules use it: one ONNX node for an op."""

    def emit(
        self, op: Operation, onnx_op: str, operands: Sequence[Value], **attrs: object
    ) -> Tensor: ...


class Translation(Protocol):
    """One function's translation: the nodes so far (`sink`), where each level-2 value
    lives (`env`), and the ways to read a value or translate nested ops."""

    sink: NodeSink
    env: MutableMapping[SSAValue, Value]
    loop_sizes: tuple[ShapeEntry, ...] | None
    """In a generic body that reads `linalg.index`: the size of each loop (else None)."""

    @property
    def scalar_ops(self) -> ScalarEmitter: ...

    def lookup(self, value: SSAValue, op: Operation) -> Value:
        """The value's translation (Level2ContractError where it is defined outside)."""
        ...

    def tensor(self, value: SSAValue, op: Operation) -> Tensor:
        """The operand as an ONNX value, creating the nodes of a symbolic value if needed."""
        ...

    def materialize(self, found: Value, op: Operation) -> Tensor:
        """`found` as an ONNX value, creating the nodes of a symbolic value if needed."""
        ...

    def shape_entries(self, value: SSAValue, op: Operation) -> tuple[ShapeEntry, ...]:
        """The shape of a tensor operand: static sizes, and sizes to read at run time."""
        ...

    def run_ops(self, ops: Iterable[Operation]) -> None:
        """Translate `ops` in order."""
        ...

    def nested(self) -> Translation:
        """A translation of a region: its own values over those of the enclosing scope."""
        ...
