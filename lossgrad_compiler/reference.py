"""numpy semantics of docs/operators.md: the oracle every backend and test is compared with.

The reference evaluates the level-2 body expressions of docs/level2.md in the same order
and in the same compute type C, so a backend that translates level-2 IR can be compared
with it tightly:

* inputs are widened to C (float32 for float16/bfloat16, else the promoted type);
* the reduction scale enters where the operator's `spec.Scaling` says: `ge = grad_output *
  scale` first, with `scale = C(1) / C(n)` only for mean and batchmean (none, sum and a 0-d
  self under batchmean multiply by nothing); or the formula multiplies by `C(1) / C(n)`, or
  divides by `C(n)`, where it says;
* branches are selects (`np.where`), never multiply-blends; beta is rounded to C first
  and "beta > 0" is judged after that rounding;
* a KL result smaller than B = broadcast(self, target) is summed in C, sequentially:
  `acc = +0; for idx in B (row-major): acc[proj(idx)] += v[idx]` (see `sum_to_shape`);
* the result is rounded to its element type once, at the end (`round_to`).

Every error comes from `spec.validate`. numpy floating-point warnings are silenced: inf and
NaN are values here, not accidents. torch is not imported (it is a test-only dependency).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from lossgrad_compiler import messages, spec

__all__ = ["evaluate", "evaluate_checked", "round_to", "scale_value", "sum_to_shape"]


@dataclass(frozen=True)
class Operands:
    """What a formula reads, in the compute type C, over the iteration space."""

    go: np.ndarray  # grad_output
    ge: np.ndarray  # grad_output times the scale (Scaling.GRAD_OUTPUT), else grad_output
    scale: np.floating | None  # 1/n (RECIPROCAL) or n (DIVISOR); None: nothing is scaled
    x: np.ndarray  # self
    t: np.ndarray  # target
    optional: Mapping[str, np.ndarray]  # the optional inputs that are present, by name


# The formula of one op: (operands, attrs, C) -> values over the iteration space, in C.
Body = Callable[[Operands, Mapping[str, Any], type], np.ndarray]


def evaluate(
    op_type: str,
    inputs: Mapping[str, np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """The result of one call, as docs/operators.md defines it; LossGradError for an invalid call.

    `inputs` is keyed by ONNX input name (grad_output, self, target, and the operator's
    optional inputs); a missing or None required input is a MissingInputError (161001), a
    missing or None optional input is absent. Missing attributes take the spec defaults."""
    arrays = _as_arrays(inputs)
    checked = spec.validate(op_type, _infos(arrays), attrs or {})
    return _evaluate(checked, arrays)


def evaluate_checked(
    checked: spec.CheckedCall, inputs: Mapping[str, np.ndarray | None]
) -> np.ndarray:
    """`evaluate` for a call another layer has already validated (for example per signature,
    with symbolic shapes): the concrete arrays are validated again when `checked` does not
    describe exactly their types and shapes."""
    arrays = _as_arrays(inputs)
    if not _describes(checked, arrays):
        checked = spec.validate(checked.op.name, _infos(arrays), checked.attrs)
    return _evaluate(checked, arrays)


def scale_value(checked: spec.CheckedCall) -> np.floating | None:
    """The reduction scale of a call with static shapes, as level2.md computes it:
    `C(1) / C(n)` in the compute type C, or None where the body multiplies by nothing
    (none, sum, 0-d self under batchmean, and a divisor of 1, where multiplying by 1 would
    change no bit)."""
    c = checked.compute.numpy
    divisor = spec.divisor_count(
        checked.divisor, _concrete(checked.shapes["self"]), _concrete(checked.broadcast_shape)
    )
    if divisor is None or divisor == 1:
        return None
    with np.errstate(all="ignore"):
        return c(1) / c(divisor)


def sum_to_shape(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `values` (shape B) over the axes that `shape` broadcasts, in a fixed order.

    The reduced axes of B are its leading axes beyond len(shape) and the axes where
    `shape` has a 1 and B does not. Each result element is the sequential sum, starting
    from +0.0, of its B elements in row-major order of B: exactly what the loop nest
    `acc = 0; for idx in B (row-major): acc[proj(idx)] += values[idx]` gives, in
    `values.dtype`. (np.add.reduce would sum pairwise, which rounds differently.) When no
    axis is reduced the values are returned as they are, so -0.0 stays -0.0; a reduced
    result is never -0.0 because the sum starts at +0.0. An empty reduced axis gives zeros.
    """
    lead = values.ndim - len(shape)
    reduced = list(range(lead)) + [
        lead + j for j, d in enumerate(shape) if d == 1 and values.shape[lead + j] != 1
    ]
    if not reduced:
        return values
    kept = [a for a in range(values.ndim) if a not in reduced]
    rows = math.prod(values.shape[a] for a in reduced)
    cols = math.prod(values.shape[a] for a in kept)
    if rows == 0:
        return np.zeros(shape, values.dtype)
    table = np.transpose(values, reduced + kept).reshape(rows, cols)
    # add.accumulate is the documented sequential loop (r[i] = r[i-1] + a[i]); it starts at
    # a[0] rather than at +0.0, which only differs when every term is -0.0: adding +0.0 at
    # the end gives exactly the sum started from +0.0.
    with np.errstate(all="ignore"):
        total = np.add.accumulate(table, axis=0)[-1] + values.dtype.type(0)
    return total.reshape(shape)


def round_to(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round to `dtype` once, to nearest even (what arith.truncf does).

    numpy rounds float64 -> float16 and float32 -> float16/bfloat16 directly, but ml_dtypes
    converts float64 -> bfloat16 through float32 (two roundings: 1 + 2**-8 + 2**-30 becomes
    1.0 instead of 1 + 2**-7). That case first rounds to float32 *to odd*, which makes the
    second rounding give the correctly rounded result."""
    dtype = np.dtype(dtype)
    if values.dtype == dtype:
        return values
    with np.errstate(all="ignore"):
        if values.dtype == np.float64 and dtype == np.dtype(ml_dtypes.bfloat16):
            values = _float32_round_to_odd(values)
        return values.astype(dtype)


def _float32_round_to_odd(values: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd: an inexact result takes whichever neighbour of the
    exact value has an odd last bit (so no information about the lost bits is lost)."""
    near = np.asarray(values.astype(np.float32))
    inexact = (near.astype(np.float64) != values) & ~np.isnan(values)
    even = (near.view(np.uint32) & 1) == 0
    toward = np.where(values > near, np.float32(np.inf), np.float32(-np.inf))
    return np.where(inexact & even, np.nextafter(near, toward), near)


# --------------------------------------------------------------------------- the bodies


def _kl_div_backward(v: Operands, attrs: Mapping[str, Any], c: type) -> np.ndarray:
    """negf(mulf(ge, t)), or negf(mulf(ge, exp(t))) with log_target; self is never read."""
    target_term = np.exp(v.t) if attrs["log_target"] else v.t
    return -(v.ge * target_term)


def _kl_div_target_backward(v: Operands, attrs: Mapping[str, Any], c: type) -> np.ndarray:
    """(ge*(t-x))*exp(t) + ge*exp(t) with log_target (PyTorch's order); else
    ge*((ln t + 1)-x), selected to 0 at t == 0."""
    ge, x, t = v.ge, v.x, v.t
    if attrs["log_target"]:
        e = np.exp(t)
        return (ge * (t - x)) * e + ge * e
    v = ge * ((np.log(t) + c(1)) - x)
    return np.where(t == c(0), c(0), v)


def _smooth_l1_loss_backward(v: Operands, attrs: Mapping[str, Any], c: type) -> np.ndarray:
    """ge*clamp((x-t)/beta, -1, 1) for beta > 0 (after rounding beta to C), the clamp decided
    by comparing x-t with +-beta (so |d| == beta == inf gives +-1); else ge*sgn(x-t)."""
    ge, x, t = v.ge, v.x, v.t
    one, zero = c(1), c(0)
    beta = c(attrs["beta"])
    d = x - t
    if beta > zero:
        q = d / beta
        return ge * np.where(d >= beta, one, np.where(d <= -beta, -one, q))
    return ge * np.where(d > zero, one, np.where(d < zero, -one, zero))


def _mse_loss_backward(v: Operands, attrs: Mapping[str, Any], c: type) -> np.ndarray:
    """mulf(mulf(x-t, 2/n), grad_output), 2/n computed as (1/n)*2 (exact); 2 without a
    scale (PyTorch's `norm * (input - target) * grad_output`)."""
    factor = c(2) if v.scale is None else v.scale * c(2)
    return ((v.x - v.t) * factor) * v.go


def _huber_loss_backward(v: Operands, attrs: Mapping[str, Any], c: type) -> np.ndarray:
    """select(d < -delta, (g*-s)*delta, select(d > delta, (g*s)*delta, (d*s)*g)) with
    d = x - t and delta rounded to C; without a scale (-g)*delta, g*delta and d*g."""
    delta = c(attrs["delta"])
    d = v.x - v.t
    go, s = v.go, v.scale
    if s is None:
        below, above, inside = (-go) * delta, go * delta, d * go
    else:
        below, above, inside = (go * (-s)) * delta, (go * s) * delta, (d * s) * go
    return np.where(d < -delta, below, np.where(d > delta, above, inside))


def sigmoid(z: np.ndarray, c: type) -> np.ndarray:
    """1/(1+exp(-z)) for z > 0, else exp(z)/(1+exp(z)) (onnx's reference Sigmoid): one exp
    of -|z|, no overflow; NaN stays NaN."""
    positive = z > c(0)
    e = np.exp(np.where(positive, -z, z))
    return np.where(positive, c(1), e) / (c(1) + e)


def _soft_margin_loss_backward(v: Operands, attrs: Mapping[str, Any], c: type) -> np.ndarray:
    """-t*sigmoid(-t*x)*norm*g without cancelling: PyTorch's kernel, ((t*e)*(-norm))/(1+e)*g
    with e = exp(-t*x), where t*x >= 0; where t*x < 0, ((t*1)*(-norm))/(1+e)*g with
    e = exp(t*x), the same value without exp(-t*x), which overflows; -norm is -1 or -(1/n)."""
    tx = v.t * v.x
    below = tx < c(0)
    e = np.exp(np.where(below, tx, -tx))
    numerator = v.t * np.where(below, c(1), e)
    scaled = -numerator if v.scale is None else numerator * -v.scale
    return (scaled / (c(1) + e)) * v.go


def _binary_cross_entropy_backward(v: Operands, attrs: Mapping[str, Any], c: type) -> np.ndarray:
    """divf(mulf(g, x-t), clamp(x*(1-x), min=BCE_EPSILON)), times weight, divided by n for mean;
    the clamp keeps NaN (torch.clamp)."""
    eps = c(spec.BCE_EPSILON)
    product = v.x * (c(1) - v.x)
    value = (v.go * (v.x - v.t)) / np.where(product < eps, eps, product)
    if "weight" in v.optional:
        value = value * v.optional["weight"]
    return value if v.scale is None else value / v.scale


def _binary_cross_entropy_with_logits_backward(
    v: Operands, attrs: Mapping[str, Any], c: type
) -> np.ndarray:
    """mulf(sigmoid(x) - t, g), or with pos_weight p: mulf(((p*t + 1) - t)*sigmoid(x) - p*t,
    g); times weight, divided by n for mean."""
    sig = sigmoid(v.x, c)
    p = v.optional.get("pos_weight")
    if p is None:
        value = (sig - v.t) * v.go
    else:
        pt = p * v.t
        value = (((pt + c(1)) - v.t) * sig - pt) * v.go
    if "weight" in v.optional:
        value = value * v.optional["weight"]
    return value if v.scale is None else value / v.scale


def _l1_loss_backward(v: Operands, attrs: Mapping[str, Any], c: type) -> np.ndarray:
    """mulf(g/n, sgn(x-t)), g where nothing is scaled; sgn(d) = (0 < d) - (d < 0), 0 for
    a zero or NaN difference (PyTorch's)."""
    g = v.go if v.scale is None else v.go / v.scale
    d = v.x - v.t
    return g * (np.where(d > c(0), c(1), c(0)) - np.where(d < c(0), c(1), c(0)))


BODIES: dict[str, Body] = {
    spec.KL_DIV_BACKWARD.name: _kl_div_backward,
    spec.KL_DIV_TARGET_BACKWARD.name: _kl_div_target_backward,
    spec.SMOOTH_L1_LOSS_BACKWARD.name: _smooth_l1_loss_backward,
    spec.MSE_LOSS_BACKWARD.name: _mse_loss_backward,
    spec.HUBER_LOSS_BACKWARD.name: _huber_loss_backward,
    spec.SOFT_MARGIN_LOSS_BACKWARD.name: _soft_margin_loss_backward,
    spec.BINARY_CROSS_ENTROPY_BACKWARD.name: _binary_cross_entropy_backward,
    spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name: (
        _binary_cross_entropy_with_logits_backward
    ),
    spec.L1_LOSS_BACKWARD.name: _l1_loss_backward,
}


# --------------------------------------------------------------------------- classes


@dataclass(frozen=True)
class ClassOperands:
    """A classification call's operands with self's class dimension moved last: `t` the
    targets as int64 over the rows (self without its class dimension), `g` grad_output over
    the rows, in C; `kept` the rows whose target is not ignore_index, `valid` the kept rows
    whose target is a class, `safe` the target where valid, else 0 (what a gather reads)."""

    g: np.ndarray
    t: np.ndarray
    classes: int
    kept: np.ndarray
    valid: np.ndarray
    safe: np.ndarray
    total_weight: np.floating | None  # in C, where the reduction divides by it
    weight: np.ndarray | None  # [C] in C; None: every class weighs 1
    log_prob: np.ndarray | None = None  # self in C, classes last (CrossEntropyLossGrad)


ClassBody = Callable[[ClassOperands, spec.CheckedCall], np.ndarray]


def check_targets(checked: spec.CheckedCall, target: np.ndarray, classes: int) -> None:
    """aclnn 161002 for a target outside [0, C) that is not ignore_index (the level-2
    target check, docs/level2.md)."""
    t = np.asarray(target).astype(np.int64)
    ignore = int(checked.attrs["ignore_index"])
    bad = int(np.count_nonzero((t != ignore) & ((t < 0) | (t >= classes))))
    if bad:
        raise messages.TARGET_RANGE(
            checked.op.name, count=bad, classes=classes, ignore_index=ignore
        )


def _nll_loss_backward(v: ClassOperands, checked: spec.CheckedCall) -> np.ndarray:
    """w[t]*(-(g/TW)) at class t of each valid row, w[t]*(-g) without the division; the
    quotient rounded to the result type first (PyTorch's kernel computes in the result
    type), then the product by w in C, rounded once."""
    c = checked.compute.numpy
    if v.classes == 0:
        return np.zeros((*v.t.shape, 0), c)  # no class to write (and no weight to read)
    q = v.g / v.total_weight if v.total_weight is not None else v.g
    q = -round_to(q, checked.result_type.dtype).astype(c)
    value = q if v.weight is None else v.weight[v.safe] * q
    hit = v.valid[..., None] & (np.arange(v.classes) == v.safe[..., None])
    return np.where(hit, value[..., None], c(0))


def sequential_sum(values: np.ndarray, c: type) -> np.floating:
    """The sum in C, added in order from 0: level 2's reductions (`addf %acc, %v`)."""
    return c(np.cumsum(values, dtype=c)[-1]) if values.size else c(0)


def _cross_entropy_loss_grad(v: ClassOperands, checked: spec.CheckedCall) -> np.ndarray:
    """gl - exp(lp)*rowsum: PyTorch's steps (the nll and smoothing terms, each intermediate
    it keeps in the result type rounded to it), with the row sum in closed form:
    rowsum = a + s*W for the nll term a at the target and the smoothing scale s."""
    c = checked.compute.numpy
    result = checked.result_type.dtype

    def rounded(x: np.ndarray) -> np.ndarray:
        return round_to(x, result).astype(c) if checked.result_type.is_half else x

    assert v.log_prob is not None
    zero = c(0)
    wt = v.weight[v.safe] if v.weight is not None else np.ones(v.safe.shape, c)
    wt = np.where(v.valid, wt, zero)
    d = None
    if checked.divisor is spec.Divisor.KEPT_WEIGHT:
        d = rounded(np.asarray(sequential_sum(wt.reshape(-1), c)))
    ls = c(checked.attrs["label_smoothing"])
    nll = v.g
    if ls > 0:
        nll = rounded(nll * (c(1) - ls))
    if d is not None:
        nll = rounded(nll / d)
    a = -nll
    if v.weight is not None:
        a = rounded(wt * a)
    a = np.where(v.valid, a, zero)
    hit = v.valid[..., None] & (np.arange(v.classes) == v.safe[..., None])
    gl = np.where(hit, a[..., None], zero)
    rowsum = a
    if ls > 0:
        m = rounded(v.g * (ls / c(v.classes)))
        if d is not None:
            m = rounded(m / d)
        s = np.where(v.valid, -m, zero)
        smooth = rounded(s[..., None] * v.weight) if v.weight is not None else s[..., None]
        gl = rounded(gl + smooth)
        total = sequential_sum(v.weight, c) if v.weight is not None else c(v.classes)
        rowsum = a + s * total
    return gl - np.exp(v.log_prob) * rowsum[..., None]


CLASS_BODIES: dict[str, ClassBody] = {
    spec.NLL_LOSS_BACKWARD.name: _nll_loss_backward,
    spec.NLL_LOSS_2D_BACKWARD.name: _nll_loss_backward,
    spec.CROSS_ENTROPY_LOSS_GRAD.name: _cross_entropy_loss_grad,
}


def _evaluate_classes(checked: spec.CheckedCall, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """A classification operator: the class dimension moved last, the body, moved back."""
    c = checked.compute.numpy
    x = arrays["self"]
    axis = checked.class_dim
    classes = x.shape[axis]
    rows = x.shape[:axis] + x.shape[axis + 1 :]
    t = np.asarray(arrays["target"]).astype(np.int64).reshape(rows)
    check_targets(checked, t, classes)
    kept = t != int(checked.attrs["ignore_index"])
    valid = kept & (t >= 0) & (t < classes)
    per_element = checked.reduction is spec.Reduction.NONE and x.ndim >= 2
    g = np.asarray(arrays["grad_output"]).astype(c)
    g = np.broadcast_to(g.reshape(rows if per_element else ()), rows)
    total = None
    if checked.divisor is spec.Divisor.TOTAL_WEIGHT:
        total = c(np.asarray(arrays["total_weight"]).reshape(()))
    weight = arrays.get("weight")
    operands = ClassOperands(
        g, t, classes, kept, valid, np.where(valid, t, 0), total,
        None if weight is None else np.asarray(weight).astype(c),
        np.moveaxis(np.asarray(x).astype(c), axis, -1),
    )  # fmt: skip
    with np.errstate(all="ignore"):
        values = CLASS_BODIES[checked.op.name](operands, checked)
    values = np.moveaxis(values, -1, axis)
    return np.asarray(round_to(values, checked.result_type.dtype), order="C")


# --------------------------------------------------------------------------- plumbing


def _evaluate(checked: spec.CheckedCall, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """The body over the iteration space in C, summed to the result's shape, rounded once."""
    if checked.op.has_classes:
        return _evaluate_classes(checked, arrays)
    c = checked.compute.numpy
    space = _concrete(checked.iteration_shape)
    wide = {name: np.broadcast_to(arrays[name].astype(c), space) for name in checked.present}
    go = wide["grad_output"]
    scaling = checked.op.scaling
    with np.errstate(all="ignore"):
        if scaling is spec.Scaling.GRAD_OUTPUT:
            scale = scale_value(checked)
            ge = go if scale is None else go * scale
        else:
            scale = _formula_scale(checked)
            ge = go
        optional = {n: wide[n] for n in checked.op.optional_inputs if n in wide}
        operands = Operands(go, ge, scale, wide["self"], wide["target"], optional)
        # The inputs span the whole space, so the values do too; 0-d results come back
        # from numpy as scalars, hence asarray.
        values = np.asarray(BODIES[checked.op.name](operands, checked.attrs, c), dtype=c)
    if checked.op.sums_result:
        values = sum_to_shape(values, _concrete(checked.result_shape))
    return np.asarray(round_to(values, checked.result_type.dtype), order="C")


def _formula_scale(checked: spec.CheckedCall) -> np.floating | None:
    """The scale a RECIPROCAL or DIVISOR formula reads: C(1) / C(n) or C(n) (None where the
    reduction scales nothing)."""
    c = checked.compute.numpy
    n = spec.divisor_count(
        checked.divisor, _concrete(checked.shapes["self"]), _concrete(checked.broadcast_shape)
    )
    if n is None:
        return None
    with np.errstate(all="ignore"):
        return c(1) / c(n) if checked.op.scaling is spec.Scaling.RECIPROCAL else c(n)


def _as_arrays(inputs: Mapping[str, np.ndarray | None]) -> dict[str, Any]:
    """Inputs as arrays (no copies); None stays None so validation reports it as missing."""
    return {name: (None if value is None else np.asarray(value)) for name, value in inputs.items()}


def _infos(arrays: Mapping[str, np.ndarray | None]) -> dict[str, spec.TensorInfo | None]:
    return {
        name: (None if a is None else spec.TensorInfo(a.dtype, tuple(a.shape)))
        for name, a in arrays.items()
    }


def _describes(checked: spec.CheckedCall, arrays: Mapping[str, np.ndarray | None]) -> bool:
    """True when `checked` was validated for exactly these inputs' types and shapes."""
    given = {n for n, a in arrays.items() if a is not None}
    if given != set(checked.present) or set(arrays) - set(checked.op.input_names):
        return False
    for name in checked.present:
        a = arrays[name]
        expected = checked.types.get(name) or checked.index_types.get(name)
        if a is None or (spec.float_type(a.dtype) or spec.index_type(a.dtype)) != expected:
            return False
        if checked.shapes[name] != tuple(a.shape):
            return False
    return True


def _concrete(shape: spec.Shape | None) -> tuple[int, ...]:
    """A static shape; a CheckedCall with symbolic or unknown shapes cannot be evaluated."""
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise ValueError(f"reference: needs static shapes, got {shape}")
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]
