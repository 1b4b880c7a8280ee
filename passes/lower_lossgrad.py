"""`lower-lossgrad`: every lossgrad op becomes level-2 IR (docs/level2.md).

This file is the only place where the operators' math is written. Per op it emits: the
reduction scale (a constant, or computed from `tensor.dim` for dynamic shapes), the output
tensor, and one `linalg.generic` on tensors whose scalar body widens half inputs with
`arith.extf`, evaluates the formula in the compute type C with `arith.select` for every
branch, and narrows once with `arith.truncf`. Broadcasting lives in the indexing maps; a KL
result smaller than the iteration space is summed by `reduction` loops into a zero-filled
C accumulator, narrowed by a second generic when the result type is a half type.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, i1, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import PassFailedException

from lossgrad_compiler import level2, messages, spec
from lossgrad_compiler.dialects.lossgrad import MLIR_FLOAT_TYPES, LossGradOp
from lossgrad_compiler.passes.broadcast_plan import (
    DimSource,
    LoweringPlan,
    ScaleCount,
    plan_lowering,
)
from lossgrad_compiler.passes.lower_classes import (
    ClassBodyValues,
    ClassFormula,
    ClassLowering,
    ClassReduction,
    RowValues,
)
from lossgrad_compiler.passes.lowering_utils import (
    ScalarBuilder,
    affine_map_attr,
    iterator_types,
    tensor_type,
    yield_op,
)

# --------------------------------------------------------------------------- the formulas


@dataclass(frozen=True)
class BodyValues:
    """The scalar operands of a formula, already in the compute type C."""

    ge: SSAValue  # grad_output times the scale (Scaling.GRAD_OUTPUT), else grad_output
    x: SSAValue | None  # self; None for formulas that do not read it
    t: SSAValue  # target
    compute: spec.FloatType  # C
    compute_type: Attribute  # C as an MLIR type
    parameters: Mapping[str, SSAValue]  # run-time attribute values, already in C
    go: SSAValue | None = None  # grad_output
    scale: SSAValue | None = None  # 1/n (RECIPROCAL) or n (DIVISOR); None: nothing scaled
    optional: Mapping[str, SSAValue] | None = None  # the optional inputs that are present


Formula = Callable[[ScalarBuilder, BodyValues], SSAValue]


def kl_div_backward(log_target: bool) -> Formula:
    """-ge * t, or -ge * exp(t) with log_target."""

    def body(b: ScalarBuilder, v: BodyValues) -> SSAValue:
        weight = b.exp(v.t) if log_target else v.t
        return b.negf(b.mulf(v.ge, weight))

    return body


def kl_div_target_backward(log_target: bool) -> Formula:
    """addf(mulf(mulf(ge, t - x), exp(t)), mulf(ge, exp(t))) with log_target, PyTorch's
    order (autograd's two terms, which its exporter writes too); else ge * (ln(t) + 1 - x),
    0 at t == 0."""

    def body(b: ScalarBuilder, v: BodyValues) -> SSAValue:
        assert v.x is not None
        if log_target:
            e = b.exp(v.t)
            return b.addf(b.mulf(b.mulf(v.ge, b.subf(v.t, v.x)), e), b.mulf(v.ge, e))
        one = b.constant(1.0, v.compute_type)
        value = b.mulf(v.ge, b.subf(b.addf(b.log(v.t), one), v.x))
        zero = b.constant(0.0, v.compute_type)
        return b.select(b.cmpf("oeq", v.t, zero), zero, value)

    return body


def smooth_l1_loss_backward(beta: float) -> Formula:
    """ge * clamp((x - t) / beta, -1, 1), the clamp decided by comparing x - t with +-beta;
    with beta == 0 in C, ge * sgn(x - t), no division. A run-time beta (v.parameters) takes
    the place of the constant in the division form."""

    def body(b: ScalarBuilder, v: BodyValues) -> SSAValue:
        assert v.x is not None
        beta_c = float(v.compute.dtype.type(beta))  # "beta > 0" is judged after rounding to C
        one = b.constant(1.0, v.compute_type)
        minus_one = b.constant(-1.0, v.compute_type)
        d = b.subf(v.x, v.t)
        if beta_c > 0:
            # Compare d with +-beta rather than q with +-1: |d| == beta == inf gives +-1.
            beta_value = v.parameters.get("beta") or b.constant(beta_c, v.compute_type)
            q = b.divf(d, beta_value)
            low = b.select(b.cmpf("ole", d, b.negf(beta_value)), minus_one, q)
            clamped = b.select(b.cmpf("oge", d, beta_value), one, low)
            return b.mulf(v.ge, clamped)
        zero = b.constant(0.0, v.compute_type)
        negative = b.select(b.cmpf("olt", d, zero), minus_one, zero)
        sign = b.select(b.cmpf("ogt", d, zero), one, negative)
        return b.mulf(v.ge, sign)

    return body


def mse_loss_backward() -> Formula:
    """mulf(mulf(x - t, 2/n), g): PyTorch's `norm * (input - target) * grad_output`, with
    2/n = (1/n)*2, exact; 2 where nothing is scaled."""

    def body(b: ScalarBuilder, v: BodyValues) -> SSAValue:
        assert v.x is not None and v.go is not None
        two = b.constant(2.0, v.compute_type)
        factor = b.mulf(v.scale, two) if v.scale is not None else two
        return b.mulf(b.mulf(b.subf(v.x, v.t), factor), v.go)

    return body


def huber_loss_backward(delta: float) -> Formula:
    """select(d < -delta, (g*(-s))*delta, select(d > delta, (g*s)*delta, (d*s)*g)),
    d = x - t, PyTorch's order; without a scale (-g)*delta, g*delta, d*g. A run-time delta
    (v.parameters) takes the place of the constant."""

    def body(b: ScalarBuilder, v: BodyValues) -> SSAValue:
        assert v.x is not None and v.go is not None
        delta_c = float(v.compute.dtype.type(delta))
        delta_value = v.parameters.get("delta") or b.constant(delta_c, v.compute_type)
        d = b.subf(v.x, v.t)
        if v.scale is None:
            below = b.mulf(b.negf(v.go), delta_value)
            above = b.mulf(v.go, delta_value)
            inside = b.mulf(d, v.go)
        else:
            below = b.mulf(b.mulf(v.go, b.negf(v.scale)), delta_value)
            above = b.mulf(b.mulf(v.go, v.scale), delta_value)
            inside = b.mulf(b.mulf(d, v.scale), v.go)
        upper = b.select(b.cmpf("ogt", d, delta_value), above, inside)
        return b.select(b.cmpf("olt", d, b.negf(delta_value)), below, upper)

    return body


def sigmoid(b: ScalarBuilder, z: SSAValue, compute_type: Attribute) -> SSAValue:
    """1/(1+exp(-z)) for z > 0, else exp(z)/(1+exp(z)) (onnx's reference Sigmoid): one exp of
    -|z|, which never overflows; a NaN z takes the second form and stays NaN."""
    zero = b.constant(0.0, compute_type)
    one = b.constant(1.0, compute_type)
    positive = b.cmpf("ogt", z, zero)
    e = b.exp(b.select(positive, b.negf(z), z))
    return b.divf(b.select(positive, one, e), b.addf(one, e))


def _divide_by_n(b: ScalarBuilder, v: BodyValues, value: SSAValue) -> SSAValue:
    """A DIVISOR formula's division: value / n where the reduction scales (mean), value
    otherwise; the binary cross entropies divide last, L1LossBackward grad_output first."""
    return b.divf(value, v.scale) if v.scale is not None else value


def soft_margin_loss_backward() -> Formula:
    """-t*sigmoid(-t*x)*norm*g without cancelling (not the decomposition's
    t*g*(sigmoid(t*x) - 1)). Where t*x >= 0, PyTorch's kernel: divf(mulf(mulf(t, e), -norm),
    1 + e) times g, e = exp(-(t*x)); where t*x < 0, the same with mulf(t, 1) over 1 + e,
    e = exp(t*x): one exp of -|t*x|, which never overflows. -norm is -(1/n) for mean, else
    a negf."""

    def body(b: ScalarBuilder, v: BodyValues) -> SSAValue:
        assert v.x is not None and v.go is not None
        zero = b.constant(0.0, v.compute_type)
        one = b.constant(1.0, v.compute_type)
        tx = b.mulf(v.t, v.x)
        below = b.cmpf("olt", tx, zero)
        e = b.exp(b.select(below, tx, b.negf(tx)))
        numerator = b.mulf(v.t, b.select(below, one, e))
        scaled = b.negf(numerator) if v.scale is None else b.mulf(numerator, b.negf(v.scale))
        return b.mulf(b.divf(scaled, b.addf(one, e)), v.go)

    return body


def binary_cross_entropy_backward() -> Formula:
    """divf(mulf(g, x - t), clamp(mulf(x, 1 - x), min=BCE_EPSILON)), times weight, divided by n
    for mean. The clamp is cmpf olt + select: a NaN product stays NaN, as torch.clamp."""

    def body(b: ScalarBuilder, v: BodyValues) -> SSAValue:
        assert v.x is not None and v.go is not None and v.optional is not None
        numerator = b.mulf(v.go, b.subf(v.x, v.t))
        one = b.constant(1.0, v.compute_type)
        product = b.mulf(v.x, b.subf(one, v.x))
        eps = b.constant(float(v.compute.dtype.type(spec.BCE_EPSILON)), v.compute_type)
        clamped = b.select(b.cmpf("olt", product, eps), eps, product)
        value = b.divf(numerator, clamped)
        if "weight" in v.optional:
            value = b.mulf(value, v.optional["weight"])
        return _divide_by_n(b, v, value)

    return body


def binary_cross_entropy_with_logits_backward() -> Formula:
    """mulf(sigmoid(x) - t, g), or with pos_weight p mulf(((p*t + 1) - t)*sigmoid(x) - p*t,
    g) (PyTorch's graph order); times weight, divided by n for mean."""

    def body(b: ScalarBuilder, v: BodyValues) -> SSAValue:
        assert v.x is not None and v.go is not None and v.optional is not None
        p = v.optional.get("pos_weight")
        if p is None:
            value = b.mulf(b.subf(sigmoid(b, v.x, v.compute_type), v.t), v.go)
        else:
            pt = b.mulf(p, v.t)
            one = b.constant(1.0, v.compute_type)
            log_weight = b.subf(b.addf(pt, one), v.t)
            sig = sigmoid(b, v.x, v.compute_type)
            value = b.mulf(b.subf(b.mulf(log_weight, sig), pt), v.go)
        if "weight" in v.optional:
            value = b.mulf(value, v.optional["weight"])
        return _divide_by_n(b, v, value)

    return body


def l1_loss_backward() -> Formula:
    """mulf(divf(g, n), sgn(x - t)): autograd's MeanBackward (g/n; g where nothing is
    scaled), then AbsBackward's product by sgn. sgn(d) = (0 < d) - (d < 0), PyTorch's:
    0 for a zero and for a NaN difference."""

    def body(b: ScalarBuilder, v: BodyValues) -> SSAValue:
        assert v.x is not None and v.go is not None
        zero = b.constant(0.0, v.compute_type)
        one = b.constant(1.0, v.compute_type)
        g = _divide_by_n(b, v, v.go)
        d = b.subf(v.x, v.t)
        above = b.select(b.cmpf("ogt", d, zero), one, zero)
        below = b.select(b.cmpf("olt", d, zero), one, zero)
        return b.mulf(g, b.subf(above, below))

    return body


# --------------------------------------------------------------------------- classes




@dataclass(frozen=True)
class TargetClass:
    """What a row's target is: kept (not ignore_index), in [0, C), and valid (both)."""

    kept: SSAValue
    in_range: SSAValue
    valid: SSAValue


def classify_target(
    b: ScalarBuilder, t: SSAValue, classes: SSAValue, ignore_index: SSAValue
) -> TargetClass:
    """The one statement of which targets count: the formulas read `valid`, the target
    check counts `bad_target` (aclnn 161002)."""
    kept = b.cmpi("ne", t, ignore_index)
    in_range = b.andi(b.cmpi("sge", t, b.integer_constant(0)), b.cmpi("slt", t, classes))
    return TargetClass(kept, in_range, b.andi(kept, in_range))


def bad_target(
    b: ScalarBuilder, t: SSAValue, classes: SSAValue, ignore_index: SSAValue
) -> SSAValue:
    """A kept target outside [0, C): what the target check counts."""
    target = classify_target(b, t, classes, ignore_index)
    return b.andi(target.kept, b.xori(target.in_range, b.integer_constant(1, i1)))


def _round_to_result(b: ScalarBuilder, v: ClassBodyValues, value: SSAValue) -> SSAValue:
    """value rounded to the result type and widened back: PyTorch's kernels compute a half
    type's intermediate in that type."""
    if not v.result.is_half:
        return value
    narrow = MLIR_FLOAT_TYPES[v.result.mlir]
    return b.cast(arith.ExtFOp, b.cast(arith.TruncFOp, value, narrow), v.compute_type)


def nll_loss_backward() -> ClassFormula:
    """select(valid and j == t, mulf(w_j, negf(divf(g, TW))), 0), the eager kernel's
    `w[t]*(-(g/TW))` (negf(g) without the division; the quotient rounded to the result
    type first). The weight is read at the class position: at j == t it is w[t], so no
    index from the target ever addresses it."""

    def body(b: ScalarBuilder, v: ClassBodyValues) -> SSAValue:
        test = classify_target(b, v.t, v.classes, v.ignore_index)
        hit = b.andi(test.valid, b.cmpi("eq", v.t, v.j))
        q = b.divf(v.g, v.total_weight) if v.total_weight is not None else v.g
        q = b.negf(_round_to_result(b, v, q))
        value = b.mulf(v.weight, q) if v.weight is not None else q
        return b.select(hit, value, b.constant(0.0, v.compute_type))

    return body


def kept_weight(b: ScalarBuilder, v: RowValues) -> SSAValue:
    """D's term: w[t] of a valid row (1 without a weight), 0 elsewhere."""
    assert v.t is not None
    valid = classify_target(b, v.t, v.classes, v.ignore_index).valid
    gather = v.weight_of
    w = gather(b, valid, v.t) if gather is not None else b.constant(1.0, v.compute_type)
    return b.select(valid, w, b.constant(0.0, v.compute_type))


def class_weight(b: ScalarBuilder, v: RowValues) -> SSAValue:
    """W's term: the weight of each class."""
    assert v.element is not None
    return v.element


KEPT_WEIGHT = ClassReduction(level2.REDUCTION_KEPT_WEIGHT, "target", kept_weight)
CLASS_WEIGHT = ClassReduction(level2.REDUCTION_CLASS_WEIGHT, "weight", class_weight)


def cross_entropy_reductions(checked: spec.CheckedCall) -> tuple[ClassReduction, ...]:
    """D for mean; W where label smoothing reads the weights' sum (C without weights)."""
    found = []
    if checked.divisor is spec.Divisor.KEPT_WEIGHT:
        found.append(KEPT_WEIGHT)
    if checked.in_compute(spec.LABEL_SMOOTHING) > 0.0 and "weight" in checked.present:
        found.append(CLASS_WEIGHT)
    return tuple(found)


def cross_entropy_loss_grad() -> ClassFormula:
    """gl - exp(lp)*rowsum, PyTorch's steps with the row sum in closed form.

    Per kept row: the nll term a = w[t]*(-(g*(1-ls)/D)) (no (1-ls) factor where ls is 0,
    no /D but for mean), the smoothing scale s = -(g*(ls/C)/D); gl = [j == t]*a + s*w_j and
    rowsum = a + s*W (W the weights' sum, C without weights). Each intermediate PyTorch keeps
    in the result type is rounded to it; ignored rows have a = s = 0."""

    def body(b: ScalarBuilder, v: ClassBodyValues) -> SSAValue:
        assert v.log_prob is not None
        zero = b.constant(0.0, v.compute_type)
        test = classify_target(b, v.t, v.classes, v.ignore_index)
        hit = b.andi(test.valid, b.cmpi("eq", v.t, v.j))
        kept_weight = v.reduced.get(level2.REDUCTION_KEPT_WEIGHT)
        d = _round_to_result(b, v, kept_weight) if kept_weight is not None else None
        ls = v.label_smoothing
        nll = v.g
        if ls is not None:
            nll = _round_to_result(b, v, b.mulf(nll, b.subf(b.constant(1.0, v.compute_type), ls)))
        if d is not None:
            nll = _round_to_result(b, v, b.divf(nll, d))
        a = b.negf(nll)
        if v.weight_of is not None:
            a = _round_to_result(b, v, b.mulf(v.weight_of(b, test.valid, v.t), a))
        a = b.select(test.valid, a, zero)
        gl = b.select(hit, a, zero)
        rowsum = a
        if ls is not None:
            assert v.classes_float is not None
            m = _round_to_result(b, v, b.mulf(v.g, b.divf(ls, v.classes_float)))
            if d is not None:
                m = _round_to_result(b, v, b.divf(m, d))
            s = b.select(test.valid, b.negf(m), zero)
            smooth = _round_to_result(b, v, b.mulf(s, v.weight)) if v.weight is not None else s
            gl = _round_to_result(b, v, b.addf(gl, smooth))
            total = v.reduced.get(level2.REDUCTION_CLASS_WEIGHT, v.classes_float)
            rowsum = b.addf(a, b.mulf(s, total))
        return b.subf(gl, b.mulf(b.exp(v.log_prob), rowsum))

    return body


CLASS_FORMULAS: dict[str, ClassFormula] = {
    spec.NLL_LOSS_BACKWARD.name: nll_loss_backward(),
    spec.NLL_LOSS_2D_BACKWARD.name: nll_loss_backward(),
    spec.CROSS_ENTROPY_LOSS_GRAD.name: cross_entropy_loss_grad(),
}
"""Per classification operator: its formula (docs/level2.md, "Beyond elementwise")."""

CLASS_REDUCTIONS: dict[str, Callable[[spec.CheckedCall], tuple[ClassReduction, ...]]] = {
    spec.CROSS_ENTROPY_LOSS_GRAD.name: cross_entropy_reductions,
}
"""Per classification operator that sums over the batch or the classes: the reductions its
formula reads, for a call."""

CLASS_READS_SELF: frozenset[str] = frozenset({spec.CROSS_ENTROPY_LOSS_GRAD.name})
"""The classification formulas that read self (log_prob); NLL's never do."""


# --------------------------------------------------------------------------- one op


def _is_narrower(element: spec.FloatType, compute: spec.FloatType) -> bool:
    return element.bits < compute.bits


class OpLowering:
    """Builds the level-2 ops that replace one lossgrad op (before it, in order)."""

    def __init__(
        self,
        op: LossGradOp,
        formula: Formula,
        reads_self: bool = True,
        parameters: Mapping[str, SSAValue] | None = None,
    ) -> None:
        self.op = op
        self.formula = formula
        self.reads_self = reads_self
        self.parameters = dict(parameters or {})  # run-time parameters (function arguments)
        self.inputs = op.input_values()
        self.operands = tuple(self.inputs.values())
        self.checked = op.check()
        names = tuple(self.inputs)
        shapes = tuple(self.checked.shapes[n] for n in names)
        self.plan: LoweringPlan = plan_lowering(op.SPEC.name, names, shapes, self.checked.divisor)
        self.compute = self.checked.compute
        self.compute_type = MLIR_FLOAT_TYPES[self.compute.mlir]
        self.ops: list[Operation] = []
        self.outer = ScalarBuilder(self.ops)
        self._dims: dict[DimSource, SSAValue] = {}

    def dim(self, source: DimSource) -> SSAValue:
        found = self._dims.get(source)
        if found is None:
            position, index = source
            found = self._dims[source] = self.outer.dim(self.operands[position], index)
            found.name_hint = "dim"
        return found

    def scale(self, count: ScaleCount | None) -> SSAValue | None:
        """1/n in C (n itself for a Scaling.DIVISOR formula): a constant for static shapes,
        else from tensor.dim (index → i64 → C)."""
        if count is None:
            return None
        b = self.outer
        reciprocal = self.op.SPEC.scaling is not spec.Scaling.DIVISOR
        n: SSAValue | None = self.parameters.get(level2.PARAMETER_N)
        if n is None and count.is_static:
            c = self.compute.dtype.type
            with np.errstate(divide="ignore"):
                factor = c(count.static_factor)
                value = float(c(1) / factor if reciprocal else factor)
            return b.constant(value, self.compute_type)
        if n is None:
            for source in count.dynamic:
                size = self.dim(source)
                n = size if n is None else b.muli(n, size)
            assert n is not None
            if count.static_factor != 1:
                n = b.muli(n, b.index_constant(count.static_factor))
            n.name_hint = "numel" if count.static_factor != 1 or len(count.dynamic) > 1 else "dim"
        as_i64 = b.cast(arith.IndexCastOp, n, i64)
        as_float = b.cast(arith.UIToFPOp, as_i64, self.compute_type)
        if not reciprocal:
            as_i64.name_hint, as_float.name_hint = "n_i64", "n"
            return as_float
        one = b.constant(1.0, self.compute_type)
        as_i64.name_hint, as_float.name_hint, one.name_hint = "n_i64", "n", "one"
        return b.divf(one, as_float)

    def body(self, scale: SSAValue | None, output_type: Attribute) -> Block:
        """The elementwise body: extf the inputs it reads, the formula, then truncf or +=."""
        names = list(self.inputs)
        types = [self.checked.types[n] for n in names]
        block = Block(arg_types=[*(MLIR_FLOAT_TYPES[t.mlir] for t in types), output_type])
        ops: list[Operation] = []
        b = ScalarBuilder(ops)
        widened: dict[str, SSAValue | None] = {}
        for arg, name, element in zip(block.args, names, types, strict=False):
            if name == "self" and not self.reads_self:
                widened[name] = None
            elif _is_narrower(element, self.compute):
                widened[name] = b.cast(arith.ExtFOp, arg, self.compute_type)
            else:
                widened[name] = arg
        go, x, t = widened["grad_output"], widened["self"], widened["target"]
        assert go is not None and t is not None
        scaled_first = self.op.SPEC.scaling is spec.Scaling.GRAD_OUTPUT
        ge = b.mulf(go, scale) if scale is not None and scaled_first else go
        optional = {n: v for n, v in widened.items() if n in self.op.SPEC.optional_inputs}
        values = BodyValues(
            ge,
            x,
            t,
            self.compute,
            self.compute_type,
            self.float_parameters,
            go=go,
            scale=None if scaled_first else scale,
            optional={n: v for n, v in optional.items() if v is not None},
        )
        value = self.formula(b, values)
        if self.plan.accumulates:
            value = b.addf(block.args[3], value)
        elif _is_narrower(self.checked.result_type, self.compute):
            value = b.cast(arith.TruncFOp, value, output_type)
        ops.append(yield_op(value))
        block.add_ops(ops)
        return block

    def build(self) -> SSAValue:
        """Append the replacement ops to self.ops; return the value replacing the result."""
        plan = self.plan
        b = self.outer
        self.float_parameters = {
            name: self.in_compute_type(value)
            for name, value in self.parameters.items()
            if name != level2.PARAMETER_N
        }
        scale = self.scale(plan.scale)
        if scale is not None:
            scale.name_hint = "scale"
        sizes = [self.dim(s) for s in plan.output_dim_sources]
        result = self.checked.result_type
        narrow_result = _is_narrower(result, self.compute)
        result_type = MLIR_FLOAT_TYPES[result.mlir]
        output_element = self.compute_type if plan.accumulates else result_type
        output = b.empty(sizes, tensor_type(output_element, plan.output_shape))
        output.name_hint = "init"
        if plan.accumulates:
            zero = b.constant(0.0, self.compute_type)
            zero.name_hint = "zero"
            output = b.fill(zero, output)
            output.name_hint = "zeros"
        maps = [affine_map_attr(plan.loops, m) for m in (*plan.input_maps, plan.output_map)]
        value = b.generic(
            self.operands,
            output,
            self.body(scale, output_element),
            maps,
            iterator_types(plan.reduction_loops),
        )
        if plan.accumulates and narrow_result:
            value.name_hint = "sum"
            value = self.narrow(value, sizes, result_type)
        return value

    def in_compute_type(self, value: SSAValue) -> SSAValue:
        """An f64 run-time attribute rounded to C once, before the generic (as MLIR rounds a
        constant of type C)."""
        if self.compute_type == value.type:
            return value
        rounded = self.outer.cast(arith.TruncFOp, value, self.compute_type)
        rounded.name_hint = f"{value.name_hint}_c" if value.name_hint else None
        return rounded

    def narrow(self, accumulator: SSAValue, sizes: list[SSAValue], to: Attribute) -> SSAValue:
        """A second, all-parallel generic: truncf of the C accumulator to the result type."""
        rank = len(self.plan.output_shape)
        output = self.outer.empty(sizes, tensor_type(to, self.plan.output_shape))
        output.name_hint = "init"
        block = Block(arg_types=[self.compute_type, to])
        truncated = arith.TruncFOp.create(operands=[block.args[0]], result_types=[to])
        block.add_ops([truncated, yield_op(truncated.results[0])])
        identity = affine_map_attr(rank, tuple(range(rank)))
        return self.outer.generic(
            [accumulator], output, block, [identity, identity], iterator_types((False,) * rank)
        )


FormulaFor = Callable[[Mapping[str, Any]], tuple[Formula, bool]]
FORMULAS: dict[str, FormulaFor] = {
    spec.KL_DIV_BACKWARD.name: lambda a: (kl_div_backward(bool(a["log_target"])), False),
    spec.KL_DIV_TARGET_BACKWARD.name: lambda a: (
        kl_div_target_backward(bool(a["log_target"])),
        True,
    ),
    spec.SMOOTH_L1_LOSS_BACKWARD.name: lambda a: (smooth_l1_loss_backward(a["beta"]), True),
    spec.MSE_LOSS_BACKWARD.name: lambda a: (mse_loss_backward(), True),
    spec.HUBER_LOSS_BACKWARD.name: lambda a: (huber_loss_backward(a["delta"]), True),
    spec.SOFT_MARGIN_LOSS_BACKWARD.name: lambda a: (soft_margin_loss_backward(), True),
    spec.BINARY_CROSS_ENTROPY_BACKWARD.name: lambda a: (binary_cross_entropy_backward(), True),
    spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name: lambda a: (
        binary_cross_entropy_with_logits_backward(),
        True,
    ),
    spec.L1_LOSS_BACKWARD.name: lambda a: (l1_loss_backward(), True),
}
"""Per operator: its formula for the op's attributes, and whether the formula reads `self`."""


@dataclass
class LowerLossgradOp(RewritePattern):
    """One lossgrad op → level-2 ops; `parameters` holds the run-time parameters of ops in
    the runtime-parameter form (the function arguments that carry them)."""

    parameters: Mapping[Operation, Mapping[str, SSAValue]]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LossGradOp, rewriter: PatternRewriter) -> None:
        if op.SPEC.has_classes:
            reductions = CLASS_REDUCTIONS.get(op.SPEC.name)
            classes = ClassLowering(
                op,
                CLASS_FORMULAS[op.SPEC.name],
                bad_target,
                self.parameters.get(op),
                reductions(op.check()) if reductions is not None else (),
                reads_self=op.SPEC.name in CLASS_READS_SELF,
            )
            grad, status = classes.build()
            rewriter.replace(op, classes.ops, [grad])
            return_status(status, [r.name for r in classes.reductions])
            return
        formula, reads_self = FORMULAS[op.SPEC.name](op.onnx_attributes())
        lowering = OpLowering(op, formula, reads_self, self.parameters.get(op))
        value = lowering.build()
        rewriter.replace(op, lowering.ops, [value])


def return_status(status: SSAValue, reductions: Sequence[str] = ()) -> None:
    """The target check's count becomes the function's next result, named in
    `lossgrad.checks`, where the function returns the gradient itself (a signature
    function); elsewhere nothing reads it. The reductions before the gradient are named in
    `lossgrad.reductions` there."""
    generic = status.owner
    assert isinstance(generic, Operation)
    function = generic.parent_op()
    block = generic.parent_block()
    ret = block.last_op if block is not None else None
    if not isinstance(function, func.FuncOp) or not isinstance(ret, func.ReturnOp):
        return
    ret.operands = [*ret.operands, status]
    function.function_type = func.FunctionType.from_lists(
        function.function_type.inputs.data, [v.type for v in ret.operands]
    )
    checks = list(function.attributes.get(level2.CHECKS_ATTR, ArrayAttr([])).data)
    function.attributes[level2.CHECKS_ATTR] = ArrayAttr([*checks, StringAttr(TARGET_CHECK)])
    if reductions:
        function.attributes[level2.REDUCTIONS_ATTR] = ArrayAttr(StringAttr(r) for r in reductions)


TARGET_CHECK = messages.TARGET_RANGE.key
"""The check a classification function's extra result counts (messages.TARGET_RANGE)."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC makes large lowerings superlinear (xdsl.md §7): pause it meanwhile."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def mark_functions(module: ModuleOp) -> dict[func.FuncOp, LossGradOp]:
    """Give every function that holds exactly one lossgrad op the attributes that say which
    operator it computes (docs/level2.md, "Functions say what they are")."""
    marked: dict[func.FuncOp, LossGradOp] = {}
    for function in module.ops:
        if not isinstance(function, func.FuncOp) or not function.body.blocks:
            continue
        ops = [op for op in function.walk() if isinstance(op, LossGradOp)]
        if len(ops) == 1:
            checked = ops[0].check()
            function.attributes.update(
                level2.identity_attributes(
                    checked.op, checked.attrs, checked.divisor, checked.present
                )
            )
            marked[function] = ops[0]
    return marked


def runtime_parameter_names(op: LossGradOp) -> list[str]:
    """The run-time parameters of an op: n where its reduction scales by a count, each FLOAT
    attribute whose value the lowered body reads (SmoothL1's beta when beta > 0 in C), and
    each INT attribute that may take any value (ignore_index)."""
    checked = op.check()
    names = []
    computed = (spec.Divisor.TOTAL_WEIGHT, spec.Divisor.KEPT_WEIGHT)
    if checked.divisor is not None and checked.divisor not in computed:
        names.append(level2.PARAMETER_N)  # total_weight is an input, D a reduction
    for a in checked.op.attributes:
        if a.kind is spec.AttrKind.INT and a.choices is None:
            names.append(a.name)  # ignore_index: any int, so one body serves every value
        elif a.kind is spec.AttrKind.FLOAT and checked.in_compute(a) > (a.minimum or 0.0):
            # SmoothL1's beta only in its division form; a value that rounds to 0 is a constant
            names.append(a.name)
    return names


def add_parameters(function: func.FuncOp, op: LossGradOp) -> dict[str, SSAValue]:
    """Append the op's run-time parameters to a signature function's arguments."""
    block = function.body.block
    ret = block.last_op
    if (
        list(op.operands) != list(block.args)
        or not isinstance(ret, func.ReturnOp)
        or list(ret.operands) != [op.result]
    ):
        raise PassFailedException(
            f"lower-lossgrad{{runtime_parameters=true}}: @{function.sym_name.data} must take "
            "its lossgrad op's inputs (grad_output, self, target, ...) and return its result"
        )
    names = runtime_parameter_names(op)
    values: dict[str, SSAValue] = {}
    for name in names:
        arg = block.insert_arg(level2.parameter_type(name), len(block.args))
        arg.name_hint = name
        values[name] = arg
    function.function_type = func.FunctionType.from_lists(
        [a.type for a in block.args], function.function_type.outputs.data
    )
    function.attributes[level2.PARAMETERS_ATTR] = ArrayAttr(StringAttr(n) for n in names)
    return values


@dataclass(frozen=True)
class LowerLossgradPass(ModulePass):
    """Lower every lossgrad op to level-2 IR (docs/level2.md); no lossgrad op survives.

    Every function with exactly one lossgrad op is marked with `lossgrad.op_type` and
    `lossgrad.attributes`. Unused lossgrad ops are lowered too: the rewriter's dead-code
    elimination is off, so no op disappears unlowered.

    Option `runtime_parameters` (default false): every function must be a signature function
    (one lossgrad op on its arguments, returned); its run-time parameters (the divisor `n`
    of the scale, SmoothL1's `beta` when beta > 0) become trailing arguments, listed in
    `lossgrad.parameters`, so that one lowered body serves every value of them."""

    name = "lower-lossgrad"

    runtime_parameters: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with gc_paused():
            marked = mark_functions(op)
            parameters: dict[Operation, Mapping[str, SSAValue]] = {}
            if self.runtime_parameters:
                for function in op.ops:
                    if isinstance(function, func.FuncOp) and function not in marked:
                        raise PassFailedException(
                            "lower-lossgrad{runtime_parameters=true}: "
                            f"@{function.sym_name.data} must hold exactly one lossgrad op"
                        )
                parameters = {
                    lossgrad_op: add_parameters(function, lossgrad_op)
                    for function, lossgrad_op in marked.items()
                }
            PatternRewriteWalker(
                GreedyRewritePatternApplier([LowerLossgradOp(parameters)], dce_enabled=False),
                apply_recursively=False,
            ).rewrite_module(op)
