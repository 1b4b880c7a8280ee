"""The written forms of the loss family's gradients (MseLossBackward onwards), as PyTorch
2.13's exporter writes them for a training step over `F.mse_loss`, `F.huber_loss`,
`F.soft_margin_loss`, `F.binary_cross_entropy` and `F.binary_cross_entropy_with_logits`.

Their kernels (passes/lower_lossgrad.py) keep PyTorch's own order of operations, so each
form here is the kernel's formula as the exporter writes it: with grad_output dropped where
it is the constant 1 (a product by 1 is exact), folded into constants for static shapes,
and with the reduction scale where the decomposition has it: a factor k/n (`F`,
Scaling.RECIPROCAL) or a division by n at the end (`N`, Scaling.DIVISOR), proved by
factors.py."""

from __future__ import annotations

from typing import Any

from lossgrad_compiler.fusion.factors import RECIPROCAL
from lossgrad_compiler.fusion.forms import FORMS, D, Form, S, _fixed
from lossgrad_compiler.fusion.patterns import Op, P, Pattern, Var

F = Var("F")  # a factor k/n, or k where nothing is scaled
N = Var("N")  # a divisor n

MSE = "MseLossBackward"


def _family(op_type: str, patterns: list[Pattern], **fields: Any) -> tuple[Form, ...]:
    attributes = fields.pop("attributes", _fixed())
    return tuple(Form(op_type, "pytorch", p, attributes, **fields) for p in patterns)


def _mse_patterns() -> list[Pattern]:
    """((x - t)*F)*g, PyTorch's `norm * (input - target) * grad_output`; g dropped where
    it is 1."""
    scaled: Op = P.Mul(D, F)
    return [P.Mul(scaled, S), scaled]


FAMILY_FORMS: tuple[Form, ...] = (
    *_family(MSE, _mse_patterns(), scaling=RECIPROCAL, numerator=2.0),
)

ALL_FORMS: tuple[Form, ...] = (*FORMS, *FAMILY_FORMS)
