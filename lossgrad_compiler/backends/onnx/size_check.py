"""The run-time check of the sizes that level-2 IR assumes equal.

A `linalg.generic` takes the size of each loop from its operands, and level 2 may read that
size from any operand on the loop (`tensor.dim` of `self` for the scale, of `target` for the
result's shape), because the dynamic sizes on one loop are equal at run time: a dynamic
dimension is never broadcast (docs/level2.md). ONNX Runtime checks none of this. It
broadcasts a run-time 1 silently and never compares symbolic dimensions, so a call that breaks
the assumption would return numbers computed for other shapes.

The translation therefore checks the assumption, as MLIR's run-time verification of linalg
ops does: the dynamic sizes the IR equates are compared at run time, and a `Gather` indexed by
their total difference fails in ONNX Runtime (and in onnx's ReferenceEvaluator) when they
differ. The node's name says what was checked; ONNX Runtime puts it in its error message.
The check works on 1-D shape tensors only. Its zero result gates the checked operands the
body reads (each through a `Reshape` to itself, which ONNX Runtime runs in place), so no
optimizer can prune the check, and it fails before a body node that mixes mismatched operands
could fail with ONNX Runtime's own broadcasting message."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from lossgrad_compiler.backends.onnx.state import Translation
from lossgrad_compiler.backends.onnx.values import DimOf, ShapeEntry
from lossgrad_compiler.level2 import Level2ContractError, Level2Generic

SizePair = tuple[ShapeEntry, ShapeEntry]


def equal_size_pairs(t: Translation, generic: Level2Generic) -> list[SizePair]:
    """Pairs of operand sizes that the generic's loops make equal and that are not known to
    be equal already (the same size of the same value, or the same static size)."""
    groups: list[list[ShapeEntry]] = [[] for _ in range(generic.loops)]
    for operand in (*generic.inputs, generic.output):
        entries = t.shape_entries(operand.value, generic.op)
        for j, loop in enumerate(operand.index_map):
            if loop is not None and entries[j] not in groups[loop]:
                groups[loop].append(entries[j])
    pairs: list[SizePair] = []
    for loop, group in enumerate(groups):
        static = [e for e in group if isinstance(e, int)]
        if len(static) > 1:
            raise Level2ContractError(generic.op, f"loop d{loop} has the static sizes {static}")
        chain = static + [e for e in group if not isinstance(e, int)]
        pairs.extend(itertools.pairwise(chain))
    # Pairs of the same two values next to each other: both sides then read whole shapes.
    return sorted(pairs, key=lambda pair: tuple(_order(e) for e in pair))


def _order(entry: ShapeEntry) -> tuple[str, int]:
    return ("", entry) if isinstance(entry, int) else (entry.tensor, entry.dim)


def emit_size_check(t: Translation, pairs: Sequence[SizePair]) -> str:
    """Nodes that fail at run time unless both sizes of every pair are equal; the name of a
    rank-0 int64 zero that depends on the check."""
    sink = t.sink
    lhs = sink.shape([a for a, _ in pairs])
    rhs = sink.shape([b for _, b in pairs])
    difference = sink.add("Sub", [lhs, rhs], "size_difference")
    total = sink.add("ReduceL1", [difference], "size_difference", keepdims=0)
    ok = sink.add("Gather", [sink.int64s([0]), total], "sizes_ok", axis=0)
    names = sorted({e.tensor for pair in pairs for e in pair if isinstance(e, DimOf)})
    sink.nodes[-1].name = (
        f"{ok}: check that the dynamic dimensions of {', '.join(names)} agree (a dynamic "
        "dimension is never broadcast at run time; declare a broadcast dimension as a static 1)"
    )
    return ok


def gate(t: Translation, value: str, rank: int, ok: str) -> str:
    """`value` unchanged, but computed only once the check that produced `ok` has passed: a
    Reshape to `rank` zeros, each of which keeps the input's dimension (ONNX's default)."""
    zeros = t.sink.add_shared("Add", [ok, t.sink.int64s([0] * rank)], "checked_shape")
    return t.sink.add("Reshape", [value, zeros], "checked")
