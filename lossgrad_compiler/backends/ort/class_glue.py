"""The glue of the classification operators (spec.CLASS_OPERATORS), generated from spec.py:
spec.validate's checks in its order (a missing input, element types, ranks, SAME_TYPE, the
classes shape rule CLASS_SHAPE), each with spec's message (cxx_messages), the choice of the
loop-nest variant (class_variants.py) and the target check: the count the variant's level 2
computes (its check generic, printed by nest_printer.py) fails the call with TARGET_RANGE
when it is not 0."""

from __future__ import annotations

from lossgrad_compiler import messages, spec
from lossgrad_compiler.backends.cxx import cxx_identifier, cxx_string_literal
from lossgrad_compiler.backends.cxx_messages import (
    Message,
    element_type_message,
    input_messages,
    message,
)
from lossgrad_compiler.backends.ort.class_variants import (
    ClassVariant,
    class_variants,
    float_attributes,
    reduction_attribute,
)
from lossgrad_compiler.backends.ort.cxx_text import cxx_float_literal
from lossgrad_compiler.backends.ort.glue_printer import attrs_struct_name

_NAMES = {name: i for i, name in enumerate(("grad_output", "self", "target", "total_weight"))}


def _messages(op: spec.OperatorSpec) -> dict[str, Message]:
    prefix = cxx_identifier(op.name) + "_class"
    out: dict[str, Message] = {}
    for i, spec_input in enumerate(op.inputs):
        name = spec_input.name
        out.update(input_messages(op, prefix, i, spec_input))
        if spec_input.kind is spec.InputKind.CLASS_INDEX:
            out[f"type_{i}"] = message(
                f"{prefix}_type_{i}",
                messages.ELEMENT_TYPE,
                op=op.name,
                input=name,
                allowed=spec.ALLOWED_INDEX_TYPES,
            )
        else:
            m = element_type_message(op, spec_input)
            out[f"type_{i}"] = Message(f"{prefix}_type_{i}", m.parts, m.code)
            out[f"same_{i}"] = message(
                f"{prefix}_same_{i}", messages.SAME_TYPE, op=op.name, input=name
            )
        out[f"shape_{i}"] = message(
            f"{prefix}_shape_{i}", messages.CLASS_SHAPE, op=op.name, input=name
        )
    out["range"] = message(f"{prefix}_target_range", messages.TARGET_RANGE, op=op.name)
    return out


def _float_name_function() -> str:
    cases = "".join(
        f"    case {t.onnx}: return {cxx_string_literal(t.name)};\n" for t in spec.FLOAT_TYPES
    )
    index = "".join(
        f"    case {t.onnx}: return {cxx_string_literal(t.name)};\n" for t in spec.INDEX_TYPES
    )
    return (
        "// How spec names an element type in a message: numpy's name for the float and\n"
        "// index types, ONNX's (onnx_element_name) for the others.\n"
        "inline std::string class_type_name(ONNXTensorElementDataType type) {\n"
        f"  switch (static_cast<int>(type)) {{\n{cases}{index}"
        "    default: return onnx_element_name(type);\n  }\n}\n"
    )


def print_class_glue(op: spec.OperatorSpec, nests: dict[str, str]) -> str:
    """compute_<op>: the checks, then the variant of the call (`nests`: the printed
    nest functions by variant name, already in the source)."""
    name = cxx_identifier(op.name)
    texts = _messages(op)
    n = len(op.inputs)
    struct = attrs_struct_name(op)
    self_k = op.input_names.index("self")
    target_k = op.input_names.index("target")
    assert (self_k, target_k) == (1, 2), "spec.INPUT_NAMES: kSelf and kTarget"
    lines = [
        f"OrtStatus* compute_{name}(const void* kernel, OrtKernelContext* ctx) {{",
        f"  const {struct}& a = *static_cast<const {struct}*>(kernel);",
        "  Input in[kMaxInputs];",
        "  size_t given = 0;",
        "  LOSSGRAD_TRY(g_api->KernelContext_GetInputCount(ctx, &given));",
        f"  for (size_t i = 0; i < std::min<size_t>(given, {n}); ++i)",
        "    LOSSGRAD_TRY(read_input(ctx, i, &in[i]));",
    ]
    for i, spec_input in enumerate(op.inputs):
        if not spec_input.optional:
            lines.append(f"  if (!in[{i}].present) return invalid({texts[f'missing_{i}'].name}());")
    index_codes = " && ".join(f"in[kTarget].type != {t.onnx}" for t in spec.INDEX_TYPES)
    for i, spec_input in enumerate(op.inputs):
        bad = (
            f"({index_codes})"
            if spec_input.kind is spec.InputKind.CLASS_INDEX
            else f"!is_float(in[{i}].type)"
        )
        lines.append(
            f"  if (in[{i}].present && {bad}) return invalid("
            f"{texts[f'type_{i}'].name}(class_type_name(in[{i}].type)));"
        )
    for i in range(n):
        lines.append(
            f"  if (in[{i}].present && in[{i}].dims.rank > {spec.MAX_RANK}) return invalid("
            f"{texts[f'rank_{i}'].name}(static_cast<int64_t>(in[{i}].dims.rank)));"
        )
    for i, spec_input in enumerate(op.inputs):
        if spec_input.kind is spec.InputKind.CLASS_INDEX or i == self_k:
            continue
        lines.append(
            f"  if (in[{i}].present && in[{i}].type != in[kSelf].type) return invalid("
            f"{texts[f'same_{i}'].name}(class_type_name(in[kSelf].type), "
            f"class_type_name(in[{i}].type)));"
        )
    # The classes shape rule (spec.check_class_shapes), in input order after self's rank.
    none_index = (reduction_attribute(op).choices or ()).index(spec.Reduction.NONE.value)
    ranks = " || ".join(f"x.rank == {r}" for r in op.class_ranks)
    expected_ranks = " or ".join(f"rank {r}" for r in op.class_ranks)
    shape = texts[f"shape_{self_k}"].name
    lines += [
        "  const lossgrad_shapes::Dims& x = in[kSelf].dims;",
        f"  if (!({ranks})) return invalid({shape}(x, {cxx_string_literal(expected_ranks)}, x));",
        "  const size_t cd = " + _class_dim(op) + ";",
        *_min_classes(op, shape),
        "  lossgrad_shapes::Dims rows;",
        "  for (size_t k = 0; k < x.rank; ++k) if (k != cd) rows.extent[rows.rank++] = x[k];",
        f"  const bool per_element = a.reduction == {none_index} && x.rank >= 2;",
        "  auto same = [](const lossgrad_shapes::Dims& s, const lossgrad_shapes::Dims& r) {",
        "    if (s.rank != r.rank) return false;",
        "    for (size_t k = 0; k < s.rank; ++k) if (s[k] != r[k]) return false;",
        "    return true;",
        "  };",
        "  auto one = [](const lossgrad_shapes::Dims& s) {",
        "    if (s.rank > 1) return false;",
        "    for (size_t k = 0; k < s.rank; ++k) if (s[k] != 1) return false;",
        "    return true;",
        "  };",
        "  const std::string without = lossgrad_shapes::shape_repr(rows) + "
        '" (self without dimension " + std::to_string(cd) + ")";',
    ]
    for i, spec_input in enumerate(op.inputs):
        m = texts[f"shape_{i}"].name
        check = {
            "grad_output": (
                "per_element ? same(in[0].dims, rows) : one(in[0].dims)",
                "per_element ? lossgrad_shapes::shape_repr(rows) + "
                '" (target\'s, for reduction none)" : std::string("one element")',
            ),
            "target": (f"same(in[{i}].dims, rows)", "without"),
            "total_weight": (f"one(in[{i}].dims)", 'std::string("one element")'),
            "weight": (
                f"in[{i}].dims.rank == 1 && in[{i}].dims[0] == x[cd]",
                '"[" + std::to_string(x[cd]) + "] (one per class)"',
            ),
        }.get(spec_input.name)
        if check is None:
            continue
        lines.append(
            f"  if (in[{i}].present && !({check[0]})) return invalid({m}(in[{i}].dims, "
            f"{check[1]}, x));"
        )
    lines += [
        "  OrtValue* output = nullptr;",
        "  LOSSGRAD_TRY(g_api->KernelContext_GetOutput(ctx, 0, x.extent, x.rank, &output));",
        "  NestCall c;",
        "  LOSSGRAD_TRY(g_api->GetTensorMutableData(output, &c.out));",
        "  int k = 0;",
        f"  for (int i = 0; i < {n}; ++i) {{",
        "    if (!in[i].present) continue;",
        "    c.data[k] = in[i].data;",
        "    c.dims[k] = in[i].dims;",
        "    ++k;",
        "  }",
        "  c.ignore_index = a.ignore_index;",
        "  c.ctx = ctx;",
        *(
            f"  c.{cxx_identifier(f.name)} = a.{cxx_identifier(f.name)};"
            for f in float_attributes(op)
        ),
        "  int64_t counts[1] = {0};",
        "  bool ran = false;",
    ]
    weight_k = op.input_names.index("weight")
    for v in class_variants(op):
        if v.name not in nests:
            continue
        condition = " && ".join(
            [
                f"in[kSelf].type == {v.element.onnx}",
                f"in[kTarget].type == {v.index.onnx}",
                f"a.reduction == {v.reduction}",
                f"{'' if v.weight else '!'}in[{weight_k}].present",
                f"x.rank == {v.rank}",
                *_float_forms(v),
            ]
        )
        lines.append(
            f"  if (!ran && {condition}) {{ LOSSGRAD_TRY({v.name}(c, counts)); ran = true; }}"
        )
    lines += [
        "  if (!ran) return failure("
        + cxx_string_literal(op.name + ": no kernel variant for this call")
        + ");",
        f"  if (counts[0] != 0) return invalid({texts['range'].name}(counts[0], "
        "static_cast<int64_t>(x[cd]), a.ignore_index));",
        "  return nullptr;",
        "}",
    ]
    return "".join(m.cxx_function() for m in texts.values()) + "\n".join(lines) + "\n"


def _min_classes(op: spec.OperatorSpec, shape: str) -> list[str]:
    """spec.check_class_shapes' fewest classes, right after self's rank: a gather at an
    invalid row reads class 0 (nest_printer.py), so C = 0 never reaches a kernel."""
    if not op.min_classes:
        return []
    return [
        f"  if (x[cd] < {op.min_classes}) return invalid({shape}(x, "
        f'"C >= {op.min_classes} along dimension " + std::to_string(cd), x));'
    ]


def _float_forms(v: ClassVariant) -> list[str]:
    """The test for each float attribute's form, as level 2 and the reference judge it: the
    value in the compute type above the minimum, or not."""
    compute = spec.compute_type(v.element).cxx
    tests = []
    for attribute, above in zip(float_attributes(v.op), v.above, strict=True):
        minimum = cxx_float_literal(float(attribute.minimum or 0.0), compute)
        test = f"static_cast<{compute}>(a.{cxx_identifier(attribute.name)}) > {minimum}"
        tests.append(test if above else f"!({test})")
    return tests


def _class_dim(op: spec.OperatorSpec) -> str:
    """self's class dimension as C++ of its rank (spec's class_dim per allowed rank)."""
    expression = "0"
    for r in op.class_ranks:
        expression = f"x.rank == {r} ? {op.class_dim(r)} : ({expression})"
    return expression


def class_type_names() -> str:
    return _float_name_function()


def class_registrations(op: spec.OperatorSpec) -> list[str]:
    """One registration per self type (the result's), every other input of any type: the
    kernel checks them with spec's messages."""
    name = cxx_identifier(op.name)
    undefined = "ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED"
    required = len([i for i in op.inputs if not i.optional])
    entries = []
    for t in spec.FLOAT_TYPES:
        onnx = f"static_cast<ONNXTensorElementDataType>({t.onnx})"
        listed = ", ".join(onnx if n == "self" else undefined for n in op.input_names)
        entries.append(
            f"      make_custom_op({cxx_string_literal(op.name)}, {op.since_version}, "
            f"{{{listed}}}, {required}, {onnx}, create_{name}, compute_{name}, destroy_{name}),"
        )
    return entries
