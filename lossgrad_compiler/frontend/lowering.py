"""Signatures → level-2 IR: the one lowering, with the one per-signature cache that every
target shares. It sits below the backends so that the driver and the runtimes hand level 2
down to them: no backend runs `lower-lossgrad` itself.

A signature is lowered once per form and process; later requests get a copy of the cached
function, so a backend may rewrite what it receives (the HFusion and Ascend C conversions
do) without touching the cache."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler.context import make_context
from lossgrad_compiler.frontend.ir import lossgrad_module
from lossgrad_compiler.frontend.signature import Signature
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass


class LoweringForm(StrEnum):
    """Which level-2 form is lowered (docs/level2.md): the static one every target receives,
    or the run-time-parameter one the native ORT library's variants are printed from."""

    STATIC = "static"
    """n and beta are constants of the function: one function per signature."""
    RUNTIME_PARAMETERS = "runtime-parameters"
    """n and beta > 0 are trailing arguments (`lossgrad.parameters`): one body serves every
    value of them (the ORT kernel library's variants)."""


@dataclass(frozen=True)
class Lowered:
    """A level-2 module of some signatures (each once, in the order given) and which of
    them this request lowered and which came from the cache."""

    module: ModuleOp
    compiled: list[str]
    cached: list[str]


_CACHE: dict[tuple[str, LoweringForm], func.FuncOp] = {}


def lower(signatures: Iterable[Signature], form: LoweringForm = LoweringForm.STATIC) -> Lowered:
    """One level-2 function per signature, named by its id and marked with its operator
    (docs/level2.md), lowered now or copied from the cache."""
    form = LoweringForm(form)
    unique = list({s.id: s for s in signatures}.values())
    missing = [s for s in unique if (s.id, form) not in _CACHE]
    if missing:
        module = lossgrad_module(missing)
        LowerLossgradPass(runtime_parameters=form is LoweringForm.RUNTIME_PARAMETERS).apply(
            make_context(), module
        )
        for function in module.ops:
            assert isinstance(function, func.FuncOp)
            _CACHE[(function.sym_name.data, form)] = function.clone()
    missed = {s.id for s in missing}
    return Lowered(
        ModuleOp([_CACHE[(s.id, form)].clone() for s in unique]),
        [s.id for s in unique if s.id in missed],
        [s.id for s in unique if s.id not in missed],
    )


def lower_signatures(
    signatures: Iterable[Signature], form: LoweringForm = LoweringForm.STATIC
) -> ModuleOp:
    """The level-2 module of `signatures` (see `lower`)."""
    return lower(signatures, form).module


def clear_lowering_cache() -> None:
    """Forget every lowered signature (for tests and benchmarks of cold compiles)."""
    _CACHE.clear()
