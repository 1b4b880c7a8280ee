"""The demo's PyTorch training step: knowledge distillation plus a box loss, the two
losses' gradients taken together, as a user writes it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

INPUT_NAMES = ("student_logp", "teacher_logp", "box_pred", "box_anchor")
DYNAMIC_SHAPES = {name: {0: "batch"} for name in INPUT_NAMES}


def distillation_step(
    student_logp: torch.Tensor,
    teacher_logp: torch.Tensor,
    box_pred: torch.Tensor,
    box_anchor: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """d(KL(teacher || student) + 0.5 * smooth_l1(box_pred, box_anchor)) / d(student, boxes)."""
    student_logp = student_logp.detach().requires_grad_(True)
    box_pred = box_pred.detach().requires_grad_(True)
    loss = F.kl_div(student_logp, teacher_logp, reduction="batchmean", log_target=True)
    loss = loss + 0.5 * F.smooth_l1_loss(box_pred, box_anchor, beta=0.5)
    grads = torch.autograd.grad(loss, (student_logp, box_pred))
    return grads[0], grads[1]


def distillation_inputs(batch: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.log_softmax(torch.randn(batch, 10, generator=gen), -1),
        torch.log_softmax(torch.randn(batch, 10, generator=gen), -1),
        torch.randn(batch, 4, generator=gen),
        torch.randn(batch, 4, generator=gen),
    )
