"""The written forms of the loss family's gradients (MseLossBackward onwards), as PyTorch
2.13's exporter writes them for a training step over `F.mse_loss`, `F.huber_loss`,
`F.soft_margin_loss`, `F.binary_cross_entropy`, `F.binary_cross_entropy_with_logits` and
`F.l1_loss`.

Their kernels (passes/lower_lossgrad.py) keep PyTorch's own order of operations, so each
form here is the kernel's formula as the exporter writes it: with grad_output dropped where
it is the constant 1 (a product by 1 is exact), folded into constants for static shapes,
and with the reduction scale where the decomposition has it: a factor k/n (`F`,
Scaling.RECIPROCAL) or a division by n at the end (`N`, Scaling.DIVISOR), proved by
factors.py. The exception is SoftMarginLossBackward, whose decomposition cancels where its
kernel does not: that form is recognised and left, with the reason."""

from __future__ import annotations

from typing import Any

from lossgrad_compiler import spec
from lossgrad_compiler.fusion.factors import DIVISOR, RECIPROCAL
from lossgrad_compiler.fusion.forms import (
    FORMS,
    D,
    Form,
    S,
    T,
    X,
    _fixed,
    float_cast,
    widening_cast,
)
from lossgrad_compiler.fusion.patterns import (
    OPTIONAL_WIDENING_CAST,
    VARIES,
    Binding,
    Const,
    Lit,
    Op,
    P,
    Pattern,
    Var,
)

F = Var("F")  # a factor k/n, or k where nothing is scaled
N = Var("N")  # a divisor n

MSE = "MseLossBackward"
HUBER = "HuberLossBackward"
SOFT_MARGIN = "SoftMarginLossBackward"
BCE = "BinaryCrossEntropyBackward"
BCE_LOGITS = "BinaryCrossEntropyWithLogitsBackward"
L1 = "L1LossBackward"
W = Var("W")  # weight
PW = Var("PW")  # pos_weight
DELTA = Const("delta")


def _family(op_type: str, patterns: list[Pattern], **fields: Any) -> tuple[Form, ...]:
    attributes = fields.pop("attributes", _fixed())
    return tuple(Form(op_type, "pytorch", p, attributes, **fields) for p in patterns)


def _mse_patterns() -> list[Pattern]:
    """((x - t)*F)*g, PyTorch's `norm * (input - target) * grad_output`; g dropped where
    it is 1."""
    scaled: Op = P.Mul(D, F)
    return [P.Mul(scaled, S), scaled]


def _huber_forms() -> tuple[Form, ...]:
    """where(d < -delta, (g*(-s))*delta, where(d > delta, (g*s)*delta, (d*s)*g)), PyTorch's
    huber_loss_backward. With g or s the constant 1 the exporter writes F for the one left
    (F*(-1) for -F where g is a tensor of ones), drops a product by delta = 1, and for
    static shapes folds both clamped branches into constants (factors.py checks them)."""
    insides: list[Pattern] = [P.Mul(D, F), D]
    aboves: list[Pattern] = [P.Mul(F, DELTA), F, Const("above")]
    # -s computed before a widening Cast (float64 steps with a float32 scale) is exact too
    negated = [Op(OPTIONAL_WIDENING_CAST, (P.Neg(F),)), P.Mul(F, Lit(-1.0))]
    belows: list[Pattern] = [*(P.Mul(n, DELTA) for n in negated), *negated, Const("below")]
    found = []
    for inside in insides:
        for above in aboves:
            for below in belows:
                folded = isinstance(above, Const), isinstance(below, Const)
                if folded[0] != folded[1] or (inside == D and not folded[0]):
                    continue  # both clamped branches folded, or neither (with F)
                upper = P.Where(P.Greater(D, DELTA), above, inside)
                pattern = P.Where(P.Less(D, Const("neg_delta")), below, upper)
                # a clamped branch without its product by delta: delta is 1
                unit = not folded[0] and (above == F or below in negated)
                found.append(
                    Form(
                        HUBER,
                        "pytorch",
                        pattern,
                        _delta_one if unit else _delta,
                        scaling=RECIPROCAL,
                        numerator=1.0,
                        factor_is_grad_output=True,
                    )
                )
    return tuple(found)


def _delta(binding: Binding) -> dict[str, Any] | str:
    """delta from the upper threshold; the lower one must be -delta."""
    numbers = binding.numbers
    delta = numbers["delta"]
    if VARIES in numbers.values():
        return "a threshold or a folded branch is not one number (delta would differ per element)"
    assert isinstance(delta, float)
    if not 0 < delta < float("inf"):
        return f"the threshold {delta!r} is not a delta > 0"
    if numbers["neg_delta"] != -delta:
        return f"the thresholds {numbers['neg_delta']!r} and {delta!r} are not -delta and delta"
    return {"delta": delta}


def _delta_one(binding: Binding) -> dict[str, Any] | str:
    """A clamped branch written without its product by delta: the threshold must be 1."""
    found = _delta(binding)
    if isinstance(found, dict) and found["delta"] != 1.0:
        return f"a clamped branch is not multiplied by delta = {found['delta']!r}"
    return found


def _divided(patterns: list[Pattern]) -> list[Pattern]:
    """Each pattern divided by n at the end (mean), then as it is (none, sum)."""
    return [*(P.Div(p, N) for p in patterns), *patterns]


def _soft_margin_patterns() -> list[Pattern]:
    """(t*g)*(sigmoid(t*x) - 1), PyTorch's decomposition of soft_margin_loss_backward; g
    dropped where it is 1 (t*1 is t). Known, and left (SOFT_MARGIN_CANCELS)."""
    margin = P.Sub(P.Sigmoid(P.Mul(T, X)), Lit(1.0))
    return _divided([P.Mul(P.Mul(T, S), margin), P.Mul(T, margin)])


SOFT_MARGIN_CANCELS = (
    "the graph computes PyTorch's decomposition t*g*(sigmoid(t*x) - 1), which cancels (0 for "
    "t*x > 17 in float32, 9 % off near 16); SoftMarginLossBackward computes "
    "-t*sigmoid(-t*x)*g without cancelling: fusing would change the graph's results"
)


def _bce_patterns() -> list[Pattern]:
    """(g*(x - t))/clamp(x*(1 - x), min=eps), times weight, PyTorch's
    binary_cross_entropy_backward; g dropped where it is 1. The exporter writes the clamp as
    Clip(p, eps) for float32 and Max(p, eps) for float64: both keep a NaN product NaN, as
    the kernel's select(p < eps, eps, p) does."""
    product = P.Mul(X, P.Sub(Lit(1.0), X))
    found: list[Pattern] = []
    for clamped in (P.Clip(product, Const("eps")), P.Max(product, Const("eps"))):
        values = [P.Div(P.Mul(S, D), clamped), P.Div(D, clamped)]
        found += [*(P.Mul(v, W) for v in values), *values]
    return _divided(found)


def _bce_epsilon(binding: Binding) -> dict[str, Any] | str:
    """The clamp bound must be the operator's: 1e-12 rounded to float32 (PyTorch's kernel),
    in every compute type."""
    eps = binding.numbers["eps"]
    if eps != spec.BCE_EPSILON:
        return (
            f"the clamp bound {eps!r} is not the operator's {spec.BCE_EPSILON!r} (1e-12 rounded "
            "to float32, in every compute type)"
        )
    return {}


def _bce_logits_patterns() -> list[Pattern]:
    """(sigmoid(x) - t)*g, or with pos_weight p (((p*t + 1) - t)*sigmoid(x) - p*t)*g,
    times weight, PyTorch's binary_cross_entropy_with_logits backward (autograd's order);
    g dropped where it is 1."""
    pt = P.Mul(PW, T)
    values = [
        P.Sub(P.Sigmoid(X), T),
        P.Sub(P.Mul(P.Sub(P.Add(pt, Lit(1.0)), T), P.Sigmoid(X)), pt),
    ]
    scaled = [*(P.Mul(v, S) for v in values), *values]
    return _divided([*(P.Mul(v, W) for v in scaled), *scaled])


def _no_division(_attrs: dict[str, Any], binding: Binding) -> bool:
    """g*sgn(d) is exact in every float type (forms.beta_zero); (g/n)*sgn(d) rounds g/n in
    the graph's type, which the node must then compute in."""
    return "N" not in binding.values


def _l1_patterns(sign: Pattern) -> list[Pattern]:
    """(g/n)*sgn(x - t), autograd's MeanBackward then AbsBackward; g where nothing is
    scaled. A sign alone is not read as a gradient (it would name a reduction the graph may
    not have: the product by g/n can be left outside for its own reason)."""
    return [P.Mul(P.Div(S, N), sign), P.Mul(S, sign)]


L1_EXPORTED_SIGN = float_cast(P.Sign(widening_cast(D)))
"""How the exporter writes F.l1_loss's sign (and F.smooth_l1_loss's with beta 0, which is
l1_loss): the half types cast around Sign, exact since the sign of a half difference is
the sign of the exact one (gradual underflow) and 1, -1 and 0 are exact in every type.
ONNX leaves Sign(NaN) open (docs/fusion.md)."""
L1_INLINE_SIGN = P.Sub(
    P.Where(P.Greater(D, Lit(0.0)), Lit(1.0), Lit(0.0)),
    P.Where(P.Less(D, Lit(0.0)), Lit(1.0), Lit(0.0)),
)
"""This project's inline mode: sgn(d) = (d > 0) - (d < 0), 0 for NaN."""


# the longer forms first: the first reading that fuses wins, and a candidate's reason is
# its first reading's. SoftMarginLossBackward's decomposition (t*g)*(sigmoid(t*x) - 1) is
# known and left whole, with its reason: it also reads as a
# BinaryCrossEntropyWithLogitsBackward of sigmoid(z) - 1 with z = t*x and grad_output t*g,
# the graph's own arithmetic, but a node named for another loss that leaves the products
# around it saves little and would hide the reason; MseLossBackward's (x - t)*F also reads
# sigmoid(x) - t times a seed of ones.
FAMILY_FORMS: tuple[Form, ...] = (
    *_family(
        SOFT_MARGIN, _soft_margin_patterns(), scaling=DIVISOR, report_only=SOFT_MARGIN_CANCELS
    ),
    *_family(BCE_LOGITS, _bce_logits_patterns(), scaling=DIVISOR),
    *_family(BCE, _bce_patterns(), attributes=_bce_epsilon, scaling=DIVISOR),
    *_huber_forms(),
    *_family(MSE, _mse_patterns(), scaling=RECIPROCAL, numerator=2.0),
    *_family(L1, _l1_patterns(L1_EXPORTED_SIGN), scaling=DIVISOR, any_type=_no_division),
    *(
        Form(L1, "inline", p, _fixed(), scaling=DIVISOR, any_type=_no_division)
        for p in _l1_patterns(L1_INLINE_SIGN)
    ),
)

ALL_FORMS: tuple[Form, ...] = (*FORMS, *FAMILY_FORMS)
