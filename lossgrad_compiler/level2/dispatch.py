"""The scalar-op dispatch every backend subclasses: one `@rule` method per level-2 op class,
in the style of xDSL's `InterpreterFunctions` and `@impl`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from xdsl.ir import Operation, SSAValue

from lossgrad_compiler.level2.contract import Level2ContractError

V = TypeVar("V")
Rule = Callable[[Any, Any, Sequence[Any]], Any]
_RULE_OPS = "_level2_ops"


def rule(*op_classes: type[Operation]) -> Callable[[Rule], Rule]:
    """Marks a ScalarOpDispatch method as the translation of these op classes."""

    def mark(method: Rule) -> Rule:
        setattr(method, _RULE_OPS, (*getattr(method, _RULE_OPS, ()), *op_classes))
        return method

    return mark


class ScalarOpDispatch(Generic[V]):
    """Translation of level-2 scalar ops, one `@rule` method per op class.

    `translate(op, operands)` calls the method registered for `type(op)` with the op and
    its operands already translated (values of the backend's own kind: C++ expressions,
    ONNX value names, tiles). Subclasses set `BACKEND` (for messages) and `REQUIRED`, the
    op classes they must translate; defining a subclass that misses one of them raises
    TypeError, so a new level-2 op cannot be forgotten by a backend."""

    BACKEND: ClassVar[str] = "level 2"
    REQUIRED: ClassVar[frozenset[type[Operation]]] = frozenset()
    RULES: ClassVar[dict[type[Operation], str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        rules: dict[type[Operation], str] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                for op_class in getattr(member, _RULE_OPS, ()):
                    rules[op_class] = name
        cls.RULES = rules
        missing = sorted(o.name for o in cls.REQUIRED if o not in rules)
        if missing:
            raise TypeError(f"{cls.__name__} ({cls.BACKEND}) has no rule for {', '.join(missing)}")

    def has_rule(self, op: Operation) -> bool:
        return type(op) in self.RULES

    def translate(self, op: Operation, operands: Sequence[V]) -> V:
        name = self.RULES.get(type(op))
        if name is None:
            raise Level2ContractError(op, f"has no {self.BACKEND} translation (not a level-2 op)")
        return getattr(self, name)(op, operands)

    def translate_all(self, ops: Iterable[Operation], env: dict[SSAValue, V]) -> None:
        """Translate ops in order, reading operands from and writing results to `env`."""
        for op in ops:
            try:
                operands = [env[v] for v in op.operands]
            except KeyError:
                raise Level2ContractError(op, "uses a value that is not available here") from None
            env[op.results[0]] = self.translate(op, operands)
