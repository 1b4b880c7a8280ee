"""PyTorch 2.13's decomposition of cross_entropy's backward (class-index targets), read as
CrossEntropyLossGrad.

The exporter writes `LogSoftmax`, the nll_loss backward (nll.py) giving gl, the gradient
with respect to the log-probabilities lp, then log_softmax's backward on the saved output:
`Sub(gl, Mul(Exp(lp), ReduceSum(gl, axes=[1], keepdims=1)))`, with gl and lp Cast to
float32 and the result Cast back for half types. With label smoothing gl is
`Add(smoothing term, nll term)`. The node's operands are the nll term's grad_output, target
and weight, and self = lp (the node computes gl - exp(self)*rowsum whatever self holds, so
lp need not come from a LogSoftmax); its result replaces the Sub's (or the final Cast's).

The operator computes the row sum in closed form (a + s*W, reference.py), the graph adds
gl over the classes with ReduceSum. The fused node keeps the graph's values only where the
two sums are the same number, so:
* label_smoothing 0: the row's gl is -v*w[t] at the target and 0*v elsewhere, with v proved
  finite on every kept row (the nll reader's proof, finiteness.py), and zeros on ignored
  rows. A sum of one value and zeros is that value exactly, in any order ONNX lets
  ReduceSum add in (signed zeros aside, which give the same values after the Sub). NaN and
  inf then come only from lp (exp(NaN), exp(+inf)*0), which the node reads through the same
  `gl - exp(lp)*rowsum` as the graph. Fused. A non-finite v makes the graph's whole row NaN
  (0*inf) where the operator's rowsum is inf: left, with the nll reader's reason.
* label_smoothing > 0: every class of a kept row holds a smoothing term, so ReduceSum adds
  C nonzero terms (rounded in an order ONNX leaves open) where the operator adds
  (1 - ls)*w[t] and (ls/C)*W in closed form: they differ by rounding (and may overflow
  differently), so the node would not keep the graph's values at its precision. Left.
* reduction='mean' of 2-D input: the exporter divides the nll term by a total weight of 1
  (onnxscript's torchlib FIXME, nll.py), so with ls = 0 the mean graph is the sum's node
  for node and is fused as reduction sum with a note. With ls > 0 only the nll term is
  sum-scaled while the smoothing term is divided by the kept rows' total: no reduction of
  CrossEntropyLossGrad computes that graph (and the row sum above rules it out anyway).

A candidate left for a reason of the log_softmax backward (its types, its operands, label
smoothing) claims only those nodes, so that the nll term inside may still become
NLLLossBackward (nll.py), which keeps its values."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from onnx import NodeProto

from lossgrad_compiler import spec
from lossgrad_compiler.fusion.graph import GraphIndex, int_attribute, readable
from lossgrad_compiler.fusion.nll import (
    EXPORTED_TOTAL_WEIGHT,
    NLL,
    NllMatch,
    NllReader,
    total_weight_one_note,
)
from lossgrad_compiler.fusion.patterns import cast_target

CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
CE_TOTAL_WEIGHT_ONE = total_weight_one_note(
    "F.cross_entropy(reduction='mean') of 2-D input",
    "without label smoothing ",
    "the sum's gradient",
)
ROW_SUM = (
    "the graph adds gl over the classes with ReduceSum, where CrossEntropyLossGrad computes "
    "the row sum in closed form ((1 - ls)*w[t] + (ls/C)*W, times the scale)"
)
SMOOTHED = (
    f"label smoothing: every class of a kept row holds a smoothing term, so {ROW_SUM}: a sum "
    "of C nonzero terms, rounded in an order ONNX leaves open, against two products: the "
    "results differ by rounding (and near overflow by class), so fusing would not keep the "
    "graph's values at its precision"
)
SMOOTHED_MEAN = (
    f"a mean with label smoothing: the exporter divides the nll term by {EXPORTED_TOTAL_WEIGHT}"
    " but the smoothing term by the kept rows' total, so the graph is neither "
    "CrossEntropyLossGrad's mean nor its sum; and "
)


@dataclass
class CeParts:
    """The log_softmax backward around gl: what the node replaces besides the nll term."""

    sub: NodeProto
    row: NodeProto  # Mul(Exp(lp), ReduceSum(gl))
    exp: NodeProto
    total: NodeProto  # the ReduceSum
    gl: str  # the value the Sub subtracts from (gl, or its Cast)
    lp: str  # the Exp's operand behind a Cast: the node's self
    casts: list[NodeProto] = field(default_factory=list)
    swapped: bool = False


class CeReader:
    """Reads a root (the Sub, or the Cast after it) as the exporter's cross_entropy
    backward."""

    def __init__(self, index: GraphIndex) -> None:
        self.index = index
        self.nll = NllReader(index)

    def _producer(self, value: str, op_type: str) -> NodeProto | None:
        node = self.index.producer.get(value)
        if node is None or node.op_type != op_type or not readable(node):
            return None
        return node

    def _uncast(self, value: str) -> tuple[str, NodeProto | None]:
        """The value behind a Cast to a float type (the exporter's widening of half types)."""
        node = self._producer(value, "Cast")
        if node is not None and spec.float_type(cast_target(node)) is not None:
            return node.input[0], node
        return value, None

    def _row_term(self, value: str) -> tuple[NodeProto, NodeProto, NodeProto] | None:
        """value = Mul(Exp(e), ReduceSum(s)) in either order: (mul, exp, reducesum)."""
        mul = self._producer(value, "Mul")
        if mul is None or len(mul.input) != 2:
            return None
        for a, b in (tuple(mul.input), tuple(reversed(mul.input))):
            exp = self._producer(a, "Exp")
            total = self._producer(b, "ReduceSum")
            if exp is not None and total is not None:
                return mul, exp, total
        return None

    def _parts(self, root: NodeProto) -> CeParts | None:
        casts: list[NodeProto] = []
        sub: NodeProto | None = root
        if root.op_type == "Cast" and readable(root):
            sub = self._producer(root.input[0], "Sub")
        if sub is None or sub.op_type != "Sub" or not readable(sub) or len(sub.input) != 2:
            return None
        for gl, other, swapped in ((*sub.input, False), (*reversed(sub.input), True)):
            row = self._row_term(other)
            if row is None or row[2].input[0] != gl:
                continue
            mul, exp, total = row
            lp, lp_cast = self._uncast(exp.input[0])
            casts += [lp_cast] if lp_cast is not None else []
            return CeParts(sub, mul, exp, total, gl, lp, casts, swapped)
        return None

    def read(self, root: NodeProto) -> NllMatch | None:
        """None where `root` is no cross_entropy backward; else a match, maybe with the
        reason it is left (then `claims` are the nodes it keeps others from reading)."""
        parts = self._parts(root)
        if parts is None:
            return None
        gl, gl_cast = self._uncast(parts.gl)
        lsm = [root, *([parts.sub] if parts.sub is not root else []), parts.row, parts.exp,
               parts.total, *parts.casts, *([gl_cast] if gl_cast is not None else [])]  # fmt: skip
        nll, smoothing = self._gradient(gl)
        gl_type = self.index.type_of(gl)
        if nll is None or nll.op_type != NLL:
            return None  # not an nll term, or a 4-D one: NLLLoss2dBackward's
        if gl_type is not None and gl_type.shape is not None and len(gl_type.shape) != 2:
            return None  # a 1-D one (no batch): CrossEntropyLossGrad takes [N, C]
        if smoothing is not None:
            lsm.append(smoothing)

        def left(reason: str, claims: list[NodeProto] = lsm) -> NllMatch:
            return NllMatch(CE, [*lsm, *nll.region], reason, claims=list(claims))

        if smoothing is not None:
            mean = self._divides(smoothing)
            return left((SMOOTHED_MEAN if mean else "") + SMOOTHED)
        if parts.swapped:
            return left(
                "the Sub computes exp(lp)*rowsum - gl, the negated log_softmax backward "
                "(the operator computes gl - exp(lp)*rowsum)"
            )
        reason = self._row_sum_reason(parts.total) or self._type_reason(root, parts, gl)
        if reason:
            return left(reason)
        if nll.reason:
            return left(nll.reason, [*lsm, *nll.region])
        return self._fused(nll, parts, lsm)

    def _gradient(self, gl: str) -> tuple[NllMatch | None, NodeProto | None]:
        """gl as the nll term (NllReader), or Add(smoothing, nll term) in either order:
        (the nll match, the Add or None)."""
        node = self.index.producer.get(gl)
        if node is None or not readable(node):
            return None, None
        if node.op_type == "Mul":
            return self.nll.read(node), None
        if node.op_type != "Add" or len(node.input) != 2:
            return None, None
        for term in node.input:
            inner = self._producer(term, "Mul")
            found = self.nll.read(inner) if inner is not None else None
            if found is not None and self.index.uses(term) == 1:
                return found, node
        return None, None

    def _divides(self, add: NodeProto, limit: int = 48) -> bool:
        """A Div in the smoothing term (the mean's division by the kept rows' total): a
        bounded walk up from the Add, not into the nll term's nodes."""
        seen: set[int] = set()
        queue = [add]
        while queue and len(seen) < limit:
            node = queue.pop(0)
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.op_type == "Div":
                return True
            if node.op_type == "ScatterElements":
                continue  # the nll term's one-hot
            queue += [p for v in node.input if (p := self.index.producer.get(v)) is not None]
        return False

    def _row_sum_reason(self, total: NodeProto) -> str:
        """Why the ReduceSum is not the row sum over the class dimension, kept ("" if it is)."""
        axes = self.index.constant(total.input[1]) if len(total.input) > 1 else None
        keepdims = int_attribute(total, "keepdims", 1)
        noop = int_attribute(total, "noop_with_empty_axes", 0)
        if axes is None or sorted(int(a) for a in axes.reshape(-1)) not in ([1], [-1]):
            return "the ReduceSum does not add over the class dimension (axes [1]) alone"
        if keepdims != 1 or noop != 0:
            return "the ReduceSum does not keep the class dimension (keepdims 1)"
        return ""

    def _type_reason(self, root: NodeProto, parts: CeParts, gl: str) -> str:
        """Why the graph does not compute in the node's types ("" where it does): self's
        type S for lp, gl and the result, the compute type of S (float32 for half types) for
        the log_softmax backward's operations."""
        self_type = self.index.type_of(parts.lp)
        gl_type = self.index.type_of(gl)
        result = self.index.type_of(root.output[0])
        if self_type is None or self_type.float_type is None or not self_type.known_shape:
            return f"the element type and shape of the log-probabilities '{parts.lp}' are not known"
        if self_type.shape is None or len(self_type.shape) != 2:
            return "the log-probabilities are not 2-D: CrossEntropyLossGrad takes [N, C]"
        if gl_type != self_type or result != self_type:
            return (
                f"the nll term '{gl}', the log-probabilities '{parts.lp}' and the result do not "
                "have one type and shape: the operator's result and inputs have self's"
            )
        compute = spec.compute_type(self_type.float_type)
        for node in (parts.sub, parts.row, parts.exp, parts.total):
            found = self.index.type_of(node.output[0])
            if found is None or found.float_type != compute:
                shown = found.float_type.name if found and found.float_type else "unknown"
                return (
                    f"'{node.output[0]}' ({node.op_type}) computes in {shown}; "
                    f"CrossEntropyLossGrad of {self_type.float_type.name} computes in "
                    f"{compute.name}"
                )
        return ""

    def _fused(self, nll: NllMatch, parts: CeParts, lsm: list[NodeProto]) -> NllMatch:
        """The node's call from the nll term's: self = lp, no total_weight, ls = 0."""
        operands = {k: v for k, v in nll.operands.items() if k != "self"}
        operands["self"] = parts.lp
        constants = {k: v for k, v in nll.constants.items() if k != "total_weight"}
        attrs = {**nll.attrs, "label_smoothing": 0.0}
        # one grad_output element: the exporter's mean looks so too (with a weight alone,
        # v = w, as well: the seed and the total weight of 1 fold away)
        note = CE_TOTAL_WEIGHT_ONE if nll.attrs.get("reduction") == "sum" else ""
        return replace(
            nll, op_type=CE, region=[*lsm, *nll.region], operands=operands,
            constants=constants, attrs=attrs, note=note, claims=lsm,
        )  # fmt: skip
