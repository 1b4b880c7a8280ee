"""Signatures: what makes two ai.lossgrad nodes share one compiled kernel.

A signature is (op, which optional inputs are present, element types, ranks and broadcast
pattern, attributes). For the elementwise operators every dimension becomes dynamic except
a static 1 that is broadcast against a dimension other than 1 — the only shape fact that
changes the lowered code (an indexing map reads it with the constant 0; docs/level2.md).
Dynamic dimensions are never broadcast, so at run time they equal the iteration dimension
and one kernel serves every size. For the classification operators every dimension is
dynamic except those of the one-element inputs (total_weight, and grad_output unless it
holds one value per row), which keep their static shape: [] or [1]."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from lossgrad_compiler import spec

Pattern = tuple[int | None, ...]
"""Per dimension: 1 for a static size-1 dimension (a broadcast one, or one of a
classification operator's one-element inputs), None for a dynamic one."""

ElementType = spec.FloatType | spec.IndexType
"""An input's element type: a float, or the class indices of a classification target."""


@dataclass(frozen=True)
class Signature:
    """One compiled kernel's worth of nodes. `types` and `patterns` have one entry per input
    of the operator, in its order, None for an absent optional input (grad_output, self,
    target first); `attrs` holds every attribute in spec's order."""

    op_type: str
    types: tuple[ElementType | None, ...]
    patterns: tuple[Pattern | None, ...]
    attrs: tuple[tuple[str, Any], ...]

    def __post_init__(self) -> None:
        n = len(self.op.inputs)
        # A signature may list only the inputs up to the last present one.
        types = (*self.types, *(None,) * (n - len(self.types)))
        patterns = (*self.patterns, *(None,) * (n - len(self.patterns)))
        object.__setattr__(self, "types", types)
        object.__setattr__(self, "patterns", patterns)

    @property
    def op(self) -> spec.OperatorSpec:
        return spec.operator(self.op_type)

    @property
    def present(self) -> tuple[str, ...]:
        """The inputs the signature's nodes give, in the operator's order."""
        return tuple(
            i.name for i, t in zip(self.op.inputs, self.types, strict=True) if t is not None
        )

    @property
    def present_types(self) -> tuple[ElementType, ...]:
        return tuple(t for t in self.types if t is not None)

    @property
    def present_patterns(self) -> tuple[Pattern, ...]:
        return tuple(p for p in self.patterns if p is not None)

    @property
    def attributes(self) -> dict[str, Any]:
        return dict(self.attrs)

    @cached_property
    def id(self) -> str:
        """A readable, injective identifier that is also a C and MLIR symbol name, e.g.
        `smooth_l1_loss_backward__f32_f32_f32__0d_dx1_d__mean_beta0p5` or
        `nll_loss_backward__f32_f32_i64_f32_none__0d_dxd_d_0d_none__mean_ignore_indexm100`;
        an absent optional input is `none` in both the types and the shapes, a minus sign
        `m`."""
        types = "_".join(ABSENT if t is None else t.mlir for t in self.types)
        shapes = "_".join(ABSENT if p is None else _pattern_id(p) for p in self.patterns)
        attrs = "_".join(_attr_id(name, value) for name, value in self.attrs)
        return f"{self.op.mnemonic}__{types}__{shapes}__{attrs}"


ABSENT = "none"
"""How a signature id spells an absent optional input."""


def _pattern_id(pattern: Pattern) -> str:
    if not pattern:
        return "0d"
    return "x".join("1" if d == 1 else "d" for d in pattern)


def _attr_id(name: str, value: Any) -> str:
    """An attribute as symbol characters: a float's '.' is 'p', a minus sign 'm' (an INT as
    ignore_index = -100 gives `ignore_indexm100`)."""
    if name == "reduction":
        return str(value)
    if isinstance(value, float):
        text = repr(value).replace(".", "p").replace("-", "m").replace("+", "")
        return f"{name}{text}"
    return f"{name}{str(int(value)).replace('-', 'm')}"


_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def signature_of(call: spec.CheckedCall) -> Signature:
    """The signature of a validated call whose input ranks are known."""
    present = call.present
    shapes = [call.shapes[name] for name in present]
    if any(s is None for s in shapes):
        raise ValueError("a signature needs the rank of every input")
    known = {name: s for name, s in zip(present, shapes, strict=True) if s is not None}
    patterns = (
        class_patterns(call, known) if call.op.has_classes else broadcast_patterns(call, known)
    )
    types: dict[str, ElementType] = {**call.types, **call.index_types}
    signature = Signature(
        op_type=call.op.name,
        types=tuple(types.get(i.name) for i in call.op.inputs),
        patterns=tuple(patterns.get(i.name) for i in call.op.inputs),
        attrs=tuple((a.name, call.attrs[a.name]) for a in call.op.attributes),
    )
    assert _SYMBOL.match(signature.id), signature.id
    return signature


def broadcast_patterns(call: spec.CheckedCall, shapes: dict[str, spec.Shape]) -> dict[str, Pattern]:
    """An elementwise operator's patterns: a static 1 where it is broadcast (spec)."""
    return {
        name: tuple(1 if broadcast else None for broadcast in dims)
        for name, dims in spec.broadcast_dims(call.op, shapes).items()
    }


def one_element_inputs(call: spec.CheckedCall) -> tuple[str, ...]:
    """A classification call's inputs of one element (spec.check_class_shapes): total_weight,
    and grad_output unless reduction none gives it one value per row of a batch."""
    rank = len(call.shapes["self"] or ())
    per_element = call.reduction is spec.Reduction.NONE and rank >= 2
    return ("total_weight",) if per_element else ("grad_output", "total_weight")


def class_patterns(call: spec.CheckedCall, shapes: dict[str, spec.Shape]) -> dict[str, Pattern]:
    """A classification operator's patterns: every dimension dynamic, but a one-element
    input keeps its static shape ([] or [1]; a symbolic size of one there must be 1)."""
    single = one_element_inputs(call)
    return {
        name: tuple(1 if name in single else None for _ in shape) for name, shape in shapes.items()
    }
