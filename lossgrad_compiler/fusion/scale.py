"""grad_output and the reduction, recovered from `S` = grad_output × scale.

The fused node computes ge = grad_output × (1/n) in the compute type. S is what the graph
computed for ge: a constant (the exporter folded 1/n and a seed of ones into it), a product
grad_output × 1/n where n is counted from shapes at run time, 1/n alone, or any other tensor.
A reduction is named only where n is proved equal to the operator's divisor (numel of
broadcast(self, target) for mean, self.shape[0] for batchmean), through Casts only where
they keep every value the count can take (count_casts.py); otherwise S itself becomes
grad_output with reduction none, which is the same arithmetic."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import onnx

from lossgrad_compiler import spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.fusion.count_casts import Monomial, cast_loses
from lossgrad_compiler.fusion.graph import Dim, GraphIndex, int_attribute, readable, uniform
from lossgrad_compiler.fusion.patterns import Matcher


@dataclass(frozen=True)
class Scale:
    grad_output: str | float  # a graph value, or the number of a new 0-d constant
    reduction: str


def _monomial(dims: list[Dim]) -> Monomial | None:
    factor, names = 1, Counter[str]()
    for d in dims:
        if d is None:
            return None
        if isinstance(d, int):
            factor *= d
        else:
            names[d] += 1
    return factor, tuple(sorted(names.elements()))


def _product(parts: list[Monomial]) -> Monomial:
    factor = math.prod(p[0] for p in parts)
    return factor, tuple(sorted(n for p in parts for n in p[1]))


class ScaleFinder:
    def __init__(self, index: GraphIndex, matcher: Matcher) -> None:
        self.index = index
        self.matcher = matcher
        # why a Cast on the way to a count was not looked through (count_casts.py), for the
        # report of a candidate whose divisor could not be proved; the pass clears it
        self.refused_casts: list[str] = []

    def find(
        self,
        op_type: str,
        s_value: str,
        self_shape: tuple[Dim, ...],
        target_shape: tuple[Dim, ...],
        compute: spec.FloatType,
    ) -> Scale:
        candidates = self.divisors(op_type, self_shape, target_shape)
        number = uniform(self.index.constant(s_value))
        if number is not None:
            if number == 1.0:
                return Scale(1.0, "sum")
            for reduction, n in candidates.items():
                if n[1] == () and number == one_over(n[0], compute):
                    return Scale(1.0, reduction)
            return Scale(number, "none")
        node = self.index.producer.get(self.matcher.through_identity(s_value))
        if node is not None and node.op_type == "Mul" and self.computes_in(node, compute):
            for go, k in (node.input, node.input[::-1]):
                reduction = self._reciprocal_count(
                    k, candidates, compute
                ) or self._folded_reciprocal(k, candidates, compute)
                if reduction is not None:
                    return Scale(self.matcher.leaf(go), reduction)
        reduction = self._reciprocal_count(s_value, candidates, compute)
        if reduction is not None:
            return Scale(1.0, reduction)
        return Scale(s_value, "none")

    @staticmethod
    def divisors(
        op_type: str, self_shape: tuple[Dim, ...], target_shape: tuple[Dim, ...]
    ) -> dict[str, Monomial]:
        """n of each scaling reduction the operator takes, as products of sizes."""
        found: dict[str, Monomial] = {}
        try:
            b = spec.broadcast_shapes(op_type, [("self", self_shape), ("target", target_shape)])
        except LossGradError:
            return found
        numel = _monomial(list(b))
        if numel is not None:
            found["mean"] = numel
        if op_type != "SmoothL1LossBackward" and self_shape:
            batch = _monomial([self_shape[0]])
            if batch is not None:
                found["batchmean"] = batch
        return found

    def _folded_reciprocal(
        self, value: str, candidates: dict[str, Monomial], compute: spec.FloatType
    ) -> str | None:
        """The reduction whose 1/n a constant is, for static n."""
        number = uniform(self.index.constant(value))
        for reduction, n in candidates.items():
            if number is not None and n[1] == () and number == one_over(n[0], compute):
                return reduction
        return None

    def computes_in(self, node: onnx.NodeProto, compute: spec.FloatType) -> bool:
        """A readable standard node whose result has the compute type (so it rounds as the
        fused node's own product or quotient does)."""
        found = self.index.type_of(node.output[0])
        return readable(node) and found is not None and found.float_type == compute

    def _reciprocal_count(
        self, value: str, candidates: dict[str, Monomial], compute: spec.FloatType
    ) -> str | None:
        """The reduction whose 1/n the value is: Div(1, Cast(n)) with n counted from shapes,
        divided in the compute type."""
        node = self.index.producer.get(self.matcher.through_identity(value))
        if node is None or node.op_type != "Div" or not self.computes_in(node, compute):
            return None
        # the numerator may be a 1 broadcast first (the exporter's ones_like(...) / n)
        if uniform(self.index.constant(self.matcher.leaf(node.input[0]))) != 1.0:
            return None
        count = self.count(node.input[1], compute)
        if count is None:
            return None
        for reduction, n in candidates.items():
            if n == count:
                return reduction
        return None

    def count(self, value: str, compute: spec.FloatType | None) -> Monomial | None:
        """n as a product of sizes where `value` holds it: at the Div, a float of the compute
        type converted once from an integer count (as the node converts its n); below that
        Cast (compute None), an int64 count."""
        constant = self.index.constant(value)
        if constant is not None:
            if constant.size != 1 or constant.dtype.kind not in "iuf":
                return None
            number = float(constant.reshape(-1)[0])
            return (int(number), ()) if number.is_integer() and number >= 0 else None
        node = self.index.producer.get(value)
        if node is None or not readable(node):
            return None
        if node.op_type == "Identity":
            return self.count(node.input[0], compute)
        if compute is not None:
            if node.op_type != "Cast" or int_attribute(node, "to", None) != compute.onnx:
                return None  # counted in floats, or converted through another type
            return self.count(node.input[0], None)
        found = self.index.type_of(value)
        if found is None or found.elem_type != onnx.TensorProto.INT64:
            return None
        if node.op_type in ("Cast", "Squeeze", "Unsqueeze", "Reshape"):
            dims = self.dims(node.input[0])
            if dims is not None and len(dims) == 1:
                return dims[0]
            return self.count(node.input[0], None) if node.op_type == "Cast" else None
        if node.op_type == "Mul":
            parts = [self.count(v, None) for v in node.input]
            return None if any(p is None for p in parts) else _product(parts)  # type: ignore[arg-type]
        if node.op_type == "ReduceProd":
            dims = self.dims(node.input[0])
            # over every axis of a 1-D vector: one element, whatever keepdims says
            if dims is None or len(node.input) > 1:
                return None
            if int_attribute(node, "noop_with_empty_axes", 0) != 0:
                return None
            return _product(dims)
        dims = self.dims(value)
        return dims[0] if dims is not None and len(dims) == 1 else None

    def dims(self, value: str) -> list[Monomial] | None:
        """The sizes a 1-D shape vector holds."""
        constant = self.index.constant(value)
        if constant is not None:
            if constant.ndim > 1 or constant.dtype.kind not in "iu":
                return None
            return [(int(v), ()) for v in constant.reshape(-1)]
        node = self.index.producer.get(value)
        if node is None or not readable(node):
            return None
        if node.op_type == "Shape":
            source = self.index.type_of(node.input[0])
            if source is None or source.shape is None:
                return None
            rank = len(source.shape)
            start = int_attribute(node, "start", 0)
            end = int_attribute(node, "end", rank)
            if start is None or end is None:
                return None
            picked = list(source.shape)[slice(start, end)]
            monomials = [_monomial([d]) for d in picked]
            return None if any(m is None for m in monomials) else monomials  # type: ignore[return-value]
        if node.op_type in ("Identity", "Squeeze", "Unsqueeze"):
            return self.dims(node.input[0])
        if node.op_type == "Cast":
            dims = self.dims(node.input[0])
            reason = "" if dims is None else cast_loses(int_attribute(node, "to", None), dims)
            if reason:
                self.refused_casts.append(f"{reason} ('{value}')")
                return None
            return dims
        if node.op_type == "Gather":
            if int_attribute(node, "axis", 0) not in (0, -1):
                return None
            dims = self.dims(node.input[0])
            indices = self.index.constant(node.input[1])
            if dims is None or indices is None or indices.ndim > 1:
                return None
            try:
                return [dims[int(i)] for i in np.reshape(indices, -1)]
            except IndexError:
                return None
        if node.op_type == "Concat":
            if int_attribute(node, "axis", 0) not in (0, -1):
                return None
            parts = [self.dims(v) for v in node.input]
            if any(p is None for p in parts):
                return None
            return [m for p in parts for m in p]  # type: ignore[union-attr]
        return None


def one_over(n: int, compute: spec.FloatType) -> float:
    dtype = compute.dtype
    with np.errstate(divide="ignore"):
        return float(np.asarray(1, dtype) / np.asarray(n, dtype))
