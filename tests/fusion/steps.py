"""Training steps over PyTorch's losses, as a user writes them: the gradient of a loss with
respect to the prediction (or, for KL, the target) through torch.autograd.grad."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F


def _loss(loss: str, x: torch.Tensor, t: torch.Tensor, reduction: str, attrs: Any) -> Any:
    if loss == "kl_div":
        return F.kl_div(x, t, reduction=reduction, log_target=bool(attrs["log_target"]))
    if loss == "smooth_l1":
        return F.smooth_l1_loss(x, t, reduction=reduction, beta=attrs["beta"])
    if loss == "mse":
        return F.mse_loss(x, t, reduction=reduction)
    if loss == "l1":
        return F.l1_loss(x, t, reduction=reduction)
    if loss == "huber":
        return F.huber_loss(x, t, reduction=reduction, delta=attrs["delta"])
    if loss == "soft_margin":
        return F.soft_margin_loss(x, t, reduction=reduction)
    if loss == "bce":
        return F.binary_cross_entropy(x, t, reduction=reduction)
    if loss == "bce_logits":
        return F.binary_cross_entropy_with_logits(x, t, reduction=reduction)
    raise ValueError(f"no step for {loss}")


def loss_gradient_step(loss: str, wrt: str, reduction: str, **attrs: Any) -> Callable[..., Any]:
    """step(x, t) -> d loss(x, t) / d x (or d t); `none` seeds the gradient with ones."""

    def step(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        x = x.detach().requires_grad_(wrt == "input")
        t = t.detach().requires_grad_(wrt == "target")
        value = _loss(loss, x, t, reduction, attrs)
        seed = torch.ones_like(value) if reduction == "none" else None
        return torch.autograd.grad(value, x if wrt == "input" else t, seed)[0]

    return step


def two_losses_step(
    logits: torch.Tensor, teacher: torch.Tensor, boxes: torch.Tensor, anchors: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """A distillation loss and a box loss summed with weights, differentiated together."""
    logits = logits.detach().requires_grad_(True)
    boxes = boxes.detach().requires_grad_(True)
    total = F.kl_div(logits, teacher, reduction="batchmean", log_target=True)
    total = total + 0.5 * F.smooth_l1_loss(boxes, anchors, beta=0.5)
    grads = torch.autograd.grad(total, (logits, boxes))
    return grads[0], grads[1]


def weighted_step(loss: str, reduction: str) -> Callable[..., Any]:
    """step(x, t, w) -> d loss(x, t; weight w) / d x."""

    def step(x: torch.Tensor, t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x = x.detach().requires_grad_(True)
        if loss == "bce_weight":
            value = F.binary_cross_entropy(x, t, weight=w, reduction=reduction)
        else:  # bce_logits_weight: w as weight and, plus 0.5, as pos_weight
            value = F.binary_cross_entropy_with_logits(
                x, t, weight=w, pos_weight=w + 0.5, reduction=reduction
            )
        seed = torch.ones_like(value) if reduction == "none" else None
        return torch.autograd.grad(value, x, seed)[0]

    return step
