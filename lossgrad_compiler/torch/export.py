"""Trace a function that returns loss gradients, export it with PyTorch's own ONNX exporter,
then fuse the decomposed gradients into ai.lossgrad nodes.

The function is traced through autograd with `make_fx` (aten ops, the backward of each loss
included: `torch.export` of a function that calls `torch.autograd.grad` fails for L1-type
losses, whose backward it lifts into a constant), and the traced graph is exported with
`torch.onnx.export(..., dynamo=True)`. The exporter decomposes each loss's backward into
standard ops; `lossgrad_compiler.fuse` then replaces the subgraphs it can prove equal to
one ai.lossgrad node (docs/fusion.md lists the forms: the KL, SmoothL1 and loss-family
gradients, F.nll_loss's as NLLLossBackward / NLLLoss2dBackward, and F.cross_entropy's as
CrossEntropyLossGrad). Other losses'
gradients stay as the exporter wrote them."""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from lossgrad_compiler.fusion import FusionReport, fuse

SUPPORTED_TORCH = "2.13"  # the exporter's decompositions the fusion forms were written from

try:
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx
except ImportError as err:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "lossgrad_compiler.torch needs PyTorch: pip install 'lossgrad_compiler[torch]'"
    ) from err

DynamicShapes = Sequence[Mapping[int, Any] | None] | Mapping[str, Mapping[int, Any] | None]


def export_training_step(
    fn: Callable[..., Any],
    example_inputs: Sequence[torch.Tensor],
    path: str | Path | None = None,
    *,
    dynamic_shapes: DynamicShapes | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    fuse_gradients: bool = True,
    reassociate: bool = False,
) -> tuple[onnx.ModelProto, FusionReport]:
    """Export `fn(*example_inputs)` (which returns a tensor or a tuple of tensors, e.g.
    gradients from `torch.autograd.grad`) as an ONNX model with ai.lossgrad nodes.

    `dynamic_shapes` gives, per input (a sequence in input order, or a mapping from
    `fn`'s parameter names), which dimensions are dynamic: `{0: "batch"}` or
    `{0: torch.export.Dim("batch")}`. Input names default to `fn`'s parameter names. The
    fused model is written to `path` when given; the report says what was fused and what
    was left as the exporter wrote it, and why. `fuse_gradients=False` gives the exporter's
    own model (to compare with, or to fuse later with `lossgrad-compile --fuse`).
    `reassociate=True` also fuses the exporter's forms that group operations otherwise than
    the operators (KlDivTargetBackward with log_target 1; SmoothL1 with a mean and a beta
    that is not a power of two at most 1): see fuse() and docs/fusion.md."""
    _check_version()
    inputs = tuple(example_inputs)
    names = list(input_names or _parameter_names(fn, len(inputs)))
    shapes = _dynamic_shapes(dynamic_shapes, names)
    # a loss may capture a real tensor (a class weight built in the step): symbolic tracing
    # refuses such non-fake constants unless told they are allowed
    traced = make_fx(
        fn, tracing_mode="symbolic" if shapes else "real", _allow_non_fake_inputs=bool(shapes)
    )(*inputs)
    module = _Step(traced)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), _quiet("torch"):
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            module,
            inputs,
            dynamo=True,
            dynamic_shapes=(tuple(shapes),) if shapes else None,
            input_names=names,
            output_names=list(output_names) if output_names else None,
            optimize=True,
            verbose=False,
        )
    exported = program.model_proto
    if fuse_gradients:
        fused, report = fuse(exported, reassociate=reassociate)
    else:
        fused, report = exported, FusionReport()
    if path is not None:
        onnx.save(fused, str(path))
    return fused, report


class _Step(torch.nn.Module):
    def __init__(self, traced: torch.fx.GraphModule) -> None:
        super().__init__()
        self.traced = traced

    def forward(self, *args: torch.Tensor) -> Any:
        return self.traced(*args)


@contextlib.contextmanager
def _quiet(logger_name: str) -> Any:
    """The exporter logs a warning per torchvision op it cannot register (torchvision is
    not installed with the CPU build): not the user's business."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _parameter_names(fn: Callable[..., Any], count: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    if len(params) >= count:
        return params[:count]
    return [f"input_{i}" for i in range(count)]


def _dynamic_shapes(
    given: DynamicShapes | None, names: list[str]
) -> list[dict[int, Any] | None] | None:
    if not given:
        return None
    if isinstance(given, Mapping):
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(f"dynamic_shapes names {unknown}, which are not inputs {names}")
        per_input = [given.get(n) for n in names]
    else:
        per_input = list(given)
        if len(per_input) != len(names):
            raise ValueError(f"dynamic_shapes has {len(per_input)} entries for {len(names)} inputs")
    dims: dict[str, Any] = {}
    out: list[dict[int, Any] | None] = []
    for spec in per_input:
        if spec is None:
            out.append(None)
            continue
        entry = {}
        for axis, dim in spec.items():
            if isinstance(dim, str):
                dim = dims.setdefault(dim, torch.export.Dim(dim))
            entry[int(axis)] = dim
        out.append(entry)
    return out


def _check_version() -> None:
    version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if version != SUPPORTED_TORCH:
        warnings.warn(
            f"lossgrad_compiler.torch was written against PyTorch {SUPPORTED_TORCH}'s "
            f"exporter; with {torch.__version__} some gradients may stay unfused",
            stacklevel=3,
        )
