"""Per-operator C++ glue, generated from spec.py: attribute reading and checks (defaults,
choices, minimum and maximum, messages), the run-time shape checks in spec.validate's order, and the
dispatch from (attribute classes, shape pattern) to a printed variant."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from onnx import TensorProto

from lossgrad_compiler import spec
from lossgrad_compiler.backends.cxx import cxx_identifier, cxx_string_literal
from lossgrad_compiler.backends.cxx_messages import (
    Message,
    attribute_messages,
    element_type_message,
    unknown_attribute_message,
)
from lossgrad_compiler.backends.cxx_shapes import check_present_name, check_shapes_name
from lossgrad_compiler.backends.ort.cxx_text import cxx_float_literal
from lossgrad_compiler.backends.ort.variants import (
    GIVEN_BITS,
    SELF_AND_TARGET,
    KernelTypes,
    attribute_classes,
    class_label,
    kernel_signatures,
    kernel_types,
    operand_constant,
)
from lossgrad_compiler.onnx.type_protos import element_key


def given_constant(name: str) -> str:
    """The C++ name of an optional input's slot bit: `weight` → `kGivenWeight`."""
    return "kGiven" + "".join(word.capitalize() for word in name.split("_"))


# Slots: bit 0 self is 0-d, bit 1 target is 0-d, bit 2 the result is summed, then one bit per
# optional input given (variants.GIVEN_BITS).
SLOT_BITS = (
    ("kSelf0", 1),
    ("kTarget0", 2),
    ("kSummed", 4),
    *((given_constant(name), bit) for name, bit in GIVEN_BITS.items()),
)
"""The C++ names of the slot bits (print_constants defines them; glue.h's rank0_pattern
gives the first two)."""
NUM_SLOTS = 8 << len(GIVEN_BITS)


def given_label(slot: int) -> str:
    """The optional inputs a slot has given, as the kernels' labels say them: `, with weight`."""
    return "".join(f", with {name}" for name, bit in GIVEN_BITS.items() if slot & bit)


def slot_expression(slot: int) -> str:
    """A slot as the C++ of its named bits: `kSelf0 | kSummed`, `kFull` for none."""
    names = [name for name, bit in SLOT_BITS if slot & bit]
    return " | ".join(names) if names else "kFull"


def print_constants() -> str:
    """The named counts, operand indices and masks the glue uses, from spec; the iteration
    templates (cxx/iteration.h) are written for kNumOperands operands, at least as many as
    any operator has inputs."""
    operands = [
        f"constexpr int {operand_constant(name)} = {k};" for k, name in enumerate(spec.INPUT_NAMES)
    ]
    slots = [f"constexpr int {name} = {bit};" for name, bit in SLOT_BITS]
    most = max(len(op.inputs) for op in spec.OPERATORS.values())
    return "\n".join(
        [
            "namespace lossgrad {",
            "// The inputs every operator takes first, in spec.INPUT_NAMES order: operand k is",
            "// input k; bit k of an operand mask stands for operand k. Optional inputs follow,",
            "// each given one as the next operand.",
            *operands,
            f"constexpr int kMaxInputs = {most};  // the most inputs an operator has",
            "static_assert(kMaxInputs <= kNumOperands, "
            '"cxx/iteration.h is written for fewer operands than an operator has inputs");',
            f"constexpr unsigned {SELF_AND_TARGET} = "
            f"(1u << {operand_constant('self')}) | (1u << {operand_constant('target')});"
            "  // B = broadcast(self, target)",
            "// The slot of a call within its attribute class: which of self and target are 0-d,",
            "// whether the result is summed into an operand's shape, which optional inputs are",
            "// given.",
            "constexpr int kFull = 0;",
            *slots,
            f"constexpr int kSlots = {NUM_SLOTS};  // slots per attribute class",
            "constexpr int variant_key(int attribute_class, int slot) {",
            "  return attribute_class * kSlots + slot;",
            "}",
            "}  // namespace lossgrad",
            "",
        ]
    )


def attrs_struct_name(op: spec.OperatorSpec) -> str:
    return f"Attrs_{cxx_identifier(op.name)}"


def foreign_attribute_names(op: spec.OperatorSpec) -> list[str]:
    """Names a node of `op` must not carry that its kernel can ask ORT about (ORT cannot list
    a node's attributes): every attribute name of every ai.lossgrad operator and its usual
    respellings, less `op`'s own names; sorted, so the first one present is the one spec
    reports."""
    names = {a.name for other in spec.OPERATORS.values() for a in other.attributes}
    spellings: set[str] = set()
    for name in names:
        words = name.split("_")
        spellings |= {
            name,
            name.upper(),
            name.capitalize(),
            "".join(words),
            "-".join(words),
            words[0] + "".join(w.capitalize() for w in words[1:]),
            "".join(w.capitalize() for w in words),
        }
    return sorted(spellings - {a.name for a in op.attributes})


def print_attribute_reader(op: spec.OperatorSpec) -> str:
    """Messages, the attribute struct, and create/destroy functions of one op. The checks
    run in the compiler's order: every attribute's ONNX type, then unknown names, then every
    value (onnx.attributes.attributes_from_protos, spec.check_attributes)."""
    name = cxx_identifier(op.name)
    struct = attrs_struct_name(op)
    messages = []
    fields = []
    types = []
    values = []
    for attribute in op.attributes:
        field = cxx_identifier(attribute.name)
        read = f"v_{field}"
        texts = attribute_messages(op, attribute)
        messages += [m.cxx_function() for m in texts.values()]
        type_message, value_message = texts["type"].name, texts["value"].name
        if attribute.kind is spec.AttrKind.FLOAT:
            kind = "kFloat"
        elif attribute.kind is spec.AttrKind.STRING:
            kind = "kString"
        else:
            kind = "kInt"
        types.append(
            f"  const AttrValue {read} = read_attribute(info, "
            f"{cxx_string_literal(attribute.name)});\n"
            f"  if ({read}.type != AttrType::kAbsent && {read}.type != AttrType::{kind})\n"
            f"    return invalid({type_message}(onnx_attr_type_name({read}.type)));\n"
        )
        if attribute.kind is spec.AttrKind.FLOAT:
            fields.append(f"  double {field};  // the value, widened exactly")
            minimum = attribute.minimum if attribute.minimum is not None else float("-inf")
            below = "<=" if attribute.exclusive else "<"  # the values spec rejects
            outside = f"x {below} {cxx_float_literal(minimum, 'double')}"
            if attribute.maximum is not None:
                outside += f" || x > {cxx_float_literal(attribute.maximum, 'double')}"
            values.append(
                f"  if ({read}.type == AttrType::kAbsent) {{\n"
                f"    a->{field} = {cxx_float_literal(float(attribute.default), 'double')};\n"
                f"  }} else {{\n"
                f"    const double x = static_cast<double>({read}.f);\n"
                f"    if (std::isnan(x) || {outside})  // not spec's in_range\n"
                f"      return invalid({value_message}(x));\n"
                f"    a->{field} = x;\n  }}\n"
            )
            continue
        if attribute.choices is None:  # a free INT (ignore_index): the value itself
            fields.append(f"  int64_t {field};  // the value")
            values.append(
                f"  a->{field} = {read}.type == AttrType::kAbsent ? "
                f"int64_t{{{int(attribute.default)}}} : {read}.i;\n"
            )
            continue
        fields.append(f"  int {field};  // index among the choices")
        default_index = attribute.choices.index(attribute.default)
        if attribute.kind is spec.AttrKind.STRING:
            member = f"{read}.s"
            choices = ", ".join(cxx_string_literal(str(c)) for c in attribute.choices)
            decl = f"static const char* const choices[] = {{{choices}}};"
        else:
            member = f"{read}.i"
            choices = ", ".join(f"int64_t{{{int(c)}}}" for c in attribute.choices)
            decl = f"static const int64_t choices[] = {{{choices}}};"
        values.append(
            f"  if ({read}.type == AttrType::kAbsent) {{\n"
            f"    a->{field} = {default_index};\n"
            f"  }} else {{\n"
            f"    {decl}\n"
            f"    int found = -1;\n"
            f"    for (int k = 0; k < {len(attribute.choices)}; ++k)\n"
            f"      if ({member} == choices[k]) found = k;\n"
            f"    if (found < 0) return invalid({value_message}({member}));\n"
            f"    a->{field} = found;\n  }}\n"
        )
    if op.optional_inputs and not op.has_classes:
        fields.append("  Promotion promotion;  // the compute type (print_compute_dispatch)")
        values.append("  a->promotion = declared_promotion(info);\n")
    unknown = unknown_attribute_message(op)
    messages.append(unknown.cxx_function())
    foreign = ", ".join(cxx_string_literal(n) for n in foreign_attribute_names(op))
    probe = (
        f"  static const char* const foreign[] = {{{foreign}}};\n"
        "  for (const char* other : foreign)\n"
        f"    if (attribute_present(info, other)) return invalid({unknown.name}(other));\n"
    )
    return (
        "".join(messages)
        + f"struct {struct} {{\n"
        + "\n".join(fields)
        + "\n};\n"
        + f"OrtStatus* create_{name}(const OrtKernelInfo* info, void** kernel) {{\n"
        + f"  auto a = std::make_unique<{struct}>();\n"
        + "".join(types)
        + probe
        + "".join(values)
        + "  *kernel = a.release();\n  return nullptr;\n}\n"
        + f"void destroy_{name}(void* kernel) {{ delete static_cast<{struct}*>(kernel); }}\n"
    )


def print_shape_checks(op: spec.OperatorSpec) -> str:
    """The run-time validation of one op (backends/cxx_shapes.py, shared with the aclnn
    wrappers, and the element types of the optional inputs, which the registration leaves
    open) as a function that fills a Call (the given inputs as its operands, in order;
    shapes, iteration space, result shape) or returns the error status."""
    name = cxx_identifier(op.name)
    n = len(op.inputs)
    follows = operand_constant(op.differentiates) if op.differentiates else None
    lines = [
        f"OrtStatus* check_{name}(OrtKernelContext* ctx, Call* c, lossgrad_shapes::Dims* "
        "result_dims) {",
        "  // Shapes are held in place (lossgrad_shapes::Dims): a call allocates nothing.",
        "  Input in[kMaxInputs];",
        "  size_t given = 0;",
        "  LOSSGRAD_TRY(g_api->KernelContext_GetInputCount(ctx, &given));",
        f"  for (size_t i = 0; i < std::min<size_t>(given, {n}); ++i)",
        "    LOSSGRAD_TRY(read_input(ctx, i, &in[i]));",
        f"  const bool present[{n}] = {{{', '.join(f'in[{i}].present' for i in range(n))}}};",
        f"  const lossgrad_shapes::Failure missing = {check_present_name(op)}(present);",
        "  if (missing.code) return invalid(missing.message);",
    ]
    messages = element_type_messages(op)
    for i, spec_input in enumerate(op.inputs):
        if spec_input.optional:
            m = messages[spec_input.name]
            lines += [
                f"  if (in[{i}].present && !is_float(in[{i}].type))",
                f"    return invalid({m.name}(onnx_element_name(in[{i}].type)));",
            ]
    dims = ", ".join(f"in[{i}].present ? &in[{i}].dims : nullptr" for i in range(n))
    lines += [
        f"  const lossgrad_shapes::Dims* const dims[{n}] = {{{dims}}};",
        "  lossgrad_shapes::Dims b, space;",
        f"  const lossgrad_shapes::Failure mismatch = {check_shapes_name(op)}(dims, &b, &space);",
        "  if (mismatch.code) return invalid(mismatch.message);",
        "  c->operands = 0;",
        "  c->given = 0;",
        f"  for (int i = 0; i < {n}; ++i) {{",
        "    if (!in[i].present) continue;",
        "    c->shapes.operand[c->operands] = to_shape(in[i].dims);",
        "    c->data[c->operands] = in[i].data;",
        "    c->type[c->operands] = in[i].type;",
        "    ++c->operands;",
        "  }",
    ]
    for i, spec_input in enumerate(op.inputs):
        if spec_input.optional:
            lines.append(f"  if (in[{i}].present) c->given |= {given_constant(spec_input.name)};")
    lines += [
        "  c->space = to_shape(space);",
        f"  *result_dims = {f'in[{follows}].dims' if follows is not None else 'space'};",
        "  c->result = to_shape(*result_dims);",
        "  c->ctx = ctx;",
        "  c->reduces = " + ("is_summed(c->result, c->space);" if op.sums_result else "false;"),
        "  return nullptr;",
        "}",
    ]
    return "".join(m.cxx_function() for m in messages.values()) + "\n".join(lines) + "\n"


def print_compute(
    op: spec.OperatorSpec,
    types: KernelTypes,
    slots: Mapping[tuple[tuple[int, ...], int], tuple[str, str, tuple[str, ...]]],
) -> str:
    """compute_<op>_<compute>_<result>: validate, allocate the output, pick the variant, run
    it.

    `slots` maps (attribute class indices, pattern slot) to (kernel struct, parameter
    function, marker names)."""
    name = cxx_identifier(op.name)
    type_name = cxx_identifier(types.name)
    compute = types.compute.cxx
    # The class index of every attribute, combined into one number (mixed radix).
    terms = []
    radix = 1
    for attribute in reversed(op.attributes):
        field = cxx_identifier(attribute.name)
        count = len(attribute_classes(attribute))
        if count == 1:  # one level-2 form for every value (delta > 0)
            continue
        if attribute.kind is spec.AttrKind.FLOAT:
            minimum = cxx_float_literal(float(attribute.minimum or 0.0), compute)
            index = f"(static_cast<{compute}>(a.{field}) > {minimum} ? 1 : 0)"
        else:
            index = f"a.{field}"
        terms.append(f"{index} * {radix}" if radix != 1 else index)
        radix *= count
    calls: dict[str, list[str]] = {}  # one return statement → its case labels
    for (classes, slot), (kernel, params, arguments) in sorted(slots.items()):
        combined = 0
        scale = 1
        for attribute, k in reversed(list(zip(op.attributes, classes, strict=True))):
            combined += k * scale
            scale *= len(attribute_classes(attribute))
        args = "".join(f", {argument}" for argument in arguments)
        call = f"return run_variant<variants::{kernel}>(c, variants::{params}(c.shapes{args}));"
        calls.setdefault(call, []).append(
            f"    case variant_key({combined}, {slot_expression(slot)}):"
            f"  // {class_label(op, classes)}{given_label(slot)}"
        )
    cases = [line for call, labels in calls.items() for line in [*labels, f"      {call}"]]
    struct_name = attrs_struct_name(op)
    return (
        f"OrtStatus* compute_{name}_{type_name}(const void* kernel, OrtKernelContext* ctx) {{\n"
        f"  const {struct_name}& a = *static_cast<const {struct_name}*>(kernel);\n"
        "  Call c;\n  lossgrad_shapes::Dims result_dims;\n"
        f"  LOSSGRAD_TRY(check_{name}(ctx, &c, &result_dims));\n"
        "  OrtValue* output = nullptr;\n"
        "  LOSSGRAD_TRY(g_api->KernelContext_GetOutput(ctx, 0, result_dims.extent, "
        "result_dims.rank, &output));\n"
        "  LOSSGRAD_TRY(g_api->GetTensorMutableData(output, &c.out));\n"
        f"  const int attribute_class = {' + '.join(terms)};\n"
        "  const int slot = c.rank0_pattern() | (c.reduces ? kSummed : kFull) | c.given;\n"
        "  switch (variant_key(attribute_class, slot)) {\n"
        + "\n".join(cases)
        + "\n    default: break;\n  }\n"
        f"  return failure({cxx_string_literal(op.name + ': no kernel variant for this call')});\n"
        "}\n"
    )


def print_registration(ops: list[spec.OperatorSpec], extra: list[str] | None = None) -> str:
    """The table of custom ops and RegisterCustomOps: each op once per combination of its
    required inputs' element types (an optional input takes any type), run by the compute
    function of its kernel types, or, where optional inputs may widen the compute type, by
    the function that picks it (print_compute_dispatch)."""
    entries = []
    for op in ops:
        name = cxx_identifier(op.name)
        for inputs in itertools.product(spec.FLOAT_TYPES, repeat=len(spec.INPUT_NAMES)):
            types = kernel_types(op, inputs)
            listed = ", ".join(
                [*(_onnx_type(t) for t in inputs), *(_UNDEFINED for _ in op.optional_inputs)]
            )
            compute = (
                f"compute_{name}_to_{cxx_identifier(types.result.name)}"
                if op.optional_inputs
                else f"compute_{name}_{cxx_identifier(types.name)}"
            )
            entries.append(
                f"      make_custom_op({cxx_string_literal(op.name)}, {op.since_version}, "
                f"{{{listed}}}, {len(spec.INPUT_NAMES)}, {_onnx_type(types.result)}, "
                f"create_{name}, {compute}, destroy_{name}),"
            )
    entries += extra or []
    return (
        "std::vector<CustomOp>& all_ops() {\n"
        "  static std::vector<CustomOp> ops = {\n" + "\n".join(entries) + "\n  };\n"
        "  return ops;\n}\n"
        "}  // namespace lossgrad\n\n"
        'extern "C" __attribute__((visibility("default")))\n'
        "OrtStatus* RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* base) {\n"
        "  const OrtApi* api = base->GetApi(ORT_API_VERSION);\n"
        "  if (!api) {  // a runtime older than the headers answers through API 1\n"
        "    const std::string m = std::string("
        + cxx_string_literal("the lossgrad kernel library needs ONNX Runtime API ")
        + ") + std::to_string(ORT_API_VERSION) + "
        + cxx_string_literal(", found ")
        + " + base->GetVersionString();\n"
        "    return base->GetApi(1)->CreateStatus(ORT_FAIL, m.c_str());\n  }\n"
        "  lossgrad::g_api = api;\n"
        "  static OrtCustomOpDomain* domain = nullptr;  // lives as long as the process\n"
        "  if (!domain) {\n"
        f"    LOSSGRAD_TRY(api->CreateCustomOpDomain({cxx_string_literal(spec.DOMAIN)}, "
        "&domain));\n"
        "    for (lossgrad::CustomOp& op : lossgrad::all_ops())\n"
        "      LOSSGRAD_TRY(api->CustomOpDomain_Add(domain, &op));\n"
        "  }\n"
        "  return api->AddCustomOpDomain(options, domain);\n}\n"
    )


def _onnx_type(element: spec.FloatType) -> str:
    return f"static_cast<ONNXTensorElementDataType>({element.onnx})"


_UNDEFINED = "ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED"


def print_compute_dispatch(op: spec.OperatorSpec) -> str:
    """For an op with optional inputs: per result type, the compute function of the compute
    type every input given promotes to (double where one of them is, else float), as the
    node's declared types decide it when ORT creates the kernel (declared_promotion in
    glue.h; a call asks its inputs only where the graph does not say); an input of another
    type is left to check_<op>, which rejects it with spec's message."""
    if not op.optional_inputs:
        return ""
    if not op.differentiates:
        raise ValueError(
            f"{op.name}: optional inputs need a result type that does not depend on them"
        )
    name = cxx_identifier(op.name)
    by_result: dict[spec.FloatType, list[KernelTypes]] = {}
    for types in kernel_signatures(op):
        by_result.setdefault(types.result, []).append(types)
    out = []
    for result, choices in by_result.items():
        computes = {t.compute: t for t in choices}
        body = []
        if spec.FLOAT64 in computes and spec.FLOAT32 in computes:
            f64 = cxx_identifier(computes[spec.FLOAT64].name)
            f32 = cxx_identifier(computes[spec.FLOAT32].name)
            body += [
                f"  const Promotion promotion = static_cast<const {attrs_struct_name(op)}*>"
                "(kernel)->promotion;",
                "  bool wide = promotion == Promotion::kDouble;",
                "  if (promotion == Promotion::kAtRun) LOSSGRAD_TRY(any_double_input(ctx, &wide));",
                f"  return wide ? compute_{name}_{f64}(kernel, ctx) : "
                f"compute_{name}_{f32}(kernel, ctx);",
            ]
        else:
            (only,) = computes.values()
            body.append(f"  return compute_{name}_{cxx_identifier(only.name)}(kernel, ctx);")
        out.append(
            f"OrtStatus* compute_{name}_to_{cxx_identifier(result.name)}(const void* kernel, "
            "OrtKernelContext* ctx) {\n" + "\n".join(body) + "\n}\n"
        )
    return "".join(out)


def element_type_messages(op: spec.OperatorSpec) -> dict[str, Message]:
    """spec's element-type message of each optional input (the registration takes any type
    there), with the ONNX type's name as a slot."""
    return {i.name: element_type_message(op, i) for i in op.inputs if i.optional}


def print_element_names() -> str:
    """onnx_element_name(type): how spec names a non-float ONNX element type in a message
    (onnx.type_protos.element_key: the ONNX name in lower case)."""
    cases = []
    for code in TensorProto.DataType.values():
        if code and spec.float_type(code) is None:
            cases.append(f"    case {code}: return {cxx_string_literal(element_key(code))};")
    return (
        "namespace lossgrad {\n"
        "inline const char* onnx_element_name(ONNXTensorElementDataType type) {\n"
        "  switch (static_cast<int>(type)) {\n" + "\n".join(cases) + "\n"
        '    default: return "an unknown element type";\n  }\n}\n}  // namespace lossgrad\n'
    )
