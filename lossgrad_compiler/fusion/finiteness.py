"""Bounds that prove a value finite where the nll_loss decomposition reads it (nll.py): the
graph's `0 * v` is NaN wherever v is not finite on a kept row, the operator's 0 is not, so
the form is fused only where v is provably finite there."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import NodeProto, TensorProto

from lossgrad_compiler.fusion.graph import GraphIndex, int_attribute

_SAME_VALUES = ("Expand", "Unsqueeze", "Reshape", "Squeeze", "Identity")


@dataclass(frozen=True)
class KeptCount:
    """The rows that the gradient keeps: target `target` != `ignore_index`. Their number,
    counted by the graph, is at least 1 wherever a row is kept."""

    target: str
    ignore_index: int


def finite_bound(index: GraphIndex, value: str, kept: KeptCount, depth: int = 8) -> float | None:
    """An upper bound of |value| over the kept rows, or None where the value may be inf or
    NaN there: a finite constant, the same values moved (Expand, Reshape, ...), a product of
    bounded values, and a bounded value divided by the kept rows' count (the mean's 1/n)."""
    found = index.constant(value)
    if found is not None:
        if found.dtype.kind != "f" or not np.all(np.isfinite(found)):
            return None
        return float(np.max(np.abs(found), initial=0.0))
    node = index.producer.get(value)
    if node is None or depth == 0 or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type in _SAME_VALUES and not node.attribute:
        return finite_bound(index, node.input[0], kept, depth - 1)
    if node.op_type == "Mul" and not node.attribute:
        bounds = [finite_bound(index, v, kept, depth - 1) for v in node.input]
        if None in bounds:
            return None
        return float(bounds[0]) * float(bounds[1])  # type: ignore[arg-type]
    if node.op_type == "Div" and not node.attribute and counts_kept(index, node.input[1], kept):
        return finite_bound(index, node.input[0], kept, depth - 1)
    return None


def counts_kept(index: GraphIndex, value: str, kept: KeptCount) -> bool:
    """value = Cast(ReduceSum(Cast(Not(Equal(target, ignore_index)), int64)), float): the
    exporter's count of the kept rows, at least 1 where any row is kept (a float cast may
    round it, never to 0)."""
    outer = _node(index, value, "Cast")
    if outer is None or _cast_to(outer) not in _FLOATS:
        return False
    total = _node(index, outer.input[0], "ReduceSum")
    if total is None or (len(total.input) > 1 and total.input[1]):
        return False
    if int_attribute(total, "noop_with_empty_axes", 0) != 0:
        return False
    inner = _node(index, total.input[0], "Cast")
    if inner is None or _cast_to(inner) != TensorProto.INT64:
        return False
    not_node = _node(index, inner.input[0], "Not")
    equal = None if not_node is None else _node(index, not_node.input[0], "Equal")
    if equal is None:
        return False
    for t, ii in (tuple(equal.input), tuple(reversed(equal.input))):
        found = index.constant(ii)
        if t == kept.target and found is not None and found.size == 1:
            return found.dtype.kind in "iu" and int(found.reshape(-1)[0]) == kept.ignore_index
    return False


_FLOATS = (TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE)


def _node(index: GraphIndex, value: str, op_type: str) -> NodeProto | None:
    node = index.producer.get(value)
    if node is None or node.op_type != op_type or node.domain not in ("", "ai.onnx"):
        return None
    return node


def _cast_to(node: NodeProto) -> int | None:
    names = {a.name for a in node.attribute}
    if not names <= {"to", "saturate"}:
        return None
    return int_attribute(node, "to", None)
