"""The written forms of the three gradients that the pass recognises.

`S` is grad_output times the reduction scale as the graph computes it, `X` is self and `T`
is target. Each form says which operator it is and which attribute values it fixes; the pass
then works out grad_output and the reduction from `S` (scale.py) and checks types and shapes.

Forms written by PyTorch 2.13's exporter (decompositions of aten's backward ops) and by this
project's inline mode are both here; the commuted and mirrored variants come from the
matcher. A `report_only` form is a known gradient that the pass must not fuse: it is
recognised so that the report can say why it was left."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lossgrad_compiler.fusion.patterns import (
    OPTIONAL_FLOAT_CAST,
    OPTIONAL_SUM_BACK,
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

S, X, T = Var("S"), Var("X"), Var("T")  # a form without S has S = 1
BETA = Const("beta")  # the threshold; the divisor is bound apart so a mismatch is reported
DIVISOR = Const("divisor")
D = P.Sub(X, T)


@dataclass(frozen=True)
class Form:
    op_type: str
    written_by: str
    pattern: Pattern
    attributes: Callable[[Binding], dict[str, Any] | str]  # or why the binding is refused
    report_only: str = ""  # the reason a match is left alone
    when: Callable[[Binding], bool] = lambda _binding: True  # a cheap precondition


def _cast(pattern: Pattern) -> Pattern:
    return Op(OPTIONAL_FLOAT_CAST, (pattern,))


def _widened(pattern: Pattern) -> Pattern:
    return Op(OPTIONAL_WIDENING_CAST, (pattern,))


def _sum_back(pattern: Pattern) -> Pattern:
    return Op(OPTIONAL_SUM_BACK, (pattern,))


def _fixed(**attrs: Any) -> Callable[[Binding], dict[str, Any] | str]:
    return lambda _binding: dict(attrs)


def _beta(binding: Binding) -> dict[str, Any] | str:
    """beta from the threshold; the divisor and the lower clamp bound must agree with it."""
    numbers = binding.numbers
    beta = numbers["beta"]
    if VARIES in numbers.values():
        return "the threshold is not one number (beta would differ per element)"
    assert isinstance(beta, float)
    if not beta > 0:
        return f"the threshold {beta!r} is not a beta > 0"
    if "divisor" in numbers and numbers["divisor"] != beta:
        return f"the threshold {beta!r} and the divisor {numbers['divisor']!r} differ"
    if "neg_beta" in numbers and numbers["neg_beta"] != -beta:
        return f"the clamp bounds {numbers['neg_beta']!r} and {beta!r} are not -beta and beta"
    if "inv_beta" in numbers and numbers["inv_beta"] * beta != 1.0:  # type: ignore[operator]
        return f"the factor {numbers['inv_beta']!r} is not the reciprocal of {beta!r}"
    return {"beta": beta}


SMOOTH_L1 = "SmoothL1LossBackward"
KL = "KlDivBackward"
KL_TARGET = "KlDivTargetBackward"

FORMS: tuple[Form, ...] = (
    # SmoothL1LossBackward, beta > 0. PyTorch: where(|d| < beta, s*d/beta, s*sign(d)).
    Form(
        SMOOTH_L1,
        "pytorch",
        P.Where(P.Less(P.Abs(D), BETA), P.Div(P.Mul(S, D), DIVISOR), P.Mul(S, P.Sign(D))),
        _beta,
    ),
    Form(
        SMOOTH_L1,
        "pytorch",
        P.Where(P.Less(P.Abs(D), BETA), P.Mul(S, P.Div(D, DIVISOR)), P.Mul(S, P.Sign(D))),
        _beta,
    ),
    Form(
        SMOOTH_L1,
        "pytorch",
        P.Where(
            P.Less(P.Abs(D), BETA),
            P.Mul(P.Mul(S, D), Const("inv_beta")),
            P.Mul(S, P.Sign(D)),
        ),
        _beta,
    ),
    # beta = 1: the exporter drops the division by one.
    Form(
        SMOOTH_L1,
        "pytorch",
        P.Where(P.Less(P.Abs(D), Lit(1.0)), P.Mul(S, D), P.Mul(S, P.Sign(D))),
        _fixed(beta=1.0),
    ),
    # sum: no scale at all (S is 1).
    Form(
        SMOOTH_L1,
        "pytorch",
        P.Where(P.Less(P.Abs(D), BETA), P.Div(D, DIVISOR), P.Sign(D)),
        _beta,
    ),
    Form(
        SMOOTH_L1,
        "pytorch",
        P.Where(P.Less(P.Abs(D), Lit(1.0)), D, P.Sign(D)),
        _fixed(beta=1.0),
    ),
    # Inline mode: s * clamp(d / beta, -1, 1) as two selects.
    Form(
        SMOOTH_L1,
        "inline",
        P.Mul(
            S,
            P.Where(
                P.GreaterOrEqual(D, BETA),
                Lit(1.0),
                P.Where(P.LessOrEqual(D, Const("neg_beta")), Lit(-1.0), P.Div(D, DIVISOR)),
            ),
        ),
        _beta,
    ),
    # beta = 0 (pure L1). Inline: sgn with sgn(NaN) = 0; PyTorch: Sign.
    Form(
        SMOOTH_L1,
        "inline",
        P.Mul(
            S,
            P.Where(
                P.Greater(D, Lit(0.0)),
                Lit(1.0),
                P.Where(P.Less(D, Lit(0.0)), Lit(-1.0), Lit(0.0)),
            ),
        ),
        _fixed(beta=0.0),
    ),
    # The exporter's half-type L1 gradient casts around Sign: the sign of a half difference
    # is the sign of the exact one (gradual underflow), and ±1/0 are exact in every type.
    Form(SMOOTH_L1, "pytorch", P.Mul(S, _cast(P.Sign(_widened(D)))), _fixed(beta=0.0)),
    # KlDivBackward: -s * exp(t) and -s * t.
    Form(KL, "pytorch/inline", P.Neg(P.Mul(S, P.Exp(T))), _fixed(log_target=1)),
    Form(KL, "inline", P.Neg(P.Mul(S, T)), _fixed(log_target=0)),
    Form(KL, "pytorch", P.Mul(P.Neg(S), T), _fixed(log_target=0)),
    # With static shapes the exporter folds -grad_output*scale into one constant: one Mul.
    Form(
        KL,
        "pytorch",
        P.Mul(Const("folded"), T),
        _fixed(log_target=0),
        report_only="a KlDivBackward (log_target 0) that the exporter already folded to one "
        "Mul by a constant is one elementwise op; fusing would save nothing",
        when=lambda b: isinstance(b.numbers["folded"], float) and b.numbers["folded"] < 0,
    ),
    # KlDivTargetBackward, log_target = 1: s * exp(t) * (t + 1 - x).
    Form(
        KL_TARGET,
        "inline",
        P.Mul(S, P.Mul(P.Exp(T), P.Sub(P.Add(T, Lit(1.0)), X))),
        _fixed(log_target=1),
    ),
    Form(
        KL_TARGET,
        "pytorch",
        P.Add(P.Mul(P.Mul(S, P.Sub(T, X)), P.Exp(T)), P.Mul(S, P.Exp(T))),
        _fixed(log_target=1),
    ),
    # A target broadcast over the batch: exp(t) is constant along the summed axes, so the
    # exporter sums s*(t - x) and s*exp(t) first and multiplies by exp(t) after.
    Form(
        KL_TARGET,
        "pytorch",
        P.Add(P.Mul(_sum_back(P.Mul(S, P.Sub(T, X))), P.Exp(T)), _sum_back(P.Mul(S, P.Exp(T)))),
        _fixed(log_target=1),
    ),
    # KlDivTargetBackward, log_target = 0: s * (ln t + 1 - x), 0 where t == 0.
    Form(
        KL_TARGET,
        "inline",
        P.Where(P.Equal(T, Lit(0.0)), Lit(0.0), P.Mul(S, P.Sub(P.Add(P.Log(T), Lit(1.0)), X))),
        _fixed(log_target=0),
    ),
    Form(
        KL_TARGET,
        "pytorch",
        P.Add(P.Add(Var("masked_xlogy"), P.Div(P.Mul(S, T), T)), P.Mul(Var("neg_s"), X)),
        _fixed(log_target=0),
        report_only="PyTorch's decomposition gives NaN where target == 0 ((s*t)/t), "
        "KlDivTargetBackward gives 0 there (its definition): the results differ",
    ),
)
