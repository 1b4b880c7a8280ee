"""The shape checks of spec.validate in C++, once for both C++ backends.

`lossgrad_shapes_source()` is C++ in namespace `lossgrad_shapes`: the algorithms of
cxx_include/lossgrad_shapes.h (Python-style rendering, two-shape broadcasting, the no-enlarge
rule) and, per operator, generated from spec.py, `check_present_<Op>` (a missing input) and
`check_shapes_<Op>` (ranks, broadcasting, and for the KL ops no enlarging), returning a
`Failure` with spec's message and aclnn code. The ORT kernel library compiles it into its one
translation unit; the Ascend C project gets it as op_api/lossgrad_shapes.h."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources

from lossgrad_compiler import spec
from lossgrad_compiler.backends.cxx import cxx_identifier
from lossgrad_compiler.backends.cxx_messages import Message, message_key, shape_messages

STANDARD_HEADERS = ("algorithm", "charconv", "cmath", "cstdint", "cstdlib", "string", "vector")


def shapes_algorithms() -> str:
    return (
        resources.files("lossgrad_compiler.backends")
        .joinpath("cxx_include", "lossgrad_shapes.h")
        .read_text()
    )


def check_present_name(op: spec.OperatorSpec) -> str:
    return f"lossgrad_shapes::check_present_{cxx_identifier(op.name)}"


def check_shapes_name(op: spec.OperatorSpec) -> str:
    return f"lossgrad_shapes::check_shapes_{cxx_identifier(op.name)}"


def print_operator_checks(op: spec.OperatorSpec) -> str:
    """The message functions and the two checks of one operator (inside lossgrad_shapes):
    `check_present` (a required input missing) and `check_shapes` (ranks, then B, then
    every other input in the operator's order: one that enlarges B broadcasts with it, one
    that fits must broadcast to it without enlarging it). An absent optional input has no
    dims (nullptr)."""
    name = cxx_identifier(op.name)
    texts = shape_messages(op)
    n = len(op.inputs)
    position = {i.name: k for k, i in enumerate(op.inputs)}
    lines = ["".join(m.cxx_function() for m in texts.values())]
    lines.append(f"inline Failure check_present_{name}(const bool present[{n}]) {{")
    for i, spec_input in enumerate(op.inputs):
        if spec_input.optional:
            continue
        m = texts[f"missing_{i}"]
        lines.append(f"  if (!present[{i}]) return {{{m.code}, {m.name}()}};")
    lines += ["  return {};", "}", ""]
    lines.append(
        "template <class D>  // Dims or std::vector<int64_t>: how the caller holds its shapes\n"
        f"inline Failure check_shapes_{name}(const D* const dims[{n}], D* b, D* space) {{"
    )
    for i, spec_input in enumerate(op.inputs):
        m = texts[f"rank_{i}"]
        guard = f"dims[{i}] && " if spec_input.optional else ""
        lines.append(
            f"  if ({guard}dims[{i}]->size() > {spec.MAX_RANK}) return {{{m.code}, "
            f"{m.name}(static_cast<int64_t>(dims[{i}]->size()))}};"
        )
    base = [position[b] for b in op.base_inputs]
    if len(base) == 2:
        x, t = base
        pair = texts["self_target"]
        lines += [
            f"  Conflict k = broadcast_two(*dims[{x}], *dims[{t}], b);",
            f"  if (k.axis >= 0) return {{{pair.code}, {pair.name}(*dims[{x}], *dims[{t}], "
            "k.negative_axis(), k.first, k.second)};",
        ]
    else:
        lines += [f"  *b = *dims[{base[0]}];", "  Conflict k;"]
    fits = False
    for spec_input in op.inputs:
        if spec_input.broadcast is spec.Broadcast.BASE:
            continue
        i = position[spec_input.name]
        body = _input_checks(op, spec_input, i, texts)
        fits = fits or spec_input.broadcast is spec.Broadcast.FITS
        if spec_input.optional:
            body = [f"  if (dims[{i}]) {{", *("  " + line for line in body), "  }"]
        lines += body
    if fits:
        lines.append("  *space = *b;")
    lines += ["  return {};", "}", ""]
    return "\n".join(lines)


def _input_checks(
    op: spec.OperatorSpec, spec_input: spec.InputSpec, i: int, texts: dict[str, Message]
) -> list[str]:
    """One input against B: broadcasting (into `space`, B broadcast with it), and for an
    input that must fit, no enlarging."""
    broadcast = texts[message_key("broadcast", op, spec_input.name)]
    lines = [
        f"  k = broadcast_two(*dims[{i}], *b, space);",
        f"  if (k.axis >= 0) return {{{broadcast.code}, {broadcast.name}(*dims[{i}], *b, "
        "k.negative_axis(), k.first, k.second)};",
    ]
    if spec_input.broadcast is not spec.Broadcast.FITS:
        return lines
    rank = texts[message_key("enlarge_rank", op, spec_input.name)]
    axis = texts[message_key("enlarge_axis", op, spec_input.name)]
    g = "g" if spec_input.name == "grad_output" else f"g{i}"
    return [
        *lines,
        f"  const Extents {g} = *dims[{i}];",
        f"  if ({g}.size() > b->size()) return {{{rank.code}, {rank.name}({g}, *b, "
        f"static_cast<int64_t>({g}.size()), static_cast<int64_t>(b->size()))}};",
        f"  k = enlarges({g}, *b);",
        f"  if (k.axis >= 0) return {{{axis.code}, {axis.name}({g}, *b, k.negative_axis(), "
        "k.first, k.second)};",
    ]


def lossgrad_shapes_source(ops: Iterable[spec.OperatorSpec] | None = None) -> str:
    """The algorithms and every operator's checks, without includes (see STANDARD_HEADERS)."""
    chosen = list(spec.OPERATORS.values()) if ops is None else list(ops)
    checks = "".join(print_operator_checks(op) for op in chosen)
    return (
        f"namespace lossgrad_shapes {{\nconstexpr size_t kMaxRank = {spec.MAX_RANK};  "
        "// spec.MAX_RANK\n}  // namespace lossgrad_shapes\n\n"
        + shapes_algorithms()
        + "\n// Generated from spec.py by lossgrad_compiler.backends.cxx_shapes.\n"
        + "namespace lossgrad_shapes {\n\n"
        + checks
        + "}  // namespace lossgrad_shapes\n"
    )


def lossgrad_shapes_header() -> str:
    """The same as a self-contained header file."""
    includes = "".join(f"#include <{h}>\n" for h in STANDARD_HEADERS)
    return (
        "// Generated by lossgrad_compiler from spec.py. Do not edit.\n"
        "#ifndef LOSSGRAD_SHAPES_H\n#define LOSSGRAD_SHAPES_H\n\n"
        + includes
        + "\n"
        + lossgrad_shapes_source()
        + "\n#endif  // LOSSGRAD_SHAPES_H\n"
    )
