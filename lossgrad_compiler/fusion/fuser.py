"""The fusion pass: find decomposed loss gradients, prove them equal to one ai.lossgrad
node, replace them, and report what was fused and what was left and why.

A subgraph is fused only when (docs/fusion.md states the guarantee this gives)
* one of forms.py's patterns matches it, with the attribute values the form fixes, and the
  form rounds as the operator's kernel does (or reassociate=True was asked for);
* every rounding operation in it computes in one float type, and the fused node computes in
  that type: a float64 computation between Casts becomes a float64 node with the Casts kept,
  a float16 chain without widening Casts stays (the operator computes half types in float32);
* no value computed inside it is read by anything else (it would have to stay computed:
  nothing would be saved, and the pass keeps every value the graph exposes);
* grad_output and the reduction come out of scale.py, and beta is a float32 (the
  attribute's width), so that the node computes the same ge and threshold;
* spec.validate accepts the new node's inputs, and its result type and shape (from
  ONNX shape inference) are exactly those of the value it replaces; where a sum back to an
  operand's shape ends the subgraph, it sums exactly the broadcast axes of the operator's
  own iteration shape;
* the model imports ai.onnx opset 13 or later, where ai.lossgrad nodes run;
* the node, compiled from the shapes the compiler infers, never meets a dynamic dimension
  broadcast at run time (broadcasting.py), so that it runs where the graph runs.
nll_loss's one-hot product (nll.py) has its own reader and proof: its grad_output and weight
must be provably finite (finiteness.py), and the node reads the target wrapped as the
graph's ScatterElements reads a negative index. cross_entropy's backward (cross_entropy.py)
is that product followed by log_softmax's backward, fused only without label smoothing,
where the graph's row sum is exact.
Everything else is left as it is, with the reason in the report. Attributes are read by
name and type (graph.py); the names the pass makes up are new in every scope of the model."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from lossgrad_compiler import spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.fusion.broadcasting import unproved_broadcast
from lossgrad_compiler.fusion.cross_entropy import CeReader
from lossgrad_compiler.fusion.factors import family_scale, is_candidate
from lossgrad_compiler.fusion.family_forms import ALL_FORMS
from lossgrad_compiler.fusion.forms import Form
from lossgrad_compiler.fusion.graph import (
    GraphIndex,
    ValueType,
    defined_names,
    int_attribute,
    outer_names,
    readable,
    uniform,
)
from lossgrad_compiler.fusion.nll import NllMatch, NllReader, validate, wrap_target
from lossgrad_compiler.fusion.patterns import HALF_TYPES, Binding, Matcher, cast_target
from lossgrad_compiler.fusion.report import Fused, FusionReport, LeftAlone
from lossgrad_compiler.fusion.scale import Scale, ScaleFinder
from lossgrad_compiler.onnx import builders

_STANDARD = ("", "ai.onnx")
# compile_model's oldest ai.onnx opset (backends/onnx/opsets.py; tests/fusion check they agree):
# below it, ReduceSum and Squeeze take axes as attributes and no ai.lossgrad node runs
MIN_ONNX_OPSET = 13
# the operations that round their result (the others fusion reads are exact: Neg, Abs,
# Sign, comparisons, Where, Expand, Reshape, Identity, widening Casts)
SCALING = ("mean", "batchmean")  # reductions whose scale the node multiplies grad_output by
# the pattern variables that bind an operator's optional inputs
OPTIONAL_INPUTS = {"W": "weight", "PW": "pos_weight"}
ROUNDING_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Exp", "Log", "Sigmoid", "ReduceSum"})


@dataclass
class _Tail:
    """What follows the elementwise core: a sum back to an operand's shape, a broadcast to
    one (Expand then Slice to the same shape), and a final Cast."""

    nodes: list[NodeProto] = field(default_factory=list)
    core: str = ""
    sums: NodeProto | None = None
    fits: bool = False
    after: NodeProto | None = None  # a Squeeze or Reshape after the sum


@dataclass
class _Left:
    """A candidate left alone, and the nodes it spans (its reason is dropped from the report
    when a fusion took those nodes after all, from a shorter tail)."""

    left: LeftAlone
    region: set[int]


@dataclass
class _Plan:
    root: NodeProto
    node: NodeProto
    constants: list[onnx.TensorProto]
    dead: set[int]
    fused: Fused
    before: list[NodeProto] = field(default_factory=list)  # new nodes that feed `node`


def fuse(model: ModelProto, *, reassociate: bool = False) -> tuple[ModelProto, FusionReport]:
    """A copy of `model` with every provable loss-gradient subgraph of its main graph
    replaced by one ai.lossgrad node, and the report.

    `reassociate=True` also fuses the forms that group their operations otherwise than the
    operator (PyTorch's KlDivTargetBackward, SmoothL1 with (s*d)/beta for most beta): results
    then agree on moderate finite inputs, and may differ near overflow and for infinite
    inputs (docs/fusion.md). Off by default, as a C compiler does not reassociate without
    -ffast-math."""
    result = ModelProto()
    result.CopyFrom(model)
    fuser = _Fuser(result, reassociate)
    report = fuser.run()
    return result, report


class _Fuser:
    def __init__(self, model: ModelProto, reassociate: bool = False) -> None:
        self.model = model
        self.reassociate = reassociate
        self.index = GraphIndex(model)
        self.matcher = Matcher(self.index)
        self.scales = ScaleFinder(self.index, self.matcher)
        self.claimed: set[int] = set()  # nodes of subgraphs already fused or left on purpose
        self._retype_through_checked_reshapes()
        self.names = defined_names(model)  # every scope's: what the pass adds is new in all

    def _retype_through_checked_reshapes(self) -> None:
        """Shape inference does not see that a Reshape to a shape of zeros (this project's
        inline size check) keeps the shape, nor that a Slice to the shape its Expand already
        has keeps everything: infer again over a copy where those are Identity, so the values
        behind them have their shapes."""
        rounds = (
            self._keeps_shape_reshape,
            lambda n: self._keeps_shape_reshape(n) or self._fits(n),
        )
        for keeps in rounds:
            copy = ModelProto()
            copy.CopyFrom(self.model)
            changed = False
            for original, node in zip(self.model.graph.node, copy.graph.node, strict=True):
                if node.domain in _STANDARD and keeps(original):
                    node.op_type = "Identity"
                    del node.input[1:]
                    node.ClearField("attribute")
                    changed = True
            if changed:
                self.index.infer(copy)

    def _keeps_shape_reshape(self, node: NodeProto) -> bool:
        return (
            node.op_type == "Reshape"
            and self.matcher.through_identity(node.output[0]) != (node.output[0])
        )

    def run(self) -> FusionReport:
        report = FusionReport()
        consumed = self.claimed
        fused_nodes: set[int] = set()
        plans: list[_Plan] = []
        lefts: list[_Left] = []
        for node in reversed(self.model.graph.node):
            if id(node) in consumed or node.domain not in _STANDARD or len(node.output) != 1:
                continue
            found = self._try_root(node)
            if isinstance(found, _Plan):
                if found.dead & consumed:
                    continue
                plans.append(found)
                consumed |= found.dead
                fused_nodes |= found.dead
            elif isinstance(found, _Left):
                lefts.append(found)
        covered: set[int] = set()  # one reason per candidate: the outermost reading's
        for left in lefts:
            root = id(self.index.producer[left.left.output])
            if root in fused_nodes or left.region & fused_nodes or root in covered:
                continue
            report.left.append(left.left)
            covered |= left.region
        self._apply(plans)
        report.fused = [p.fused for p in reversed(plans)]
        report.left.reverse()
        return report

    # ------------------------------------------------------------------ matching

    def _try_root(self, root: NodeProto) -> _Plan | _Left | None:
        nll = CeReader(self.index).read(root) or NllReader(self.index).read(root)
        if nll is not None:
            return self._plan_nll(root, nll)
        first_reason: _Left | None = None
        for tail in self._tails(root):
            for form in ALL_FORMS:
                if tail.sums is not None and not spec.OPERATORS[form.op_type].sums_result:
                    continue
                for binding in self.matcher.match(form.pattern, tail.core):
                    outcome = self._plan(root, tail, form, binding)
                    if isinstance(outcome, _Plan) or (form.report_only and outcome):
                        return outcome  # a known gradient left whole: no other reading
                    first_reason = first_reason or outcome
        return first_reason

    def _tails(self, root: NodeProto) -> list[_Tail]:
        """The ways to read `root` as core + tail, longest tail first: an Identity naming the
        result, a final Cast, then a broadcast to the result's shape, then a sum back (with
        a Squeeze or a Reshape after it), each optional."""
        tails = [_Tail(core=root.output[0])]
        nodes: list[NodeProto] = []
        node: NodeProto | None = root
        sums = None
        fits = False
        if node.op_type == "Identity" and readable(node):
            nodes.append(node)
            node = self.index.producer.get(node.input[0])
        floats = (*HALF_TYPES, TensorProto.FLOAT, TensorProto.DOUBLE)
        if node is not None and readable(node) and cast_target(node) in floats:
            nodes.append(node)
            tails.insert(0, _Tail(list(nodes), node.input[0]))
            node = self.index.producer.get(node.input[0])
        if node is not None and readable(node) and self._fits(node):
            expand = self.index.producer[node.input[0]]
            nodes += [node, expand]
            fits = True
            tails.insert(0, _Tail(list(nodes), expand.input[0], fits=True))
            node = self.index.producer.get(expand.input[0])
        after = None
        if node is not None and readable(node) and node.op_type in ("Squeeze", "Reshape"):
            after = node
            node = self.index.producer.get(node.input[0])
        if node is not None and readable(node) and node.op_type == "ReduceSum":
            nodes += [n for n in (after, node) if n is not None]
            sums = node
            tails.insert(0, _Tail(list(nodes), node.input[0], sums, fits, after))
        return tails

    def _fits(self, node: NodeProto) -> bool:
        """Slice(Expand(v, s), zeros, s): v broadcast to the shape s, when s is known from
        shapes and the Expand already gives exactly s (so the Slice keeps everything)."""
        if node.op_type != "Slice" or len(node.input) != 3:
            return False
        expand = self.index.producer.get(node.input[0])
        starts = self.index.constant(node.input[1])
        if expand is None or expand.op_type != "Expand" or starts is None or starts.any():
            return False
        if expand.input[1] != node.input[2]:
            return False
        expanded = self.index.type_of(node.input[0])
        dims = self.scales.dims(node.input[2])
        if expanded is None or not expanded.known_shape or dims is None:
            return False
        sizes = [name[0] if factor_only else name for name, factor_only in _dim_names(dims)]
        return len(sizes) == len(expanded.shape) and tuple(sizes) == expanded.shape  # type: ignore[arg-type]

    # ------------------------------------------------------------------ checking

    def _plan_nll(self, root: NodeProto, match: NllMatch) -> _Plan | _Left:
        """An nll_loss or cross_entropy backward (nll.py, cross_entropy.py): its node, with
        the target wrapped as the graph's ScatterElements reads it, or why it is left."""
        output = root.output[0]
        region = {id(n) for n in match.claims or match.region}

        def left(reason: str) -> _Left:
            self.claimed |= region
            return _Left(LeftAlone(match.op_type, output, reason), region)

        if match.reason:
            return left(match.reason)
        opset = self.index.onnx_opset
        if opset is not None and opset < MIN_ONNX_OPSET:
            return left(
                f"the model imports ai.onnx opset {opset}; an ai.lossgrad node runs only in "
                f"models of opset {MIN_ONNX_OPSET} or later"
            )
        keeps = (*match.operands.values(), match.target)
        dead = self._dead_after_replacing(root, keeps)
        for node in match.region[1:]:
            if id(node) not in dead:
                return left(
                    f"'{node.output[0]}' ({node.op_type}), computed inside the gradient, is "
                    "also read elsewhere: fusing would compute it twice"
                )
        checked = validate(match, self.index, match.operands["self"])
        if isinstance(checked, str):
            return left(checked)
        result = self.index.type_of(output)
        assert result is not None
        if checked.result_type.onnx != result.elem_type:
            return left(f"{match.op_type} would give {checked.result_type.name}")
        if tuple(checked.result_shape or ()) != result.shape:
            return left(f"{match.op_type} would give shape {list(checked.result_shape or ())}")
        before, constants, target, node_ii = wrap_target(match, self._fresh)
        operands = {"grad_output": "", "self": "", "target": target}
        if "total_weight" in match.constants:
            operands["total_weight"] = ""
        operands.update(match.operands)
        for name, array in match.constants.items():
            operands[name] = self._fresh(f"{output}_{name}")
            constants.append(numpy_helper.from_array(array, operands[name]))
        attrs = {**match.attrs, "ignore_index": node_ii}
        node = builders.make_node(
            match.op_type,
            operands,
            output,
            name=root.name or self._fresh(f"{match.op_type}_fused"),
            **attrs,
        )
        notes = [match.note] if match.note else []
        if node_ii != match.attrs["ignore_index"]:
            notes.append(
                f"ignore_index {match.attrs['ignore_index']} is a class: the node reads the "
                "target wrapped as the graph's ScatterElements reads it (t + C for t < 0) and "
                f"ignores {node_ii} instead, which no wrapped target equals"
            )
        fused = Fused(
            match.op_type,
            dict(attrs),
            tuple(operands.values()),
            output,
            "pytorch",
            len(dead),
            note="; ".join(notes),
            added=f"{len(before)} added to read the target as ScatterElements does",
        )
        return _Plan(root, node, constants, dead, fused, before)

    def _plan(
        self, root: NodeProto, tail: _Tail, form: Form, binding: Binding
    ) -> _Plan | _Left | None:
        output = root.output[0]
        region = [*tail.nodes, *binding.nodes]

        def left(reason: str) -> _Left:
            return _Left(LeftAlone(form.op_type, output, reason), {id(n) for n in region})

        if not form.when(binding) or (form.scaling and not is_candidate(self.scales, binding)):
            return None
        if form.report_only:
            # a known gradient left as written: nothing inside it is fused piecemeal either
            self.claimed |= {id(n) for n in region}
            return left(form.report_only)
        attrs = form.attributes(binding)
        if isinstance(attrs, str):
            return left(attrs)
        for name in ("beta", "delta"):
            if name in attrs and float(np.float32(attrs[name])) != attrs[name]:
                return left(f"{name} {attrs[name]!r} is not a float32 (the attribute's width)")
        opset = self.index.onnx_opset
        if opset is not None and opset < MIN_ONNX_OPSET:
            self.claimed |= {id(n) for n in region}
            return left(
                f"the model imports ai.onnx opset {opset}; an ai.lossgrad node runs only in "
                f"models of opset {MIN_ONNX_OPSET} or later (its function and compile_model's "
                "standard ONNX need them), so the fused model would not run where this one does"
            )
        s_value = binding.values.get("S")
        regrouped = self._regrouping(form, attrs, s_value)
        if regrouped is not None and not self.reassociate:
            return left(
                f"the graph computes {regrouped}: another order of operations, which can "
                "change a result's class near overflow or with an infinite grad_output; "
                "fuse(model, reassociate=True) (--fuse-reassociate) accepts it"
            )
        leaves = tuple(binding.values[k] for k in ("S", "X", "T") if k in binding.values)
        dead = self._dead_after_replacing(root, leaves)
        inside = {id(n) for n in region}
        for node in region[1:]:
            if id(node) in dead:
                continue
            # name the value that something outside the gradient reads (the others stay
            # alive only because they feed it)
            users = [
                c.name or c.op_type
                for v in node.output
                for c in self.index.consumers.get(v, ())
                if id(c) not in inside
            ]
            exposed = [v for v in node.output if v in self.index.outputs]
            if not users and not exposed:
                continue
            where = ", ".join(
                [*(f"node '{u}'" for u in users), *(f"graph output '{v}'" for v in exposed)]
            )
            return left(
                f"'{node.output[0]}' ({node.op_type}), computed inside the gradient, is "
                f"also read by {where}: fusing would compute it twice"
            )
        if any(id(node) not in dead for node in region[1:]):
            return left("values computed inside the gradient are also read elsewhere")
        result_type = self.index.type_of(output)
        if result_type is None or not result_type.known_shape or result_type.float_type is None:
            return left("shape inference does not give the result's type and shape")
        compute = self._graph_compute(region, form, attrs, binding)
        if isinstance(compute, str):
            return left(compute)
        first: _Plan | _Left | None = None
        for widen in (False, True):
            outcome = self._operands(root, tail, form, binding, attrs, compute, widen, dead)
            if isinstance(outcome, _Plan):
                outcome.fused = replace(outcome.fused, reassociated=regrouped or "")
                return outcome
            if isinstance(outcome, str):
                first = first or left(outcome)
        return first

    def _call(
        self,
        form: Form,
        attrs: dict[str, Any],
        scale: Scale,
        s_value: str | None,
        self_type: ValueType,
        target_type: ValueType,
        promoted: spec.FloatType,
        optional: dict[str, str],
    ) -> tuple[spec.CheckedCall, str, np.ndarray | None, dict[str, Any]] | str:
        """The node's call for this scale: (checked call, grad_output's value or "" for a new
        constant, that constant, the attributes), or why it is not valid."""
        go_constant: np.ndarray | None = None
        if isinstance(scale.grad_output, str):
            go_value = scale.grad_output
            go_type = self.index.type_of(go_value)
            if go_type is None or go_type.float_type is None or go_type.shape is None:
                return "grad_output's element type and shape are not known"
        else:
            go_value = ""
            s_type = self.index.type_of(s_value or "")
            for holder in (promoted, s_type.float_type if s_type is not None else None):
                if holder is None:
                    continue
                exact = np.asarray(scale.grad_output, holder.dtype)
                if float(exact) == scale.grad_output:
                    go_constant = exact
                    break
            if go_constant is None:
                return (
                    f"the folded scale {scale.grad_output!r} is not a {promoted.name}, so no "
                    "grad_output of the result's type gives it"
                )
            go_type = ValueType(spec.float_type(go_constant.dtype).onnx, ())  # type: ignore[union-attr]
        attrs = {**attrs, "reduction": scale.reduction}
        infos = {
            "grad_output": spec.TensorInfo(go_type.float_type.dtype, go_type.shape),  # type: ignore[union-attr]
            "self": spec.TensorInfo(self_type.float_type.dtype, self_type.shape),  # type: ignore[union-attr]
            "target": spec.TensorInfo(target_type.float_type.dtype, target_type.shape),  # type: ignore[union-attr]
        }
        for name, value in optional.items():
            found = self.index.type_of(value)
            if found is None or found.float_type is None or found.shape is None:
                return f"the element type and shape of {name} '{value}' are not known"
            infos[name] = spec.TensorInfo(found.float_type.dtype, found.shape)
        try:
            checked = spec.validate(form.op_type, infos, attrs)
        except LossGradError as err:
            return f"the operands do not make a valid {form.op_type}: {err}"
        return checked, go_value, go_constant, attrs

    def _check_call(
        self,
        form: Form,
        checked: spec.CheckedCall,
        required: spec.FloatType,
        compute: spec.FloatType | None,
        scale: Scale,
        result_type: ValueType,
        binding: Binding,
        tail: _Tail,
    ) -> str:
        """Why the checked call does not compute what the subgraph computes ("" if it
        does): its compute type, result type and shape, and the sums."""
        # a form any type computes alike (compute None) still multiplies grad_output by the
        # scale in the node's compute type: only a scaling reduction needs it to be the one
        # the graph multiplied in
        if (compute is not None or scale.reduction in SCALING) and checked.compute != required:
            return _compute_mismatch(required, checked.compute)
        if checked.result_type.onnx != result_type.elem_type:
            return (
                f"{form.op_type} would give {checked.result_type.name}, the graph gives "
                f"{helper.tensor_dtype_to_np_dtype(result_type.elem_type).name}"
            )
        if tuple(checked.result_shape or ()) != result_type.shape:
            return (
                f"{form.op_type} would give shape {list(checked.result_shape or ())}, the graph "
                f"gives {list(result_type.shape)}"  # type: ignore[arg-type]
            )
        sums = [*binding.sums, *([(tail.sums, tail.after)] if tail.sums is not None else [])]
        if any(not self._sums_back(node, after, checked) for node, after in sums):
            return "the ReduceSum does not sum exactly the broadcast axes back"
        return ""

    def _kernel_broadcast(self, checked: spec.CheckedCall, values: dict[str, str | None]) -> str:
        """Why the node, compiled from the shapes the compiler infers, could meet a dynamic
        dimension broadcast at run time (broadcasting.py); "" where it cannot. An operand the
        pass makes up (a constant grad_output, a placeholder self) has its static shape."""
        compiled: dict[str, spec.Shape | None] = {}
        known: dict[str, spec.Shape] = {}
        for name in checked.present:
            shape = checked.shapes[name]
            assert shape is not None  # the pass only calls with known ranks
            known[name] = shape
            value = values.get(name, "")
            found = self.index.compiled_type(value) if value else None
            compiled[name] = found.shape if found is not None else shape if not value else None
        return unproved_broadcast(checked.op.name, compiled, known)

    def _regrouping(self, form: Form, attrs: dict[str, Any], s_value: str | None) -> str | None:
        """How the form groups its operations where the operator's kernel groups them
        otherwise (forms.py), or None when it rounds as the kernel does."""
        if not form.order:
            return None
        s_is_one = s_value is None or uniform(self.index.constant(s_value)) == 1.0
        return None if form.same_rounding(attrs, s_is_one) else form.order

    def _graph_compute(
        self, region: list[NodeProto], form: Form, attrs: dict[str, Any], binding: Binding
    ) -> spec.FloatType | str | None:
        """The one float type every rounding operation of the subgraph computes in (the
        fused node must compute in it too), None where any type gives the same results, or
        why there is none."""
        if form.any_type(attrs, binding):
            return None
        types: dict[str, spec.FloatType] = {}
        for node in region:
            if node.op_type not in ROUNDING_OPS:
                continue
            found = self.index.type_of(node.output[0])
            if found is None or found.float_type is None:
                return f"the element type of '{node.output[0]}' ({node.op_type}) is not known"
            types.setdefault(found.float_type.name, found.float_type)
        if len(types) > 1:
            return (
                f"the gradient computes in {' and '.join(sorted(types))}; the operator "
                "computes in one type"
            )
        return next(iter(types.values()), None)

    def _scaled_in_half(self, go_value: str | None) -> str:
        """Why a grad_output the graph computes in a half type cannot feed a node whose form
        computes in any type (s*sign(d), Form.any_type): ONNX Runtime's CPU provider computes
        half arithmetic in float32 and drops the Casts between operations, so the node's
        input would be rounded to the half type where neither ONNX's meaning (rounding after
        every operation) nor ONNX Runtime's run of the graph (rounding at the end) rounds."""
        if not go_value:
            return ""
        value = self.matcher.through_identity(go_value)
        found = self.index.type_of(value)
        node = self.index.producer.get(value)
        if found is None or found.float_type is None or not found.float_type.is_half:
            return ""
        if node is None or node.op_type not in ROUNDING_OPS:
            return ""
        half = found.float_type.name
        return (
            f"the graph computes grad_output '{value}' ({node.op_type}) in {half}: ONNX "
            f"Runtime computes {half} operations in float32 without the Casts between them, "
            f"so the fused node would read it rounded where ONNX Runtime does not round the "
            f"graph"
        )

    def _widened(self, binding: Binding, key: str, compute: spec.FloatType) -> str | None:
        """The operand `key` where the graph has it in the compute type: between the value
        the pattern matched and the leaf behind Expand and widening Casts, the one nearest
        the leaf whose element type is `compute`."""
        leaf = binding.values[key]
        value = self.matcher.through_identity(binding.raw.get(key, leaf))
        best = None
        for _ in range(64):  # a bounded walk down the chain leaf() followed
            found = self.index.type_of(value)
            if found is not None and found.float_type == compute:
                best = value
            node = self.index.producer.get(value)
            if value == leaf or node is None or not readable(node):
                break
            if node.op_type == "Expand" or (
                node.op_type == "Cast" and self.matcher.leaf(value) != value
            ):
                value = self.matcher.through_identity(node.input[0])
                continue
            break
        return best

    def _operands(
        self,
        root: NodeProto,
        tail: _Tail,
        form: Form,
        binding: Binding,
        attrs: dict[str, Any],
        compute: spec.FloatType | None,
        widen: bool,
        dead: set[int],
    ) -> _Plan | str | None:
        """The node's operands, scale and reduction, checked; or why not. `widen` takes
        self and target where the graph has them in its compute type (a float32 input cast
        to float64 and computed there makes a float64 node, its Casts kept)."""
        output = root.output[0]
        result_type = self.index.type_of(output)
        assert result_type is not None and result_type.float_type is not None
        target = binding.values["T"]
        x = binding.values.get("X")
        if widen:
            if compute is None:
                return None
            target = self._widened(binding, "T", compute) or ""
            x = self._widened(binding, "X", compute) or "" if x is not None else None
            if not target or x == "":
                return None
            if target == binding.values["T"] and x == binding.values.get("X"):
                return None  # nothing to widen: the first try said it all
        s_value = binding.values.get("S")
        self_value = self._self_operand(root, binding, x, target, result_type, dead)
        placeholder: np.ndarray | None = None
        self_type = self.index.type_of(self_value) if self_value is not None else None
        if self_value is None and _small_static(result_type):
            # KlDivBackward never reads self: a placeholder of its type and static shape
            placeholder = np.zeros(result_type.shape, result_type.float_type.dtype)  # type: ignore[arg-type]
            self_type = result_type
        unplaced = self_value is None and placeholder is None
        if unplaced and s_value is not None and self.index.type_of(s_value) == result_type:
            self_value, self_type = s_value, result_type  # last: keeps the scale's nodes
        if self_value is None and placeholder is None:
            return "no value of self's type and shape to pass as self"
        target_type = self.index.type_of(target)
        for found in (self_type, target_type):
            if found is None or not found.known_shape or found.float_type is None:
                return "the operands' element types and shapes are not known"
        assert self_type is not None and target_type is not None
        promoted = spec.promote_types([self_type.float_type, target_type.float_type])  # type: ignore[list-item]
        required = compute
        if required is None:  # any type computes the form alike: the scale's product decides
            s_type = self.index.type_of(s_value or "")
            operands = [promoted, *([s_type.float_type] if s_type and s_type.float_type else [])]
            required = spec.compute_type(spec.promote_types(operands))
        scales = [Scale(1.0, "sum")]
        if form.scaling:
            shapes = (self_type.shape, target_type.shape)
            self.scales.refused_casts.clear()
            family = family_scale(self.scales, form, binding, shapes, required)  # type: ignore[arg-type]
            if isinstance(family, str):
                return "; ".join(dict.fromkeys([family, *self.scales.refused_casts]))
            scales = [family]
        elif s_value is not None:
            shapes = (self_type.shape, target_type.shape)
            found = self.scales.find(form.op_type, s_value, *shapes, required)  # type: ignore[arg-type]
            # S itself as grad_output (reduction none) is always the graph's arithmetic
            scales = [found] if found == Scale(s_value, "none") else [found, Scale(s_value, "none")]
        first_reason = ""
        optional = {n: binding.values[k] for k, n in OPTIONAL_INPUTS.items() if k in binding.values}
        for scale in scales:
            call = self._call(
                form, attrs, scale, s_value, self_type, target_type, promoted, optional
            )
            if isinstance(call, str):
                first_reason = first_reason or call
                continue
            checked, go_value, go_constant, attrs_with_reduction = call
            unknown = [
                v
                for v in (go_value, self_value, target, *optional.values())
                if v and self.index.inferred.get(v) != self.index.type_of(v)
            ]
            if unknown:
                first_reason = first_reason or (
                    f"ONNX shape inference does not give the shape of '{unknown[0]}', which the "
                    "node would read: the compiler (which infers again) would take its sizes "
                    "for dynamic ones"
                )
                continue
            reason = (
                self._check_call(
                    form, checked, required, compute, scale, result_type, binding, tail
                )
                or (self._scaled_in_half(go_value) if compute is None else "")
                or self._kernel_broadcast(
                    checked,
                    {"grad_output": go_value, "self": self_value, "target": target, **optional},
                )
            )
            if reason:
                first_reason = first_reason or reason
                continue
            break
        else:
            return first_reason
        attrs = attrs_with_reduction
        # every check passed: name what the node adds
        constants: list[onnx.TensorProto] = []
        if placeholder is not None:
            self_value = self._fresh(f"{output}_self")
            constants.append(numpy_helper.from_array(placeholder, self_value))
        if go_constant is not None:
            go_value = self._fresh(f"{output}_grad_output")
            constants.append(numpy_helper.from_array(go_constant, go_value))
        assert self_value is not None
        operands = {"grad_output": go_value, "self": self_value, "target": target, **optional}
        dead = self._dead_after_replacing(root, tuple(operands.values()))
        node = builders.make_node(
            form.op_type,
            operands,
            output,
            name=root.name or self._fresh(f"{form.op_type}_fused"),
            **attrs,
        )
        fused = Fused(
            form.op_type,
            dict(attrs),
            tuple(operands.values()),
            output,
            form.written_by,
            len(dead),
        )
        return _Plan(root, node, constants, dead, fused)

    def _self_operand(
        self,
        root: NodeProto,
        binding: Binding,
        x: str | None,
        target: str,
        result: ValueType,
        dead: set[int],
    ) -> str | None:
        """self: the bound X, else (KlDivBackward never reads it) a value of the result's
        type and shape: one whose shape the subgraph takes (a size check or a count for the
        scale) and that stays computed anyway, else the target; the caller falls back to a
        zeros placeholder, then to S."""
        if x is not None:
            return x
        leaves = {v for k, v in binding.values.items() if k in ("S", "T")}
        # a witness that dies with the subgraph (a forward value kept only for its shape)
        # would be kept alive for nothing: only live ones, graph inputs included
        witnesses = [
            w
            for w in self._shape_sources(root)
            if w not in leaves and id(self.index.producer.get(w)) not in dead
        ]
        ordered = [*witnesses, target]
        for value in ordered:
            if self.index.type_of(value) == result:
                return value
        return None

    def _shape_sources(self, root: NodeProto, limit: int = 64) -> list[str]:
        """The values whose Shape the nodes above `root` take, nearest first (a bounded
        walk: a loss gradient's subgraph is a few dozen nodes)."""
        found: list[str] = []
        seen = {id(root)}
        queue = [root]
        while queue and len(seen) < limit:
            node = queue.pop(0)
            for value in node.input:
                producer = self.index.producer.get(value)
                if producer is None or id(producer) in seen:
                    continue
                seen.add(id(producer))
                if producer.op_type == "Shape" and producer.input[0] not in found:
                    found.append(producer.input[0])
                queue.append(producer)
        return found

    def _sums_back(
        self, node: NodeProto, after: NodeProto | None, checked: spec.CheckedCall
    ) -> bool:
        """The ReduceSum `node` (and the Squeeze or Reshape `after` it) adds exactly what the
        operator adds: every axis of its iteration shape B that the result does not have (or
        has as 1) is reduced and present in full in the summed value, and every other axis
        of it is B's or 1 and not reduced (the broadcast after the sum fills it)."""
        core_type = self.index.type_of(node.input[0])
        keepdims = int_attribute(node, "keepdims", 1)
        noop = int_attribute(node, "noop_with_empty_axes", 0)
        if core_type is None or not core_type.known_shape or keepdims is None or noop is None:
            return False
        core = tuple(core_type.shape)  # type: ignore[arg-type]
        has_axes = len(node.input) > 1 and node.input[1] != ""
        axes_value = self.index.constant(node.input[1]) if has_axes else np.zeros(0, np.int64)
        if axes_value is None or axes_value.dtype.kind not in "iu":
            return False
        b = tuple(checked.iteration_shape or ())
        r = tuple(checked.result_shape or ())
        if len(core) > len(b) or any(a < -len(core) or a >= len(core) for a in axes_value.flat):
            return False
        axes = {int(a) % len(core) for a in axes_value.flat}
        if not axes and not noop:
            axes = set(range(len(core)))  # no axes: ReduceSum adds over every axis
        dropped = axes if not keepdims else set()
        if after is not None:
            if not keepdims:
                return False
            dropped = self._dropped_leading_axes(after, len(core), r)
            if dropped is None or not dropped <= axes:
                return False
        if dropped != set(range(len(dropped))):
            return False  # dropped axes must be leading ones to keep the alignment
        offset, lead = len(b) - len(core), len(b) - len(r)
        for i, size in enumerate(b):
            c = core[i - offset] if i >= offset else 1
            reduced = (i - offset) in axes
            summed = i < lead or (r[i - lead] == 1 and size != 1)
            if summed and size != 1 and not (c == size and reduced):
                return False
            if not summed and (c not in (1, size) or (reduced and c != 1)):
                return False
        return True

    def _dropped_leading_axes(
        self, after: NodeProto, rank: int, result: tuple[object, ...]
    ) -> set[int] | None:
        """The leading axes a Squeeze (constant axes) or a Reshape to the result's constant
        shape removes from a keepdims sum of rank `rank`."""
        if after.op_type == "Squeeze":
            squeezed = self.index.constant(after.input[1]) if len(after.input) > 1 else None
            return None if squeezed is None else {int(a) % rank for a in squeezed.flat}
        shape = self.index.constant(after.input[1])
        if shape is None or shape.dtype.kind not in "iu":
            return None
        sizes = tuple(int(d) for d in shape.flat)
        if sizes != result or (0 in sizes and int_attribute(after, "allowzero", 0) != 1):
            return None  # a 0 without allowzero copies the input's size instead
        return set(range(rank - len(result)))

    def _dead_after_replacing(self, root: NodeProto, keeps: tuple[str, ...]) -> set[int]:
        """The nodes that nothing reads any more once `root` is replaced by a node that
        reads `keeps`."""
        remaining: dict[str, int] = {}
        for value in keeps:
            remaining[value] = self.index.uses(value) + 1
        dead = {id(root)}
        work = list(root.input)
        while work:
            value = work.pop()
            producer = self.index.producer.get(value)
            if producer is None or id(producer) in dead:
                continue
            if value not in remaining:
                remaining[value] = self.index.uses(value)
            remaining[value] -= 1
            if all(remaining.get(v, self.index.uses(v)) <= 0 for v in producer.output if v):
                dead.add(id(producer))
                work.extend(v for v in producer.input if v)
        return dead

    # ------------------------------------------------------------------ rewriting

    def _fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def _apply(self, plans: list[_Plan]) -> None:
        if not plans:
            return
        graph = self.model.graph
        replacement = {id(p.root): [*p.before, p.node] for p in plans}
        dead = set().union(*(p.dead for p in plans))
        kept: list[NodeProto] = []
        for node in graph.node:
            if id(node) in replacement:
                kept.extend(replacement[id(node)])
            elif id(node) not in dead:
                kept.append(node)
        removed = [n for n in graph.node if id(n) in dead]
        kept = _drop_unread(kept, {o.name for o in graph.output}, removed)
        graph.ClearField("node")
        graph.node.extend(kept)
        graph.initializer.extend(c for p in plans for c in p.constants)
        live = {v for n in graph.node for v in (*n.input, *n.output)}
        infos = [vi for vi in graph.value_info if vi.name in live]
        graph.ClearField("value_info")
        graph.value_info.extend(infos)
        used = {v for n in graph.node for v in n.input} | {o.name for o in graph.output}
        gone = {v for n in removed for v in n.input} - used  # only what the removed nodes read
        inits = [i for i in graph.initializer if i.name not in gone]
        graph.ClearField("initializer")
        graph.initializer.extend(inits)
        if not any(o.domain == spec.DOMAIN for o in self.model.opset_import):
            self.model.opset_import.append(helper.make_opsetid(spec.DOMAIN, spec.OPSET_VERSION))


def _drop_unread(
    nodes: list[NodeProto], outputs: set[str], removed: list[NodeProto]
) -> list[NodeProto]:
    """Nodes that only fed removed subgraphs (shared by two of them, so neither count saw
    them die) are removed too; nothing else is touched, dead code of the model's own
    included."""
    producer = {v: n for n in nodes for v in n.output}
    suspects = [producer[v] for r in removed for v in r.input if v in producer]
    gone: set[int] = set()
    read: dict[str, int] = {}
    for n in nodes:
        for v in (*n.input, *outer_names(n)):
            read[v] = read.get(v, 0) + 1
    for v in outputs:
        read[v] = read.get(v, 0) + 1
    while suspects:
        node = suspects.pop()
        if id(node) in gone or any(read.get(v, 0) for v in node.output):
            continue
        gone.add(id(node))
        for v in node.input:
            read[v] = read.get(v, 0) - 1
            if v in producer:
                suspects.append(producer[v])
    return [n for n in nodes if id(n) not in gone]


def _dim_names(dims: list[tuple[int, tuple[str, ...]]]) -> list[tuple[object, bool]]:
    """Each size as it appears in a shape: an int, or the one symbol it is."""
    out: list[tuple[object, bool]] = []
    for factor, names in dims:
        if not names:
            out.append(((factor,), True))
        elif factor == 1 and len(names) == 1:
            out.append((names[0], False))
        else:
            out.append((None, False))
    return out


def _compute_mismatch(graph: spec.FloatType, node: spec.FloatType) -> str:
    if graph.is_half:
        return (
            f"the graph computes in {graph.name}, rounding every operation to {graph.name}; "
            "the operator computes half types in float32 and rounds once"
        )
    return f"the graph computes in {graph.name}; the fused node would compute in {node.name}"


SELF_PLACEHOLDER_ELEMENTS = 4096  # the largest zeros constant made up to stand for self


def _small_static(value: ValueType) -> bool:
    """A type whose shape is static and small enough for a placeholder self."""
    if value.shape is None or value.float_type is None:
        return False
    if not all(isinstance(d, int) for d in value.shape):
        return False
    return int(np.prod(value.shape)) <= SELF_PLACEHOLDER_ELEMENTS  # type: ignore[arg-type]
