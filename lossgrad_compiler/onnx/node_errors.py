"""Errors located in a graph: the spec error, with the node's name added to the message.

A model may hold hundreds of ai.lossgrad nodes; 'KlDivBackward: self: ...' alone does not
say which one is wrong."""

from __future__ import annotations

from typing import TypeVar

from lossgrad_compiler.errors import LossGradError

E = TypeVar("E", bound=LossGradError)


def located(err: LossGradError, node_name: str, cls: type[E] | None = None) -> E:
    """A copy of `err` (same class unless `cls` is given, same code) whose message names the node.

    The message reads "<op> node '<name>': <argument>: <rule> [aclnn ...]"; `op`, `argument`
    and `rule` keep their values and `node` holds the name ("" for an unnamed node)."""
    where = f"{err.op} node '{node_name}'" if node_name else err.op
    new = (cls or type(err))(where, err.argument, err.rule)
    new.op = err.op
    new.node = node_name  # type: ignore[attr-defined]
    return new  # type: ignore[return-value]
