"""Whether a fused node broadcasts as its compiled kernel can, where the graph runs.

compile_model compiles an ai.lossgrad node by signature (frontend/signature.py,
docs/level2.md): each operand dimension is dynamic except a static 1 broadcast against a
dimension other than 1, and a dynamic dimension is never broadcast. The dynamic sizes on one
axis must be equal at run time, or the node's size check fails ("a dynamic dimension is
never broadcast"). The compiler reads the shapes that ONNX shape inference gives without
data propagation (frontend/inference.py); the pass reads them with it and knows more. Where
grad_output is `Expand(1, Shape(x)) / n`, the compiler sees [?, ?] and the pass [1, 2]:
against a target of shape [2, 1] that 1 is a dynamic dimension broadcast at run time, and
the fused model fails where the original runs.

So a node is fused only where, on every axis, the dimensions the kernel takes as dynamic
are provably equal at run time: the same static size, or the same named dimension (a
name stands for one size in a model, as the pass's proofs of n also read it)."""

from __future__ import annotations

from collections.abc import Mapping

from lossgrad_compiler import spec

ABSENT = "absent"  # an operand of lower rank has no dimension on a leading axis


def kernel_broadcasts(
    op_type: str, shapes: Mapping[str, spec.Shape]
) -> dict[str, tuple[bool, ...]]:
    """Per operand and dimension: whether the compiled kernel reads it as a broadcast 1
    (frontend/signature.py's pattern: a static 1 against a dimension other than 1 of an
    input that spans the iteration space)."""
    spans = {
        i.name for i in spec.operator(op_type).inputs if i.broadcast is not spec.Broadcast.FITS
    }
    rank = max((len(s) for s in shapes.values()), default=0)
    found: dict[str, tuple[bool, ...]] = {}
    for name, shape in shapes.items():
        flags = []
        for j, d in enumerate(shape):
            axis = rank - len(shape) + j
            flags.append(
                d == 1
                and any(
                    _dim_at(other, axis, rank) not in (1, ABSENT)
                    for other_name, other in shapes.items()
                    if other_name != name and other_name in spans
                )
            )
        found[name] = tuple(flags)
    return found


def unproved_broadcast(
    op_type: str,
    compiled: Mapping[str, spec.Shape | None],
    known: Mapping[str, spec.Shape],
) -> str:
    """Why the node's kernel, compiled from the `compiled` shapes of its operands, may meet a
    dynamic dimension broadcast at run time, given the `known` shapes ("" where every axis's
    dynamic dimensions are provably equal)."""
    unranked = [name for name, shape in compiled.items() if shape is None]
    if unranked:
        return (
            f"ONNX shape inference as the compiler runs it (without data propagation) does "
            f"not give the rank of {unranked[0]}: the fused node would not compile"
        )
    shapes: dict[str, spec.Shape] = {n: s for n, s in compiled.items() if s is not None}
    if any(len(shapes[n]) != len(known[n]) for n in shapes):
        return "the compiler and the pass see operands of different ranks"
    broadcast = kernel_broadcasts(op_type, shapes)
    rank = max((len(s) for s in shapes.values()), default=0)
    for axis in range(rank):
        dynamic = {
            name: _dim_at(known[name], axis, rank)
            for name in shapes
            if _dim_at(shapes[name], axis, rank) != ABSENT
            and not broadcast[name][axis - (rank - len(shapes[name]))]
        }
        sizes = set(dynamic.values())
        if len(dynamic) > 1 and (len(sizes) > 1 or None in sizes):  # alone, it is the loop's
            listed = ", ".join(
                f"{name} {_shown(known[name])} (compiled as {_shown(shapes[name])})"
                for name in dynamic
            )
            return (
                f"on axis {axis - rank} the compiled node's dynamic dimensions are not "
                f"provably equal ({listed}): a dynamic dimension is never broadcast at run "
                "time, so the fused node could fail where the graph runs"
            )
    return ""


def _dim_at(shape: spec.Shape, axis: int, rank: int) -> spec.Dim | str:
    j = axis - (rank - len(shape))
    return shape[j] if j >= 0 else ABSENT


def _shown(shape: spec.Shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
