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
    space = _static(checked.iteration_shape)
    go, x, t = (
        np.broadcast_to(np.asarray(inputs[n]).astype(np.float64), space) for n in spec.INPUT_NAMES
    )
    s = reduction_scale(
        checked.reduction, _static(checked.shapes["self"]), _static(checked.broadcast_shape)
    )
    with np.errstate(all="ignore"):
        ge = np.abs(go) * (1.0 if np.isinf(s) else s)
        terms = _TERMS[checked.op.name](ge, x, t, checked.attrs)
        terms = np.broadcast_to(terms, space)
        result_shape = _static(checked.result_shape)
        if not checked.op.differentiates:
            return np.asarray(terms), 1
        summed = _sum_to(terms, result_shape)
    n_terms = max(1, terms.size // max(1, summed.size))
    return summed, n_terms


Terms = np.ndarray


def _kl_div_backward(ge: Terms, x: Terms, t: Terms, attrs: Mapping[str, Any]) -> Terms:
    return ge * (np.exp(t) if attrs["log_target"] else np.abs(t))


def _kl_div_target_backward(ge: Terms, x: Terms, t: Terms, attrs: Mapping[str, Any]) -> Terms:
    if attrs["log_target"]:
        return ge * np.exp(t) * (np.abs(t) + 1.0 + np.abs(x))
    return np.where(t == 0, 0.0, ge * (np.abs(np.log(t)) + 1.0 + np.abs(x)))


def _smooth_l1_loss_backward(ge: Terms, x: Terms, t: Terms, attrs: Mapping[str, Any]) -> Terms:
    beta = float(attrs["beta"])
    if beta == 0.0:
        return ge
    unclamped = np.abs(x - t) <= beta
    return np.where(unclamped, ge * (1.0 + (np.abs(x) + np.abs(t)) / beta), ge)


_TERMS = {
    spec.KL_DIV_BACKWARD.name: _kl_div_backward,
    spec.KL_DIV_TARGET_BACKWARD.name: _kl_div_target_backward,
    spec.SMOOTH_L1_LOSS_BACKWARD.name: _smooth_l1_loss_backward,
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
