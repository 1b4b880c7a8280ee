"""Running level 2 compiled by IREE: `evaluate` with the call shape of `reference.evaluate`,
`evaluate_calls` for many calls in one compiled module, and `load` for a module on disk.

Every call is validated by the operator contract before anything is compiled (errors carry
the aclnn codes), because IREE checks static sizes and ranks but not that dynamic sizes agree.
IREE's CPU runtime flushes subnormal inputs and results to zero (its worker threads set
FTZ/DAZ); everything else follows docs/operators.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lossgrad_compiler import spec
from lossgrad_compiler.backends.iree import IreeTarget, compile_signatures
from lossgrad_compiler.backends.iree.targets import iree_module
from lossgrad_compiler.frontend.signature import signature_of

DEVICES = ("local-task", "local-sync")


@dataclass(frozen=True)
class Call:
    op_type: str
    inputs: Mapping[str, Any]
    attrs: Mapping[str, Any] = field(default_factory=dict)


class LoadedModule:
    """A compiled module in its own IREE context: its functions by exported name."""

    def __init__(self, path: str | Path, device: str = "local-task") -> None:
        if device not in DEVICES:
            raise ValueError(f"unknown IREE CPU device '{device}' (one of {', '.join(DEVICES)})")
        rt = iree_module("iree.runtime")
        self.config = rt.Config(device)
        self.context = rt.SystemContext(config=self.config)
        self.context.add_vm_module(rt.VmModule.mmap(self.config.vm_instance, str(path)))
        self.functions = self.context.modules.module

    @property
    def names(self) -> list[str]:
        return [n for n in self.functions.vm_module.function_names if not n.startswith("__")]

    def __call__(self, name: str, *arrays: np.ndarray) -> np.ndarray:
        return np.asarray(self.functions[name](*arrays))


def load(path: str | Path, device: str = "local-task") -> LoadedModule:
    """A module written by the IREE target (or by iree-compile from level 2)."""
    return LoadedModule(path, device)


def evaluate(
    op_type: str,
    inputs: Mapping[str, Any],
    attrs: Mapping[str, Any] | None = None,
    device: str = "local-task",
    target: IreeTarget | None = None,
) -> np.ndarray:
    """The result of one call computed by IREE, as a numpy array of the result type."""
    return evaluate_calls([Call(op_type, inputs, dict(attrs or {}))], device, target)[0]


def evaluate_calls(
    calls: Sequence[Call], device: str = "local-task", target: IreeTarget | None = None
) -> list[np.ndarray]:
    """Many calls: every call validated first, then one module for all their signatures."""
    target = target or IreeTarget()
    if target.backend != "llvm-cpu":
        raise ValueError(f"only llvm-cpu modules run on this machine, not {target.backend}")
    prepared = [_prepared(call) for call in calls]
    if not prepared:
        return []
    path = compile_signatures([signature_of(checked) for checked, _ in prepared], target)
    module = load(path, device)
    results = []
    for checked, arrays in prepared:
        name = signature_of(checked).id
        out = module(name, *(arrays[n] for n in spec.INPUT_NAMES))
        results.append(out.astype(checked.result_type.dtype, copy=False))
    return results


def _prepared(call: Call) -> tuple[spec.CheckedCall, dict[str, np.ndarray]]:
    arrays = {n: (None if v is None else np.asarray(v)) for n, v in call.inputs.items()}
    infos = {
        n: (None if a is None else spec.TensorInfo(a.dtype, tuple(a.shape)))
        for n, a in arrays.items()
    }
    checked = spec.validate(call.op_type, infos, call.attrs)
    return checked, {n: np.asarray(arrays[n], order="C") for n in spec.INPUT_NAMES}
