"""grad_output and the reduction of the loss family's forms (MseLossBackward onwards), whose
reduction scale is not folded into grad_output first.

Their kernels (passes/lower_lossgrad.py) bring in 1/n where PyTorch's decomposition does
(spec.Scaling.RECIPROCAL: a factor k/n, k = 2 for MseLossBackward and 1 for
HuberLossBackward) or divide by n at the end (spec.Scaling.DIVISOR). The form binds that
factor (`F`) or divisor (`N`) apart from grad_output (`S`), and this module proves which
reduction it is: a reduction is named only where the graph's value is the one the kernel
computes (the constant k*(1/n) rounded as the kernel rounds it, k/n divided in the compute
type from an integer count, or n converted once from one), with n proved equal to the
element count of broadcast(self, target). Anything else is not the operator's arithmetic
and the subgraph is left, with the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lossgrad_compiler import spec
from lossgrad_compiler.fusion.graph import Dim, uniform
from lossgrad_compiler.fusion.patterns import Binding
from lossgrad_compiler.fusion.scale import Monomial, Scale, ScaleFinder, one_over

if TYPE_CHECKING:
    from lossgrad_compiler.fusion.forms import Form

RECIPROCAL = "reciprocal"  # the form multiplies by a factor F = k/n (k without a reduction)
DIVISOR = "divisor"  # the form divides by N = n at the end (nothing without a reduction)


def family_scale(
    finder: ScaleFinder,
    form: Form,
    binding: Binding,
    shapes: tuple[tuple[Dim, ...], tuple[Dim, ...]],
    compute: spec.FloatType,
) -> Scale | str:
    """The node's grad_output and reduction for a family form's binding, or why the graph
    does not compute what any of the operator's reductions computes."""
    s_value = binding.values.get("S")
    go: str | float = s_value if s_value is not None else 1.0
    unscaled = Scale(go, "none" if s_value is not None else "sum")
    mean = finder.divisors(form.op_type, *shapes).get("mean")
    if form.scaling == DIVISOR:
        n_value = binding.values.get("N")
        if n_value is None:
            return unscaled
        count = finder.count(n_value, compute)
        if count is not None and count == mean:
            return Scale(go, "mean")
        return (
            f"the divisor '{n_value}' is not the element count of broadcast(self, target) "
            f"converted once to {compute.name}"
        )
    f_value = binding.values.get("F")
    reason = _folded_branches(binding, f_value, finder, compute)
    if reason:
        return reason
    if f_value is None:
        return unscaled
    k = form.numerator
    number = uniform(finder.index.constant(f_value))
    if number is not None:
        if mean is not None and mean[1] == () and number == _k_over_n(k, mean[0], compute):
            return Scale(go, "mean")
        if number == k and s_value is None:
            return Scale(1.0, "sum")
        if number == k:
            return unscaled
    elif _computed_k_over_n(finder, f_value, k, mean, compute):
        return Scale(go, "mean")
    if form.factor_is_grad_output and s_value is None:
        return Scale(f_value, "none")  # d*F: F is grad_output (the kernel's d*g)
    shown = repr(number) if number is not None else f"'{f_value}'"
    return (
        f"the factor {shown} is neither {k:g} nor {k:g}/n rounded as the operator computes it "
        f"(n the element count of broadcast(self, target), in {compute.name})"
    )


def _k_over_n(k: float, n: int, compute: spec.FloatType) -> float:
    """k/n as the kernel computes it: (1/n)*k, both rounded in the compute type."""
    c = compute.dtype.type
    with np.errstate(all="ignore"):
        return float(c(one_over(n, compute)) * c(k))


def _computed_k_over_n(
    finder: ScaleFinder,
    value: str,
    k: float,
    mean: Monomial | None,
    compute: spec.FloatType,
) -> bool:
    """`value` is Div(k, n) computed in the compute type from an integer count n equal to
    the mean's divisor (k/n rounded once is (1/n)*k for k = 1 and 2: a power of two)."""
    node = finder.index.producer.get(finder.matcher.through_identity(value))
    if node is None or node.op_type != "Div" or not finder.computes_in(node, compute):
        return False
    if uniform(finder.index.constant(finder.matcher.leaf(node.input[0]))) != k:
        return False
    return mean is not None and finder.count(node.input[1], compute) == mean


def _folded_branches(
    binding: Binding, f_value: str | None, finder: ScaleFinder, compute: spec.FloatType
) -> str:
    """HuberLossBackward with static shapes: the exporter folds the clamped branches
    (g*s)*delta and (g*(-s))*delta into constants. They must be what the kernel computes
    from the factor F (s, or g with s = 1; 1 where the linear branch is d alone): F*delta
    and (-F)*delta rounded in C."""
    numbers = binding.numbers
    if "above" not in numbers:
        return ""
    factor = uniform(finder.index.constant(f_value)) if f_value is not None else 1.0
    if factor is None:
        return "the clamped branches are constants but the factor of the linear one is not"
    c = compute.dtype.type
    delta = c(numbers["delta"])
    with np.errstate(all="ignore"):
        above, below = float(c(factor) * delta), float(-c(factor) * delta)
    if numbers["above"] != above or numbers["below"] != below:
        return (
            f"the clamped branches {numbers['below']!r} and {numbers['above']!r} are not "
            f"-/+ {factor!r} * delta ({below!r} and {above!r})"
        )
    return ""


def is_candidate(finder: ScaleFinder, binding: Binding) -> bool:
    """A family form's match is a candidate (worth a report line) only where its factor or
    divisor is a constant or a quotient: a product of any difference and any value is not
    a loss gradient."""
    for key, op_type in (("F", "Div"), ("N", "Cast")):
        value = binding.values.get(key)
        if value is None or finder.index.constant(value) is not None:
            continue
        node = finder.index.producer.get(finder.matcher.through_identity(value))
        if node is None or node.op_type != op_type:
            return False
    return True
