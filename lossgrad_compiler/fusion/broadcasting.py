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
    broadcast = spec.broadcast_dims(spec.operator(op_type), shapes)
    rank = max((len(s) for s in shapes.values()), default=0)
    for axis in range(rank):
        dynamic = {
            name: spec.dim_at(known[name], axis, rank)
            for name in shapes
            if spec.dim_at(shapes[name], axis, rank) != spec.ABSENT_DIM
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


def _shown(shape: spec.Shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
