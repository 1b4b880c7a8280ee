"""The written forms of the three gradients that the pass recognises.

`S` is grad_output times the reduction scale as the graph computes it, `X` is self and `T`
is target. Each form says which operator it is and which attribute values it fixes; the pass
then works out grad_output and the reduction from `S` (scale.py) and checks types and shapes.

Forms written by PyTorch 2.13's exporter (decompositions of aten's backward ops) and by this
project's inline mode are both here; the commuted and mirrored variants come from the
matcher. A `report_only` form is a known gradient that the pass must not fuse: it is
recognised so that the report can say why it was left.

Each form also says whether it rounds as the operator's kernel does (passes/lower_lossgrad.py:
ge = grad_output * scale, then -(ge * exp(t)), -(ge * t), (ge * (t - x)) * exp(t) + ge * exp(t),
select(t == 0, 0, ge * ((ln t + 1) - x)), ge * select(d >= beta, 1, select(d <= -beta, -1,
d / beta)), ge * sgn(d)). A form that groups the operations otherwise has an `order`, and the
pass fuses it only with reassociate=True, unless `same_rounding` proves the grouping gives
the operator's results for the attribute values at hand."""

from __future__ import annotations

import math
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
    order: str = ""  # how the form groups its operations, where the operator's kernel differs
    # (attributes, whether s is the constant 1) -> the grouping still gives the kernel's results
    same_rounding: Callable[[dict[str, Any], bool], bool] = lambda _attrs, _s_is_one: False
    # the loss family's forms (factors.py): where the reduction scale enters, apart from S
    scaling: str = ""  # "": S is grad_output times the scale (scale.py); else factors.py's
    numerator: float = 1.0  # k of a RECIPROCAL factor k/n
    factor_is_grad_output: bool = False  # a RECIPROCAL factor that is no k/n is grad_output
    # (attributes, binding) -> every float type computes the form alike (s * sign(d)), so
    # the node's compute type need not be the graph's
    any_type: Callable[[dict[str, Any], Binding], bool] = lambda _attrs, _binding: False


def beta_zero(attrs: dict[str, Any], _binding: Binding) -> bool:
    """SmoothL1 with beta 0 is s * sign(d): the sign of a rounded difference is the exact
    one's (gradual underflow), and s times -1, 0 or 1 is exact in every float type."""
    return attrs.get("beta") == 0.0


def float_cast(pattern: Pattern) -> Pattern:
    return Op(OPTIONAL_FLOAT_CAST, (pattern,))


def widening_cast(pattern: Pattern) -> Pattern:
    return Op(OPTIONAL_WIDENING_CAST, (pattern,))


def _sum_back(pattern: Pattern) -> Pattern:
    return Op(OPTIONAL_SUM_BACK, (pattern,))


def _fixed(**attrs: Any) -> Callable[[Binding], dict[str, Any] | str]:
    return lambda _binding: dict(attrs)


def _beta(binding: Binding, zero: str = "") -> dict[str, Any] | str:
    """beta from the threshold; the divisor and the lower clamp bound must agree with it.
    A threshold of 0 is beta 0 only where `zero` says why (else the reason it is not)."""
    numbers = binding.numbers
    beta = numbers["beta"]
    if VARIES in numbers.values():
        return "the threshold is not one number (beta would differ per element)"
    assert isinstance(beta, float)
    if beta == 0 and zero == "dead division":
        # |d| < 0 is never true: the division branch is never selected, whatever divides
        if "divisor" in numbers and numbers["divisor"] != 0:
            return f"the threshold 0.0 and the divisor {numbers['divisor']!r} differ"
        return {"beta": 0.0}
    if beta == 0 and zero:
        return zero
    if not beta > 0:
        return f"the threshold {beta!r} is not a beta > 0"
    if "divisor" in numbers and numbers["divisor"] != beta:
        return f"the threshold {beta!r} and the divisor {numbers['divisor']!r} differ"
    if "neg_beta" in numbers and numbers["neg_beta"] != -beta:
        return f"the clamp bounds {numbers['neg_beta']!r} and {beta!r} are not -beta and beta"
    if "inv_beta" in numbers and numbers["inv_beta"] * beta != 1.0:  # type: ignore[operator]
        return f"the factor {numbers['inv_beta']!r} is not the reciprocal of {beta!r}"
    return {"beta": beta}


def _beta_below(binding: Binding) -> dict[str, Any] | str:
    """|d| < beta spelling: a threshold of 0 never selects the division (aten's
    smooth_l1_loss_backward with beta 0)."""
    return _beta(binding, zero="dead division")


def _beta_at_or_above(binding: Binding) -> dict[str, Any] | str:
    """beta <= |d| spelling: a NaN d takes the division branch (NaN), so a threshold of 0
    is not the operator's beta 0, whose sgn(NaN) is 0."""
    return _beta(
        binding,
        zero="with the threshold 0 written as 0 <= |d|, a NaN difference takes the division "
        "branch and gives NaN; SmoothL1LossBackward with beta 0 gives sgn(NaN) = 0",
    )


def _power_of_two(value: float) -> bool:
    mantissa, _ = math.frexp(value)
    return value > 0 and mantissa == 0.5


def _scaled_after(attrs: dict[str, Any], s_is_one: bool) -> bool:
    """(s*d)/beta and (s*d)*(1/beta) against the kernel's s*(d/beta): the same when s is 1
    (then beta must be a power of two for the reciprocal, as below), when beta is 0 (the
    division is never selected), and when beta = 2^-k, k >= 0: d/beta is then exact (|d| <
    beta where it is selected, so no overflow), and so is (s*d)/beta except where s*d is
    subnormal (docs/fusion.md bounds that by the smallest subnormal over beta); 1/beta is
    2^k, so the reciprocal form is the division's."""
    beta = float(attrs["beta"])
    return s_is_one or beta == 0 or (_power_of_two(beta) and beta <= 1)


def _reciprocal_exact(attrs: dict[str, Any], s_is_one: bool) -> bool:
    """d*(1/beta) is d/beta, both rounded once from the same real number, when 1/beta is
    exact: beta a power of two."""
    beta = float(attrs["beta"])
    return _power_of_two(beta) and (s_is_one or beta <= 1)


def _smooth_l1_exporter(
    inside: Pattern,
    outside: Pattern,
    threshold: Pattern,
    attributes: Callable[[Binding], dict[str, Any] | str] | None,
    order: str = "",
    same_rounding: Callable[[dict[str, Any], bool], bool] = lambda _a, _s: False,
) -> tuple[Form, Form]:
    """PyTorch's where(|d| < beta, inside, outside), and where(beta <= |d|, outside, inside):
    the same select except where d is NaN, which the first sends to the outside (s*sign(d),
    NaN: ONNX leaves Sign(NaN) open) and the second to the inside (NaN)."""
    below = P.Where(P.Less(P.Abs(D), threshold), inside, outside)
    at_or_above = P.Where(P.LessOrEqual(threshold, P.Abs(D)), outside, inside)
    fixed = attributes is None
    return (
        Form(
            SMOOTH_L1,
            "pytorch",
            below,
            _fixed(beta=1.0) if fixed else _beta_below,
            order=order,
            same_rounding=same_rounding,
            any_type=beta_zero,
        ),
        Form(
            SMOOTH_L1,
            "pytorch",
            at_or_above,
            _fixed(beta=1.0) if fixed else _beta_at_or_above,
            order=order,
            same_rounding=same_rounding,
            any_type=beta_zero,
        ),
    )


SMOOTH_L1 = "SmoothL1LossBackward"
KL = "KlDivBackward"
KL_TARGET = "KlDivTargetBackward"

FORMS: tuple[Form, ...] = (
    # SmoothL1LossBackward, beta > 0. PyTorch: where(|d| < beta, s*d/beta, s*sign(d)).
    *_smooth_l1_exporter(
        P.Div(P.Mul(S, D), DIVISOR),
        P.Mul(S, P.Sign(D)),
        BETA,
        _beta,
        order="(s*d)/beta, where the operator computes s*(d/beta)",
        same_rounding=_scaled_after,
    ),
    *_smooth_l1_exporter(P.Mul(S, P.Div(D, DIVISOR)), P.Mul(S, P.Sign(D)), BETA, _beta),
    *_smooth_l1_exporter(
        P.Mul(P.Mul(S, D), Const("inv_beta")),
        P.Mul(S, P.Sign(D)),
        BETA,
        _beta,
        order="(s*d)*(1/beta), where the operator computes s*(d/beta)",
        same_rounding=_reciprocal_exact,
    ),
    # beta = 1: the exporter drops the division by one.
    *_smooth_l1_exporter(P.Mul(S, D), P.Mul(S, P.Sign(D)), Lit(1.0), None),
    # sum: no scale at all (S is 1).
    *_smooth_l1_exporter(P.Div(D, DIVISOR), P.Sign(D), BETA, _beta),
    *_smooth_l1_exporter(
        P.Mul(D, Const("inv_beta")),
        P.Sign(D),
        BETA,
        _beta,
        order="d*(1/beta), where the operator computes d/beta",
        same_rounding=lambda attrs, _s: _reciprocal_exact(attrs, True),
    ),
    *_smooth_l1_exporter(D, P.Sign(D), Lit(1.0), None),
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
        any_type=beta_zero,
    ),
    # PyTorch's g*sign(x - t) is L1LossBackward's (family_forms.py), whichever loss wrote it.
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
    # KlDivTargetBackward, log_target = 1: (s*(t - x))*exp(t) + s*exp(t), autograd's two
    # terms in PyTorch's order, which the exporter and this project's inline mode both write.
    Form(
        KL_TARGET,
        "pytorch/inline",
        P.Add(P.Mul(P.Mul(S, P.Sub(T, X)), P.Exp(T)), P.Mul(S, P.Exp(T))),
        _fixed(log_target=1),
    ),
    # The same gradient grouped otherwise, written by hand (and by this project's inline mode
    # before issue 44): refused unless reassociate=True.
    Form(
        KL_TARGET,
        "hand-written",
        P.Mul(S, P.Mul(P.Exp(T), P.Sub(P.Add(T, Lit(1.0)), X))),
        _fixed(log_target=1),
        order="s*(exp(t)*((t + 1) - x)), where the operator computes (s*(t - x))*exp(t) + s*exp(t)",
    ),
    # A target broadcast over the batch: exp(t) is constant along the summed axes, so the
    # exporter sums s*(t - x) and s*exp(t) first and multiplies by exp(t) after.
    Form(
        KL_TARGET,
        "pytorch",
        P.Add(P.Mul(_sum_back(P.Mul(S, P.Sub(T, X))), P.Exp(T)), _sum_back(P.Mul(S, P.Exp(T)))),
        _fixed(log_target=1),
        order="sum(s*(t - x))*exp(t) + sum(s*exp(t)), where the operator computes "
        "sum((s*(t - x))*exp(t) + s*exp(t))",
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
