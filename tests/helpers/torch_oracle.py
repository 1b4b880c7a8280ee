"""PyTorch 2.13 autograd as the independent oracle of docs/operators.md (torch is test-only).

Every function computes in the call's compute type C (the inputs are widened to C first,
as docs/operators.md prescribes: half types are computed in float32) and returns a numpy array in C;
`oracle` rounds that once to the result type. What docs/operators.md means by each op, in torch:

* KlDivBackward / KlDivTargetBackward: the gradient of `F.kl_div(self, target, reduction,
  log_target)` with respect to self / target. torch's API takes grad_output of the loss's
  shape (B for none, 0-d otherwise); the contract's grad_output may be any shape that broadcasts to
  B. For a reduced loss with a grad_output of more than one element the oracle weights the
  unreduced loss by grad_output and reduces it as F.kl_div does (mean: mean over B; sum;
  batchmean: sum / self.size(0), no division for 0-d self).
* SmoothL1LossBackward: the op-level contract, shape broadcast(grad_output, self, target).
  `smooth_l1_autograd` takes the per-element gradient of `F.smooth_l1_loss` with respect to
  self expanded to B (a leaf of B's shape, so mean divides by numel(B)) and multiplies it
  by grad_output, exactly as `aten.smooth_l1_loss_backward` broadcasts grad_output;
  when grad_output has the loss's shape it is passed to autograd directly.
  `smooth_l1_aten` calls that aten op; it differs from F.smooth_l1_loss for beta == 0
  (see DEVIATIONS).
* MseLossBackward, HuberLossBackward, SoftMarginLossBackward, L1LossBackward: as
  SmoothL1LossBackward, with F.mse_loss, F.huber_loss(delta), F.soft_margin_loss and
  F.l1_loss (`elementwise_autograd`).
* BinaryCrossEntropyBackward: the gradient of `F.binary_cross_entropy(self, target, weight)`
  with respect to self, target and weight expanded to self's shape; where self or target
  is not in [0, 1] (the forward refuses it) aten.binary_cross_entropy_backward, the
  backward autograd calls, which has no such check (`bce_autograd`).
* BinaryCrossEntropyWithLogitsBackward: the gradient of
  `F.binary_cross_entropy_with_logits(self, target, weight, pos_weight)` (`bce_autograd`).

DEVIATIONS lists where torch and docs/operators.md differ on purpose; `without_deviations` replaces
the input values that trigger them, so the random comparisons (`assert_matches_torch`)
test everything else.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from lossgrad_compiler import reference, spec

from .tolerances import assert_matches

DEVIATIONS: dict[str, str] = {
    "half_per_step": (
        "torch computes float16/bfloat16 per operation in the half type; the contract computes in "
        "float32 and rounds once (e.g. exp(12) overflows float16 inside torch)"
    ),
    "kl_target_zero": (
        "KlDivTargetBackward, log_target 0, t == 0: torch gives NaN (t/t in xlogy's "
        "gradient); the contract gives 0"
    ),
    "kl_target_inf": (
        "KlDivTargetBackward, log_target 0, t == +inf: torch gives NaN (inf/inf); the contract's "
        "ge*(ln t + 1 - x) gives +-inf"
    ),
    "kl_target_inf_grad_output": (
        "KlDivTargetBackward, log_target 0, grad_output +-inf: torch multiplies it into each "
        "term of the derivative (ge*ln t + ge*t/t - ge*x), so terms of opposite sign give "
        "inf - inf = NaN; the contract multiplies once: ge*(ln t + 1 - x) = +-inf (with "
        "log_target 1 both compute (ge*(t-x))*e^t + ge*e^t)"
    ),
    "kl_target_empty_b": (
        "KlDivTargetBackward with an empty B: torch evaluates xlogy(t, t) (or exp(t)) at "
        "target's own shape, so 0 * NaN gives NaN for NaN, negative, zero or infinite "
        "targets; the contract: a sum over an empty set is 0"
    ),
    "beta_rounds_to_zero": (
        "SmoothL1LossBackward, 0 < beta that rounds to 0 in the compute type (e.g. 1e-50 in "
        "float32): torch's F.smooth_l1_loss judges beta in double and keeps the smooth "
        "path (NaN for NaN d); level2.md judges beta > 0 after rounding and uses the sign "
        "form (sgn(NaN) = 0)"
    ),
    "aten_beta_zero": (
        "aten.smooth_l1_loss_backward with beta 0 gives -ge at d == 0 and NaN for NaN d; "
        "the contract and F.smooth_l1_loss (l1_loss for beta 0) give ge*sgn(d) with sgn(0) = "
        "sgn(NaN) = 0"
    ),
    "soft_margin_infinite_product": (
        "SoftMarginLossBackward, target*self = -inf: torch's kernel computes "
        "-t*e/(1+e) with e = exp(-t*self), which is inf/inf = NaN; the contract computes "
        "-t*sigmoid(-t*self) from exp(t*self) there, which takes its limit, -t"
    ),
}


def oracle(op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """docs/operators.md's result computed by torch in the compute type, rounded once to the result
    type (by a plain numpy/ml_dtypes cast)."""
    checked = _checked(op_type, inputs, attrs)
    if checked.op is spec.SMOOTH_L1_LOSS_BACKWARD:
        values = smooth_l1_autograd(inputs, attrs)
    elif checked.op.name in ELEMENTWISE_LOSSES:
        values = elementwise_autograd(op_type, inputs, attrs)
    elif checked.op.name in BCE_LOSSES:
        values = bce_autograd(op_type, inputs, attrs)
    else:
        values = kl_autograd(op_type, inputs, attrs)
    with np.errstate(all="ignore"):
        return values.astype(checked.result_type.dtype)


def kl_autograd(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> np.ndarray:
    """d F.kl_div / d self (KlDivBackward) or d target (KlDivTargetBackward), in C."""
    checked = _checked(op_type, inputs, attrs)
    go, x, t = _leaves(checked, inputs)
    b = _shape(checked.broadcast_shape)
    reduction = checked.attrs["reduction"]
    log_target = bool(checked.attrs["log_target"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if reduction == "none" or go.numel() == 1:
            loss = F.kl_div(x, t, reduction=reduction, log_target=log_target)
            grad_outputs = go.expand(b) if reduction == "none" else go.reshape(())
        else:
            weighted = F.kl_div(x, t, reduction="none", log_target=log_target) * go.expand(b)
            loss = _reduce_like_kl_div(weighted, reduction, x)
            grad_outputs = torch.ones((), dtype=go.dtype)
    wrt = x if checked.op is spec.KL_DIV_BACKWARD else t
    return _grad(loss, wrt, grad_outputs)


def smooth_l1_autograd(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """SmoothL1LossBackward's op-level result from F.smooth_l1_loss autograd, in C."""
    checked = _checked(spec.SMOOTH_L1_LOSS_BACKWARD.name, inputs, attrs)
    go, x, t = _leaves(checked, inputs)
    b = _shape(checked.broadcast_shape)
    space = _shape(checked.iteration_shape)
    reduction = checked.attrs["reduction"]
    x_b = x.detach().expand(b).clone().requires_grad_(True)
    t_b = t.detach().expand(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = F.smooth_l1_loss(x_b, t_b, reduction=reduction, beta=checked.attrs["beta"])
    if space == b and (reduction == "none" or go.numel() == 1):
        grad_outputs = go.expand(b) if reduction == "none" else go.reshape(())
        return _grad(loss, x_b, grad_outputs)
    unit = torch.ones(loss.shape, dtype=go.dtype)
    per_element = torch.from_numpy(_grad(loss, x_b, unit))
    return (go * per_element).expand(space).numpy()


ELEMENTWISE_LOSSES: dict[str, Any] = {
    spec.MSE_LOSS_BACKWARD.name: lambda x, t, r, a: F.mse_loss(x, t, reduction=r),
    spec.HUBER_LOSS_BACKWARD.name: lambda x, t, r, a: F.huber_loss(
        x, t, reduction=r, delta=a["delta"]
    ),
    spec.SOFT_MARGIN_LOSS_BACKWARD.name: lambda x, t, r, a: F.soft_margin_loss(x, t, reduction=r),
    spec.L1_LOSS_BACKWARD.name: lambda x, t, r, a: F.l1_loss(x, t, reduction=r),
}
"""The PyTorch loss of each operator whose result is broadcast(grad_output, self, target)."""


def elementwise_autograd(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> np.ndarray:
    """An op-level result like SmoothL1LossBackward's, from the loss's autograd, in C."""
    checked = _checked(op_type, inputs, attrs)
    go, x, t = _leaves(checked, inputs)
    b = _shape(checked.broadcast_shape)
    space = _shape(checked.iteration_shape)
    reduction = checked.attrs["reduction"]
    x_b = x.detach().expand(b).clone().requires_grad_(True)
    t_b = t.detach().expand(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = ELEMENTWISE_LOSSES[op_type](x_b, t_b, reduction, checked.attrs)
    if space == b and (reduction == "none" or go.numel() == 1):
        grad_outputs = go.expand(b) if reduction == "none" else go.reshape(())
        return _grad(loss, x_b, grad_outputs)
    unit = torch.ones(loss.shape, dtype=go.dtype)
    per_element = torch.from_numpy(_grad(loss, x_b, unit))
    return (go * per_element).expand(space).numpy()


BCE_LOSSES = (
    spec.BINARY_CROSS_ENTROPY_BACKWARD.name,
    spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name,
)


def bce_autograd(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> np.ndarray:
    """The binary cross entropies' gradient with respect to self (self's shape), in C; the
    other inputs are expanded to self's shape, which they fit into."""
    checked = _checked(op_type, inputs, attrs)
    c = _TORCH_DTYPES[checked.compute.dtype]
    shape = _shape(checked.shapes["self"])
    x = _tensor(inputs["self"], c).requires_grad_(True)
    go, t = (_tensor(inputs[n], c).expand(shape) for n in ("grad_output", "target"))
    w, p = (_tensor(inputs[n], c).expand(shape) if n in inputs and inputs[n] is not None else None
            for n in ("weight", "pos_weight"))  # fmt: skip
    reduction = checked.attrs["reduction"]
    if op_type == spec.BINARY_CROSS_ENTROPY_BACKWARD.name:
        wide = np.asarray(inputs["self"]).astype(np.float64)
        label = np.asarray(inputs["target"]).astype(np.float64)
        inside = np.all((wide >= 0) & (wide <= 1)) and np.all((label >= 0) & (label <= 1))
        if not inside:  # the forward refuses such a self or target
            with torch.no_grad():
                code = checked.reduction.aclnn_code
                raw_go = _tensor(inputs["grad_output"], c)
                out = torch.ops.aten.binary_cross_entropy_backward(raw_go, x, t, w, code)
            return out.expand(shape).numpy()

        def loss_of(reduce: str) -> torch.Tensor:
            return F.binary_cross_entropy(x, t, weight=w, reduction=reduce)
    else:

        def loss_of(reduce: str) -> torch.Tensor:
            return F.binary_cross_entropy_with_logits(
                x, t, weight=w, pos_weight=p, reduction=reduce
            )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw_go = _tensor(inputs["grad_output"], c)
        if reduction == "none" or raw_go.numel() == 1:
            loss = loss_of(reduction)
            grad_outputs = go if reduction == "none" else raw_go.reshape(())
        else:
            weighted = loss_of("none") * go
            loss = weighted.mean() if reduction == "mean" else weighted.sum()
            grad_outputs = torch.ones((), dtype=c)
    return _grad(loss, x, grad_outputs)


def smooth_l1_autograd_wrt_self(
    inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> np.ndarray:
    """d F.smooth_l1_loss / d self with self's own shape (needs grad_output that does not
    enlarge B); equals the op's result summed to self's shape."""
    checked = _checked(spec.SMOOTH_L1_LOSS_BACKWARD.name, inputs, attrs)
    go, x, t = _leaves(checked, inputs)
    b = _shape(checked.broadcast_shape)
    reduction = checked.attrs["reduction"]
    beta = checked.attrs["beta"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if reduction == "none" or go.numel() == 1:
            loss = F.smooth_l1_loss(x, t, reduction=reduction, beta=beta)
            grad_outputs = go.expand(b) if reduction == "none" else go.reshape(())
        else:
            weighted = F.smooth_l1_loss(x, t, reduction="none", beta=beta) * go.expand(b)
            loss = weighted.mean() if reduction == "mean" else weighted.sum()
            grad_outputs = torch.ones((), dtype=go.dtype)
    return _grad(loss, x, grad_outputs)


def smooth_l1_aten(inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """aten.smooth_l1_loss_backward(grad_output, self and target expanded to B, reduction,
    beta) in C: the op-level kernel torch_npu maps onto aclnnSmoothL1LossBackward."""
    checked = _checked(spec.SMOOTH_L1_LOSS_BACKWARD.name, inputs, attrs)
    go, x, t = _leaves(checked, inputs)
    b = _shape(checked.broadcast_shape)
    code = checked.reduction.aclnn_code
    with torch.no_grad():
        out = torch.ops.aten.smooth_l1_loss_backward(
            go, x.expand(b), t.expand(b), code, checked.attrs["beta"]
        )
    return out.numpy()


def torch_native(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> np.ndarray:
    """The gradient computed by torch in the inputs' own types (per-step rounding for half
    types); for same-dtype inputs, and a one-element grad_output unless reduction is none."""
    checked = _checked(op_type, inputs, attrs)
    dtype = _TORCH_DTYPES[np.dtype(inputs["self"].dtype)]
    go, x, t = (_tensor(inputs[n], dtype) for n in spec.INPUT_NAMES)
    w, p = (_tensor(inputs[n], dtype) if n in inputs else None for n in ("weight", "pos_weight"))
    x.requires_grad_(True)
    t.requires_grad_(True)
    reduction = checked.attrs["reduction"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if checked.op is spec.SMOOTH_L1_LOSS_BACKWARD:
            loss = F.smooth_l1_loss(x, t, reduction=reduction, beta=checked.attrs["beta"])
        elif checked.op.name in ELEMENTWISE_LOSSES:
            loss = ELEMENTWISE_LOSSES[checked.op.name](x, t, reduction, checked.attrs)
        elif checked.op is spec.BINARY_CROSS_ENTROPY_BACKWARD:
            loss = F.binary_cross_entropy(x, t, weight=w, reduction=reduction)
        elif checked.op is spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD:
            loss = F.binary_cross_entropy_with_logits(
                x, t, weight=w, pos_weight=p, reduction=reduction
            )
        else:
            loss = F.kl_div(x, t, reduction=reduction, log_target=bool(checked.attrs["log_target"]))
    wrt = t if checked.op is spec.KL_DIV_TARGET_BACKWARD else x
    grad_outputs = go.expand(loss.shape) if reduction == "none" else go.reshape(())
    (grad,) = torch.autograd.grad(loss, wrt, grad_outputs)
    return _to_numpy(grad, np.dtype(inputs["self"].dtype))


def without_deviations(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(inputs, attributes for torch) with what triggers a DEVIATIONS entry neutralised, so
    a comparison with torch tests everything else.

    KlDivTargetBackward: with log_target 0, grad_output +-inf -> +-2, target 0 -> 0.5 and
    +inf -> 2; with an empty B, every target that is not finite and positive -> 1.
    SmoothL1LossBackward: a beta > 0 that rounds to 0 in the compute type is given to torch
    as 0 (the reference takes the beta == 0 form for it, as level2.md says).
    SoftMarginLossBackward: an infinite self or target -> +-2."""
    out = {n: np.array(a, copy=True) for n, a in inputs.items()}
    checked = _checked(op_type, inputs, attrs)
    torch_attrs = dict(checked.attrs)
    if checked.op is spec.SMOOTH_L1_LOSS_BACKWARD:
        if checked.compute.numpy(torch_attrs["beta"]) == 0:
            torch_attrs["beta"] = 0.0
        return out, torch_attrs
    if checked.op is spec.SOFT_MARGIN_LOSS_BACKWARD:
        for name in ("self", "target"):
            wide = out[name].astype(np.float64)
            infinite = np.isinf(wide)
            out[name][infinite] = np.copysign(2.0, wide[infinite])
        return out, torch_attrs
    if checked.op is not spec.KL_DIV_TARGET_BACKWARD:
        return out, torch_attrs
    t = out["target"]
    wide = t.astype(np.float64)
    if not checked.attrs["log_target"]:
        go = out["grad_output"]
        wide_go = go.astype(np.float64)
        infinite = np.isinf(wide_go)
        go[infinite] = np.copysign(2.0, wide_go[infinite])
        t[wide == 0] = 0.5
        t[np.isposinf(wide)] = 2.0
    if 0 in _shape(checked.broadcast_shape):
        t[~(np.isfinite(wide) & (wide > 0))] = 1.0
    return out, torch_attrs


def assert_matches_torch(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any], context: str = ""
) -> None:
    """The reference agrees with torch within tolerances.ORACLE, deviations aside."""
    inputs, torch_attrs = without_deviations(op_type, inputs, attrs)
    ours = reference.evaluate(op_type, inputs, attrs)
    expected = oracle(op_type, inputs, torch_attrs)
    assert_matches(ours, expected, op_type, inputs, attrs, context=context or op_type)


# --------------------------------------------------------------------------- plumbing

_TORCH_DTYPES: dict[np.dtype, torch.dtype] = {
    t.dtype: getattr(torch, t.name) for t in spec.FLOAT_TYPES
}


def _checked(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> spec.CheckedCall:
    infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}
    return spec.validate(op_type, infos, attrs)


def _leaves(
    checked: spec.CheckedCall, inputs: Mapping[str, np.ndarray]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """grad_output, self and target as torch tensors in C; self and target require grad."""
    c = _TORCH_DTYPES[checked.compute.dtype]  # the optional inputs: bce_autograd
    go, x, t = (_tensor(inputs[n], c) for n in spec.INPUT_NAMES)
    return go, x.requires_grad_(True), t.requires_grad_(True)


def _tensor(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor of `dtype` (bfloat16 arrays go through float32: exact)."""
    wide = np.asarray(a, order="C").astype(np.float64)
    return torch.from_numpy(wide).to(dtype)


def _to_numpy(t: torch.Tensor, dtype: np.dtype) -> np.ndarray:
    """A torch tensor as a numpy array of `dtype` (exact for every float type)."""
    return t.detach().to(torch.float64).numpy().astype(dtype)


def _grad(loss: torch.Tensor, wrt: torch.Tensor, grad_outputs: torch.Tensor) -> np.ndarray:
    (grad,) = torch.autograd.grad(
        loss, wrt, grad_outputs, allow_unused=True, materialize_grads=True
    )
    return grad.detach().numpy()


def _reduce_like_kl_div(weighted: torch.Tensor, reduction: str, x: torch.Tensor) -> torch.Tensor:
    """F.kl_div's reductions (torch/nn/functional.py) applied to an unreduced loss."""
    if reduction == "mean":
        return weighted.mean()
    if reduction == "batchmean" and x.dim() != 0:
        return weighted.sum() / x.size(0)
    return weighted.sum()


def _shape(shape: spec.Shape | None) -> tuple[int, ...]:
    assert shape is not None
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- classes


def _torch_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor of the array's own type (bfloat16 through float32, exactly)."""
    array = np.asarray(array)
    if array.dtype == spec.BFLOAT16.dtype:
        return torch.tensor(array.astype(np.float32)).to(torch.bfloat16)
    return torch.tensor(array)


def _numpy(tensor: torch.Tensor, dtype: np.dtype) -> np.ndarray:
    if tensor.dtype == torch.bfloat16:
        return tensor.float().numpy().astype(dtype)
    return tensor.numpy()


def nll_autograd(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """(the gradient of F.nll_loss with respect to self, the total weight its forward
    returned), by PyTorch's eager autograd in self's own type (its kernels compute a half
    type in that type, which the contract follows). Targets go in as int64 (PyTorch takes no
    int32); the operator's total_weight input is not read: autograd uses the forward's, so
    a comparison must feed the operator the total weight returned here."""
    x = np.asarray(inputs["self"])
    weight = inputs.get("weight")
    reduction = str(attrs.get("reduction", "mean"))
    ignore = int(attrs.get("ignore_index", -100))
    xt = _torch_tensor(x).requires_grad_(True)
    target = torch.tensor(np.asarray(inputs["target"]).astype(np.int64))
    w = None if weight is None else _torch_tensor(weight)
    forward = (
        torch.ops.aten.nll_loss2d_forward
        if op_type == spec.NLL_LOSS_2D_BACKWARD.name
        else torch.ops.aten.nll_loss_forward
    )
    codes = {"none": 0, "mean": 1, "sum": 2}
    _, total = forward(xt.detach(), target, w, codes[reduction], ignore)
    loss = F.nll_loss(xt, target, weight=w, reduction=reduction, ignore_index=ignore)
    g = _torch_tensor(np.asarray(inputs["grad_output"]).reshape(tuple(loss.shape)))
    loss.backward(g)
    assert xt.grad is not None
    return _numpy(xt.grad, x.dtype), _numpy(total, x.dtype).reshape(())


def with_torch_total_weight(
    op_type: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(the inputs with total_weight replaced by the one PyTorch's forward returns, the
    gradient PyTorch's autograd computes for them)."""
    grad, total = nll_autograd(op_type, inputs, attrs)
    return {**inputs, "total_weight": total}, grad


def cross_entropy_autograd(
    inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any]
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(the inputs with self replaced by PyTorch's log_softmax of it, the gradient of
    F.cross_entropy with respect to those logits by eager autograd in self's type): the
    operator takes log-probabilities, so `inputs["self"]` is read as the logits here. The
    label smoothing goes in as the float32 value an ONNX attribute holds."""
    logits = _torch_tensor(np.asarray(inputs["self"])).requires_grad_(True)
    weight = inputs.get("weight")
    target = torch.tensor(np.asarray(inputs["target"]).astype(np.int64))
    loss = F.cross_entropy(
        logits,
        target,
        weight=None if weight is None else _torch_tensor(weight),
        reduction=str(attrs.get("reduction", "mean")),
        ignore_index=int(attrs.get("ignore_index", -100)),
        label_smoothing=float(np.float32(attrs.get("label_smoothing", 0.0))),
    )
    g = _torch_tensor(np.asarray(inputs["grad_output"]).reshape(tuple(loss.shape)))
    loss.backward(g)
    assert logits.grad is not None
    dtype = np.asarray(inputs["self"]).dtype
    log_prob = _numpy(torch.log_softmax(logits.detach(), 1), dtype)
    return {**inputs, "self": log_prob}, _numpy(logits.grad, dtype)
