"""Stand-ins for inputs whose element type is not known (yet), so that spec checks the rest.

A node may be validated before every input is typed: builders know no types at all, and a
value produced by an invalid or unknown node stays untyped. Such an input is validated as
one that passes spec's type checks: a float input as float32, a class-index input (the
classification operators' target) as int64, and, where an operator asks every float input to
have self's type (spec.check_same_types), a float input as the type of a known one."""

from __future__ import annotations

from collections.abc import Mapping

from lossgrad_compiler import spec


def placeholder(
    op: spec.OperatorSpec,
    name: str,
    shape: spec.Shape | None,
    known: Mapping[str, spec.TensorInfo | None],
) -> spec.TensorInfo:
    """What input `name` of `op` is validated as when its element type is unknown; `known`
    holds the node's other inputs (those typed decide a classification operator's float
    type: self's first)."""
    if name in op.input_names and op.input(name).kind is spec.InputKind.CLASS_INDEX:
        return spec.TensorInfo(spec.INT64, shape)
    return spec.TensorInfo(_float_type(op, known), shape)


def _float_type(
    op: spec.OperatorSpec, known: Mapping[str, spec.TensorInfo | None]
) -> spec.FloatType:
    if not op.has_classes:
        return spec.FLOAT32
    ordered = ["self", *(n for n in op.input_names if n != "self")]
    for name in ordered:
        info = known.get(name)
        found = None if info is None else spec.float_type(info.dtype)
        if found is not None and op.input(name).kind is spec.InputKind.FLOAT:
            return found
    return spec.FLOAT32


def fill_unknown(
    op: spec.OperatorSpec,
    infos: Mapping[str, spec.TensorInfo | None],
    unknown: Mapping[str, spec.Shape | None],
) -> dict[str, spec.TensorInfo | None]:
    """`infos` with a placeholder for each input of `unknown` (name → its shape, if any)."""
    filled = dict(infos)
    for name, shape in unknown.items():
        filled[name] = placeholder(op, name, shape, infos)
    return filled
