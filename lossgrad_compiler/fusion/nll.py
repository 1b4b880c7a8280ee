"""PyTorch 2.13's decomposition of nll_loss's backward, read as NLLLossBackward (1-D, 2-D
self) or NLLLoss2dBackward (4-D self).

The exporter writes `onehot * where(keep, v, 0)` with `keep = Not(Equal(Unsqueeze(t), ii))`,
`onehot = ScatterElements(zeros, where(keep, Unsqueeze(t), 0), -1s, axis=class dim)` and
`v` grad_output (unsqueezed on the class dim for reduction none; 1/total_weight for a mean;
dropped where it is 1), times the weight reshaped along the class dim where weighted.

The graph's meaning differs from the operator's in two places, and the pass handles both:
* `0 * v` at a class other than the target is NaN where v is inf or NaN on a kept row (the
  whole row); the operator gives 0 there. The form is fused only where every v of a kept
  row is provably finite (finiteness.py); otherwise it is left, with that reason.
* ScatterElements takes a target in [-C, 0) as t + C (ONNX's negative index); the operator
  refuses it (aclnn 161002). The fused node reads the target wrapped the same way
  (`where(t == ii, ii', where(t < 0, t + C, t))`), so it gives the graph's result for every
  target the graph runs with, and still refuses a target the graph's ScatterElements refuses
  (outside [-C, C)). Where ii is a class, the node's ignore_index is ii - C, which no wrapped
  target equals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from onnx import AttributeProto, NodeProto, TensorProto, helper, numpy_helper

from lossgrad_compiler import spec
from lossgrad_compiler.fusion.finiteness import KeptCount, finite_bound
from lossgrad_compiler.fusion.graph import GraphIndex, ValueType

NLL = "NLLLossBackward"
NLL_2D = "NLLLoss2dBackward"
EXPORTED_TOTAL_WEIGHT = "a total weight of 1 (onnxscript's torchlib FIXME)"
"""What PyTorch 2.13's exporter divides a 1-D or 2-D mean by (the output's size)."""


def total_weight_one_note(call: str, condition: str, computed: str) -> str:
    """The report's note on an exported mean that is the sum's graph, fused as the sum."""
    return (
        f"PyTorch 2.13's exporter writes {call} with {EXPORTED_TOTAL_WEIGHT}: {condition}its "
        f"graph is the sum's, node for node, so a mean step computes {computed}, not "
        "PyTorch's division by the total weight; fused as the graph computes it (reduction sum)"
    )


TOTAL_WEIGHT_ONE = total_weight_one_note(
    "F.nll_loss(reduction='mean') of 1-D and 2-D input", "", "sum(w[t]*(-g))"
)


@dataclass
class NllMatch:
    """A recognised decomposition: the node's operands, what the pass must add, or why not."""

    op_type: str
    region: list[NodeProto]
    reason: str = ""
    attrs: dict[str, object] = field(default_factory=dict)
    operands: dict[str, str] = field(default_factory=dict)  # input name -> value ("" = new)
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # input name -> new value
    target: str = ""  # the graph's target, before wrapping
    classes: int = 0
    target_dtype: int = TensorProto.INT64
    note: str = ""
    # the nodes a left match keeps other readings from (empty: its region); a
    # cross_entropy candidate left for its log_softmax backward leaves the nll term free
    claims: list[NodeProto] = field(default_factory=list)


def _attr(node: NodeProto, name: str, kind: int) -> AttributeProto | bool | None:
    """The attribute of that name and type; None when absent; False when of another type
    or given twice (the node is then not read)."""
    found = [a for a in node.attribute if a.name == name]
    if not found:
        return None
    if len(found) > 1 or found[0].type != kind:
        return False
    return found[0]


def _known_attributes(node: NodeProto, names: set[str]) -> bool:
    return node.domain in ("", "ai.onnx") and {a.name for a in node.attribute} <= names


class NllReader:
    """Reads one root Mul as the exporter's nll_loss backward."""

    def __init__(self, index: GraphIndex) -> None:
        self.index = index

    def _producer(self, value: str, op_type: str) -> NodeProto | None:
        node = self.index.producer.get(value)
        if node is None or node.op_type != op_type or node.domain not in ("", "ai.onnx"):
            return None
        return node

    def _axes(self, node: NodeProto) -> list[int] | None:
        """An Unsqueeze's constant axes (opset 13: the second input)."""
        if node.attribute or len(node.input) != 2:
            return None
        axes = self.index.constant(node.input[1])
        return None if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]

    def _int_constant(self, value: str) -> int | None:
        found = self.index.constant(value)
        if found is None or found.size != 1 or found.dtype.kind not in "iu":
            return None
        return int(found.reshape(-1)[0])

    def _keep_mask(self, value: str) -> tuple[str, int, list[NodeProto]] | None:
        """keep = Not(Equal(u, ii)) (either operand order): (u, ii, nodes)."""
        not_node = self._producer(value, "Not")
        if not_node is None:
            return None
        equal = self._producer(not_node.input[0], "Equal")
        if equal is None:
            return None
        for u, ii in (tuple(equal.input), tuple(reversed(equal.input))):
            found = self._int_constant(ii)
            if found is not None and self.index.constant(u) is None:
                return u, found, [not_node, equal]
        return None

    def read(self, root: NodeProto) -> NllMatch | None:
        """None where `root` is no nll_loss backward; a match (maybe with its reason)."""
        if root.op_type != "Mul" or root.domain not in ("", "ai.onnx") or root.attribute:
            return None
        for onehot_value, masked_value in (tuple(root.input), tuple(reversed(root.input))):
            scatter = self._producer(onehot_value, "ScatterElements")
            masked = self._producer(masked_value, "Where")
            if scatter is not None and masked is not None:
                return self._read(root, scatter, masked)
        return None

    def _read(self, root: NodeProto, scatter: NodeProto, masked: NodeProto) -> NllMatch | None:
        region = [root, scatter, masked]

        def left(reason: str, op_type: str = NLL) -> NllMatch:
            return NllMatch(op_type, region, reason)

        if not _known_attributes(scatter, {"axis", "reduction"}) or len(scatter.input) != 3:
            return None
        axis_attr = _attr(scatter, "axis", AttributeProto.INT)
        how = _attr(scatter, "reduction", AttributeProto.STRING)
        if axis_attr is False or how is False:
            return None
        if how is not None and how.s != b"none":  # type: ignore[union-attr]
            return None
        data, indices, updates = scatter.input
        result = self.index.type_of(root.output[0])
        data_type = self.index.type_of(data)
        if result is None or not result.known_shape or result.float_type is None:
            return left("shape inference does not give the result's type and shape")
        rank = len(result.shape)  # type: ignore[arg-type]
        op_type = NLL_2D if rank == 4 else NLL
        axis = int(axis_attr.i) if axis_attr else 0  # type: ignore[union-attr]
        class_dim = 1 if rank >= 2 else 0
        if rank not in (1, 2, 4):
            return left(f"a rank-{rank} gradient: the operators take 1-D, 2-D or 4-D self")
        if axis % rank != class_dim:
            return left(
                f"the one-hot scatter is along axis {axis}, not the class dimension {class_dim}",
                op_type,
            )
        if data_type != result:
            return left("the scattered zeros do not have the gradient's type and shape", op_type)
        if self._zeros(data) is None:
            return left("the scatter's data is not provably zeros", op_type)
        # the zeros stay: they are the node's self (the operator reads only its shape)
        ones = self._minus_ones(updates)
        if ones is None:
            return left("the scattered values are not -1", op_type)
        region += ones
        safe = self._producer(indices, "Where")
        if safe is None:
            return left("the scatter's indices are not where(t != ii, t, 0)", op_type)
        region.append(safe)
        keep = self._keep_mask(safe.input[0])
        if keep is None or self._int_constant(safe.input[2]) != 0:
            return left("the scatter's indices are not where(t != ii, t, 0)", op_type)
        unsqueezed, ignore_index, mask_nodes = keep
        region += mask_nodes
        if safe.input[1] != unsqueezed:
            return left("the scatter's indices do not take the target the mask compares", op_type)
        unsqueeze = self._producer(unsqueezed, "Unsqueeze")
        if unsqueeze is None or self._axes(unsqueeze) not in ([class_dim], [class_dim - rank]):
            return left("the target is not unsqueezed on the class dimension", op_type)
        region.append(unsqueeze)
        target = unsqueeze.input[0]
        target_type = self.index.type_of(target)
        if target_type is None or target_type.elem_type not in (
            TensorProto.INT64,
            TensorProto.INT32,
        ):
            return left("the target's element type is not int64 or int32", op_type)
        if masked.input[0] != safe.input[0]:
            return left(
                f"the gradient's Where reads the mask '{masked.input[0]}', the safe target's "
                f"'{safe.input[0]}': another mask than the target's",
                op_type,
            )
        if not self._is_zero(masked.input[2]):
            return left("the Where's else branch is not 0", op_type)
        classes = result.shape[class_dim]  # type: ignore[index]
        if not isinstance(classes, int):
            return left("the class dimension is not static", op_type)
        scale, weight, value_nodes = self._value(masked.input[1], rank, class_dim, classes)
        region += value_nodes
        match = NllMatch(
            op_type,
            region,
            attrs={"ignore_index": ignore_index},
            target=target,
            classes=classes,
            target_dtype=target_type.elem_type,
        )
        if weight is False:
            match.reason = "the weight is not reshaped along the class dimension"
            return match
        assert not isinstance(weight, bool)
        match.operands["self"] = data
        if weight is not None and self.index.constant(weight) is not None:
            folded = self.index.constant(weight)
            match.constants["weight"] = np.asarray(folded).reshape(-1)
        elif weight is not None:
            match.operands["weight"] = weight
        return self._scale(match, scale, weight, target, result, class_dim, ignore_index)

    def _zeros(self, value: str) -> list[NodeProto] | None:
        """A constant of zeros, or Expand(0, shape) / ConstantOfShape(shape) of value 0."""
        found = self.index.constant(value)
        if found is not None:
            return [] if found.size and not np.any(found) else None
        node = self.index.producer.get(value)
        if node is None:
            return None
        if node.op_type == "Expand" and not node.attribute:
            zero = self.index.constant(node.input[0])
            return [node] if zero is not None and zero.size == 1 and not np.any(zero) else None
        if node.op_type == "ConstantOfShape":
            filled = self._filled(node)
            return [node] if filled is not None and filled == 0 else None
        return None

    def _filled(self, node: NodeProto) -> float | None:
        if not _known_attributes(node, {"value"}):
            return None
        value = _attr(node, "value", AttributeProto.TENSOR)
        if value is False:
            return None
        if value is None:
            return 0.0
        array = numpy_helper.to_array(value.t)  # type: ignore[union-attr]
        return float(array.reshape(-1)[0]) if array.size == 1 else None

    def _minus_ones(self, value: str) -> list[NodeProto] | None:
        found = self.index.constant(value)
        if found is not None:
            return [] if found.size and np.all(found == -1) else None
        node = self.index.producer.get(value)
        if node is None or node.op_type != "ConstantOfShape" or self._filled(node) != -1.0:
            return None
        shape = self.index.producer.get(node.input[0])
        if shape is not None and shape.op_type == "Shape":
            start = _attr(shape, "start", AttributeProto.INT)
            whole = _known_attributes(shape, {"start"}) and (start is None or start.i == 0)  # type: ignore[union-attr]
            return [node, shape] if whole else None  # Shape of the indices: dies with them
        return [node]

    def _is_zero(self, value: str) -> bool:
        found = self.index.constant(value)
        return found is not None and found.size == 1 and not np.any(found)

    def _value(
        self, value: str, rank: int, class_dim: int, classes: int
    ) -> tuple[str | None, str | bool | None, list[NodeProto]]:
        """v = s, s * W or W (either order) with W = Reshape(w, class-dim shape): (s or None
        where it is dropped, w or None, False for a weight not along the class dim)."""
        mul = self._producer(value, "Mul")
        pairs: list[tuple[str | None, str]] = []
        if mul is not None and not mul.attribute:
            pairs = [(mul.input[0], mul.input[1]), (mul.input[1], mul.input[0])]
        pairs.append((None, value))
        for s, candidate in pairs:
            reshape = self._producer(candidate, "Reshape")
            if reshape is None:
                continue
            weight = reshape.input[0]
            shape = self.index.constant(reshape.input[1])
            weight_type = self.index.type_of(weight)
            expected = [classes if i == class_dim else 1 for i in range(rank)]
            if weight_type is None or weight_type.shape != (classes,):
                continue
            if shape is None or [int(d) for d in shape.reshape(-1)] != expected:
                return s, False, []
            return s, weight, [reshape] + ([mul] if s is not None and mul is not None else [])
        expected = (*(1,) * class_dim, classes, *(1,) * (rank - class_dim - 1))
        for s, candidate in pairs:
            found = self.index.constant(candidate)
            if found is not None and found.shape == expected and classes > 1:
                # a constant weight the exporter folded with its Reshape
                return s, candidate, [mul] if s is not None and mul is not None else []
        return value, None, []

    def _scale(
        self,
        match: NllMatch,
        s: str | None,
        weight: str | None,
        target: str,
        result: ValueType,
        class_dim: int,
        ignore_index: int,
    ) -> NllMatch:
        """grad_output and the reduction from s, after proving v finite on every kept row."""
        kept = KeptCount(target, ignore_index)
        dtype = result.float_type.dtype  # type: ignore[union-attr]
        bound = 1.0 if s is None else finite_bound(self.index, s, kept)
        if weight is not None and bound is not None:
            w_bound = finite_bound(self.index, weight, kept)
            bound = None if w_bound is None else bound * w_bound
        if bound is None or not bound <= float(np.finfo(dtype).max):
            what = (
                f"grad_output '{s}'" if s is not None and weight is None else
                f"the product of grad_output '{s}' and weight '{weight}'" if s is not None else
                f"the weight '{weight}'"
            )  # fmt: skip
            match.reason = (
                f"{what} is not provably finite: where it is inf or NaN on a kept row, the "
                "graph's onehot*v gives NaN at every class of that row (0*inf), the operator "
                "gives inf or NaN at the target only; fusing would change those results"
            )
            return match
        rows = tuple(d for i, d in enumerate(result.shape or ()) if i != class_dim)
        per_row = self._per_row(s, rows, class_dim)
        if s is None:  # v is the weight alone: a seed of 1, folded
            match.constants["grad_output"] = np.asarray(1, dtype)
            reduction = "sum"
            if len(result.shape or ()) <= 2:
                match.note = TOTAL_WEIGHT_ONE
        elif per_row is not None and len(result.shape or ()) >= 2:
            if isinstance(per_row, str):
                match.operands["grad_output"] = per_row
            else:
                match.constants["grad_output"] = per_row
            reduction = "none"
        else:
            one = self._one_element(s)
            if one is None:
                match.reason = f"grad_output '{s}' is neither one element nor one per row"
                return match
            if isinstance(one, str):
                match.operands["grad_output"] = one
            else:
                match.constants["grad_output"] = one
            reduction = "sum"
            if len(result.shape or ()) <= 2:
                match.note = TOTAL_WEIGHT_ONE
        match.attrs = {"reduction": reduction, **match.attrs}
        match.constants["total_weight"] = np.asarray(1, dtype)
        return match

    def _per_row(self, s: str, rows: tuple[object, ...], class_dim: int) -> str | np.ndarray | None:
        """s as one value per row: Unsqueeze(g) on the class dim, or a constant of the rows'
        shape with a 1 on the class dim."""
        s_type = self.index.type_of(s)
        if s_type is None or s_type.shape is None or len(s_type.shape) != len(rows) + 1:
            return None
        unsqueeze = self._producer(s, "Unsqueeze")
        if unsqueeze is not None and self._axes(unsqueeze) in ([class_dim],):
            inner = self.index.type_of(unsqueeze.input[0])
            if inner is not None and inner.shape == rows and self.index.uses(s) == 1:
                return unsqueeze.input[0]
        found = self.index.constant(s)
        if found is not None and found.shape == (*rows[:class_dim], 1, *rows[class_dim:]):
            return np.squeeze(found, axis=class_dim)
        return None

    def _one_element(self, s: str) -> str | np.ndarray | None:
        s_type = self.index.type_of(s)
        if s_type is None or s_type.shape is None:
            return None
        if s_type.shape == ():
            return s
        found = self.index.constant(s)
        if found is not None and found.size == 1:
            return found.reshape(())
        return None


def wrap_target(
    match: NllMatch,
    fresh: Callable[[str], str],
) -> tuple[list[NodeProto], list[TensorProto], str, int]:
    """The nodes that give the node's target: where(t == ii, ii', where(t < 0, t + C, t)),
    the graph's ScatterElements reading of a negative index, with ii' = ii - C where ii is a
    class (so that no wrapped target is ii'). Returns (nodes, constants, target, ii')."""
    ii = int(match.attrs["ignore_index"])  # type: ignore[arg-type]
    classes = match.classes
    node_ii = ii - classes if 0 <= ii < classes else ii
    dtype = helper.tensor_dtype_to_np_dtype(match.target_dtype)
    t = match.target
    names = {k: fresh(f"{t}_{k}") for k in ("ii", "node_ii", "zero", "classes")}
    values = {"ii": ii, "node_ii": node_ii, "zero": 0, "classes": classes}
    constants = [numpy_helper.from_array(np.asarray(values[k], dtype), names[k]) for k in names]
    ignored, negative, plus, wrapped, out = (
        fresh(f"{t}_{k}") for k in ("ignored", "negative", "plus", "wrapped", "wrapped_target")
    )
    nodes = [
        helper.make_node("Equal", [t, names["ii"]], [ignored], name=fresh(f"{t}_is_ignored")),
        helper.make_node("Less", [t, names["zero"]], [negative], name=fresh(f"{t}_is_negative")),
        helper.make_node("Add", [t, names["classes"]], [plus], name=fresh(f"{t}_plus_classes")),
        helper.make_node("Where", [negative, plus, t], [wrapped], name=fresh(f"{t}_wrap")),
        helper.make_node(
            "Where", [ignored, names["node_ii"], wrapped], [out], name=fresh(f"{t}_keep_ignored")
        ),
    ]
    return nodes, constants, out, node_ii


def validate(match: NllMatch, index: GraphIndex, self_value: str) -> spec.CheckedCall | str:
    """The node's call through spec.validate, from the operands' types and shapes."""
    infos: dict[str, spec.TensorInfo] = {}
    for name in ("grad_output", "self", "weight"):
        value = self_value if name == "self" else match.operands.get(name)
        if value is None and name in match.constants:
            array = match.constants[name]
            infos[name] = spec.TensorInfo(array.dtype, tuple(array.shape))
            continue
        if value is None:
            continue
        found = index.type_of(value)
        if found is None or found.float_type is None or found.shape is None:
            return f"the element type and shape of {name} '{value}' are not known"
        infos[name] = spec.TensorInfo(found.float_type.dtype, found.shape)
    if "total_weight" in match.constants:  # NLL's; CrossEntropyLossGrad has none
        tw = match.constants["total_weight"]
        infos["total_weight"] = spec.TensorInfo(tw.dtype, ())
    target_type = index.type_of(match.target)
    assert target_type is not None and target_type.shape is not None
    infos["target"] = spec.TensorInfo(
        helper.tensor_dtype_to_np_dtype(match.target_dtype), target_type.shape
    )
    try:
        return spec.validate(match.op_type, infos, match.attrs)
    except Exception as err:  # a LossGradError: the reason
        return f"the operands do not make a valid {match.op_type}: {err}"
