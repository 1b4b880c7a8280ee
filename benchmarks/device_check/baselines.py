"""The two baselines each kernel is timed against, in PyTorch on the same device: autograd's
backward of the same loss (same shapes, dtypes and reduction; the loss is built once and
its graph kept, so a turn is the backward alone), and a device-to-device copy that reads and
writes as many bytes as the kernel's tensors hold."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchmarks.class_inputs import IGNORED
from tests.helpers.torch_oracle import ELEMENTWISE_LOSSES

Loss = Callable[[torch.Tensor, torch.Tensor, str, Mapping[str, Any]], torch.Tensor]


def _kl_div(x: torch.Tensor, t: torch.Tensor, r: str, a: Mapping[str, Any]) -> torch.Tensor:
    return F.kl_div(x, t, reduction=r, log_target=bool(a["log_target"]))


LOSSES: dict[str, tuple[Loss, str]] = {
    "KlDivBackward": (_kl_div, "self"),
    "KlDivTargetBackward": (_kl_div, "target"),
    "SmoothL1LossBackward": (
        lambda x, t, r, a: F.smooth_l1_loss(x, t, reduction=r, beta=a["beta"]),
        "self",
    ),
    **{op: (loss, "self") for op, loss in ELEMENTWISE_LOSSES.items()},
    "BinaryCrossEntropyBackward": (
        lambda x, t, r, a: F.binary_cross_entropy(x, t, reduction=r),
        "self",
    ),
    "BinaryCrossEntropyWithLogitsBackward": (
        lambda x, t, r, a: F.binary_cross_entropy_with_logits(x, t, reduction=r),
        "self",
    ),
}
"""Each operator's PyTorch loss and the input its gradient is taken with respect to."""

ClassLoss = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor | None, str, Mapping[str, Any]], torch.Tensor
]


def _cross_entropy(
    x: torch.Tensor, t: torch.Tensor, w: torch.Tensor | None, r: str, a: Mapping[str, Any]
) -> torch.Tensor:
    """Of log-probabilities as logits: log_softmax of a log_softmax is itself."""
    ignore_index, smoothing = a.get("ignore_index", IGNORED), a.get("label_smoothing", 0.0)
    return F.cross_entropy(
        x, t, weight=w, ignore_index=ignore_index, reduction=r, label_smoothing=smoothing
    )


CLASS_LOSSES: dict[str, ClassLoss] = {
    "CrossEntropyLossGrad": _cross_entropy,
    "NLLLossBackward": lambda x, t, w, r, a: F.nll_loss(
        x, t, weight=w, ignore_index=a.get("ignore_index", IGNORED), reduction=r
    ),
}
"""The classification operators' losses, of self (class indices in target, an optional
weight)."""


def to_torch(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """The array on `device` (bfloat16 through its bits: torch takes no ml_dtypes array)."""
    a = np.require(array, requirements="C")  # ascontiguousarray makes 0-d 1-d
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).to(device)
    return torch.from_numpy(a.copy()).to(device)


def backward_runner(
    op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any], device: torch.device
) -> Callable[[], object]:
    """One call of autograd's backward of the op's loss; raises where PyTorch has no kernel
    for the type on this device."""
    go, x, t = (to_torch(inputs[n], device) for n in ("grad_output", "self", "target"))
    if op in CLASS_LOSSES:
        weight = to_torch(inputs["weight"], device) if "weight" in inputs else None
        wrt = x.requires_grad_(True)
        loss = CLASS_LOSSES[op](x, t, weight, attrs["reduction"], attrs)
    else:
        loss_of, wrt_name = LOSSES[op]
        wrt = (x if wrt_name == "self" else t).requires_grad_(True)
        with warnings.catch_warnings():  # torch warns that kl_div's 'mean' will change meaning
            warnings.simplefilter("ignore")
            loss = loss_of(x, t, attrs["reduction"], attrs)
    go = go.reshape(loss.shape)

    def run() -> object:
        return torch.autograd.grad(loss, [wrt], grad_outputs=go, retain_graph=True)

    run()
    return run


def copy_runner(nbytes: int, device: torch.device) -> Callable[[], object]:
    """A copy of nbytes/2 bytes: it reads and writes nbytes in all."""
    half = max(1, nbytes // 2)
    src = torch.ones(half, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def synchronizer(device: torch.device) -> Callable[[], None]:
    """What makes a turn's end the end of its work on the device."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None
