"""The size of the terms each result element is made of: the scale of its rounding error.

Two correct implementations can differ by a few roundings of the *intermediate* values,
not of the result: `(ln t + 1) - x` or `(t + 1) - x` may cancel to far below the sizes of
t, 1 and x, and a sum over broadcast dimensions may cancel to far below its terms. So the
tolerance of an element is proportional to the sum of the absolute values of every
additive term that went into it, in float64:

* KlDivBackward:        |ge|*|t|                       |ge|*e^t                 (log_target)
* KlDivTargetBackward:  |ge|*(|ln t| + 1 + |x|)        |ge|*e^t*(|t| + 1 + |x|) (log_target)
  (0 where log_target is 0 and t == 0: the result is selected to exactly 0 there)
* SmoothL1LossBackward: |ge|*(1 + (|x| + |t|)/beta) where |x - t| <= beta, else |ge|
  (the quotient (x - t)/beta inherits the cancellation of x - t); |ge| for beta 0.
* MseLossBackward:      2|ge|*(|x| + |t|)
* L1LossBackward:       |ge| (g/n times an exact sign)
* HuberLossBackward:    |ge|*max(delta, |x| + |t|)
* SoftMarginLossBackward: |ge|*|t|*(2 + |t*x|)  (a bound: the exp of a rounded product is off
  by up to |tx| of its rounding; the operator's -t*sigmoid(-tx) does not cancel, and
  tests/operators/test_large_argument_gradients.py holds it to ulps of each value)
* BinaryCrossEntropyBackward: |ge|*|w|*(|x| + |t|)*(2 + |x|)/max(|x*(1-x)|, 1e-12)
* BinaryCrossEntropyWithLogitsBackward: |ge|*|w|*(sig*(1 + |x|) + |t|), or with pos_weight p
  |ge|*|w|*((|p*t| + 1 + |t|)*sig*(1 + |x|) + |p*t|), sig = sigmoid(x)

* NLLLossBackward, NLLLoss2dBackward: |w[t]*g/TW| at the target (one product)
* CrossEntropyLossGrad: |a|*[j = t] + |s|*|w_j| + p_ij*(|a| + |s|*W) with a the nll term
  (1-ls)*w[t]*g' and s the smoothing scale (ls/C)*g', g' = g/D for mean, W = sum |w_j|; the
  row sum adds C terms where ls > 0 and D adds N where a weighted mean divides by it

with |ge| = |grad_output| * s, summed (in absolute value) over the broadcast dimensions
the result is summed over. This is an error model for tests, not a second implementation:
it never decides a value, only how far two values may be apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lossgrad_compiler import spec
from tests.helpers.divisors import reduction_scale


def term_magnitude(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> tuple[np.ndarray, int]:
    """(magnitude with the result's shape, number of B elements summed per result element)."""
    infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}
    checked = spec.validate(op_type, infos, attrs)
    if checked.op.has_classes:
        return _class_magnitude(checked, inputs)
    space = _static(checked.iteration_shape)
    v = {
        n: np.broadcast_to(np.asarray(inputs[n]).astype(np.float64), space) for n in checked.present
    }
    s = reduction_scale(
        checked.reduction, _static(checked.shapes["self"]), _static(checked.broadcast_shape)
    )
    with np.errstate(all="ignore"):
        v["ge"] = np.abs(v["grad_output"]) * (1.0 if np.isinf(s) else s)
        terms = _TERMS[checked.op.name](v, checked.attrs)
        terms = np.broadcast_to(terms, space)
        result_shape = _static(checked.result_shape)
        if not checked.op.sums_result:
            return np.asarray(terms), 1
        summed = _sum_to(terms, result_shape)
    n_terms = max(1, terms.size // max(1, summed.size))
    return summed, n_terms


Terms = np.ndarray
Values = dict[str, np.ndarray]  # the inputs given, in float64 over the space, and ge


def _kl_div_backward(v: Values, attrs: Mapping[str, Any]) -> Terms:
    return v["ge"] * (np.exp(v["target"]) if attrs["log_target"] else np.abs(v["target"]))


def _kl_div_target_backward(v: Values, attrs: Mapping[str, Any]) -> Terms:
    ge, x, t = v["ge"], v["self"], v["target"]
    if attrs["log_target"]:
        return ge * np.exp(t) * (np.abs(t) + 1.0 + np.abs(x))
    return np.where(t == 0, 0.0, ge * (np.abs(np.log(t)) + 1.0 + np.abs(x)))


def _smooth_l1_loss_backward(v: Values, attrs: Mapping[str, Any]) -> Terms:
    ge, x, t = v["ge"], v["self"], v["target"]
    beta = float(attrs["beta"])
    if beta == 0.0:
        return ge
    unclamped = np.abs(x - t) <= beta
    return np.where(unclamped, ge * (1.0 + (np.abs(x) + np.abs(t)) / beta), ge)


def _mse_loss_backward(v: Values, attrs: Mapping[str, Any]) -> Terms:
    return 2.0 * v["ge"] * (np.abs(v["self"]) + np.abs(v["target"]))


def _huber_loss_backward(v: Values, attrs: Mapping[str, Any]) -> Terms:
    inside = np.abs(v["self"]) + np.abs(v["target"])
    return v["ge"] * np.maximum(float(attrs["delta"]), inside)


def _soft_margin_loss_backward(v: Values, attrs: Mapping[str, Any]) -> Terms:
    t = np.abs(v["target"])
    return v["ge"] * t * (2.0 + t * np.abs(v["self"]))


def _weight(v: Values) -> Terms:
    return np.abs(v["weight"]) if "weight" in v else 1.0


def _binary_cross_entropy_backward(v: Values, attrs: Mapping[str, Any]) -> Terms:
    x, t = v["self"], v["target"]
    den = np.maximum(np.abs(x * (1.0 - x)), 1e-12)
    return v["ge"] * _weight(v) * (np.abs(x) + np.abs(t)) * (2.0 + np.abs(x)) / den


def _binary_cross_entropy_with_logits_backward(v: Values, attrs: Mapping[str, Any]) -> Terms:
    x, t = v["self"], np.abs(v["target"])
    # sigmoid's rounding error grows with |x|; at x = +-inf sigmoid is exactly 1 or 0
    sig = 1.0 / (1.0 + np.exp(-x)) * (1.0 + np.where(np.isinf(x), 0.0, np.abs(x)))
    if "pos_weight" in v:
        pt = np.abs(v["pos_weight"]) * t
        return v["ge"] * _weight(v) * ((pt + 1.0 + t) * sig + pt)
    return v["ge"] * _weight(v) * (sig + t)


def _l1_loss_backward(v: Values, attrs: Mapping[str, Any]) -> Terms:
    return v["ge"]


_TERMS = {
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


def _sum_to(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum over the axes numpy broadcasting added or stretched (order does not matter here)."""
    lead = values.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + j for j, d in enumerate(shape) if d == 1 and values.shape[lead + j] != 1
    )
    return np.sum(values, axis=axes).reshape(shape) if axes else np.asarray(values)


def _static(shape: spec.Shape | None) -> tuple[int, ...]:
    assert shape is not None
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


def _class_magnitude(
    checked: spec.CheckedCall, inputs: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, int]:
    """The classification operators' terms (classes on axis 1, or 0 for [C])."""
    x = np.asarray(inputs["self"]).astype(np.float64)
    axis = checked.class_dim
    xs = np.moveaxis(x, axis, -1)
    classes = xs.shape[-1]
    rows = xs.shape[:-1]
    t = np.asarray(inputs["target"]).astype(np.int64).reshape(rows)
    kept = (t != int(checked.attrs["ignore_index"])) & (t >= 0) & (t < classes)
    safe = np.where(kept, t, 0)
    weight = inputs.get("weight")
    w = np.abs(np.asarray(weight).astype(np.float64)) if weight is not None else np.ones(classes)
    g = np.abs(np.asarray(inputs["grad_output"]).astype(np.float64))
    per_row = checked.reduction is spec.Reduction.NONE and x.ndim >= 2
    g = np.broadcast_to(g.reshape(rows if per_row else ()), rows)
    wt = np.where(kept, w[safe] if classes else 0.0, 0.0)
    with np.errstate(all="ignore"):
        if checked.divisor is spec.Divisor.TOTAL_WEIGHT:
            g = g / np.abs(float(np.asarray(inputs["total_weight"]).reshape(())))
        elif checked.divisor is spec.Divisor.KEPT_WEIGHT:
            g = g / np.sum(wt)
        g = np.where(np.isfinite(g), g, 0.0)
        hit = kept[..., None] & (np.arange(classes) == safe[..., None])
        ls = float(checked.attrs.get("label_smoothing", 0.0))
        a = (1.0 - ls) * wt * g
        terms = np.where(hit, a[..., None], 0.0)
        n_terms = 1
        if checked.op.name == spec.CROSS_ENTROPY_LOSS_GRAD.name:
            s = np.where(kept, ls / max(classes, 1) * g, 0.0)
            p = np.exp(np.where(np.isfinite(xs), xs, 0.0))
            rowsum = a + s * np.sum(w)
            terms = terms + s[..., None] * w + p * rowsum[..., None]
            n_terms += (classes - 1) if ls > 0 else 0
            weighted_mean = weight is not None and checked.divisor is not None
            n_terms += max(int(np.prod(rows)) - 1, 0) if weighted_mean else 0
    return np.moveaxis(terms, -1, axis), max(n_terms, 1)
