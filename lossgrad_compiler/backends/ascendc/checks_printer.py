"""Print op_api/lossgrad_checks.h: spec.validate's checks in C++, generated from spec.py.

templates/lossgrad_checks.h holds the aclnn side (null pointers, element types, attributes,
the compiled signature, the output); the data comes from spec.py and errors.py here: the
message format, the rank limit, the element type names and the allowed types, and the
wording of each rule. The shape checks are op_api/lossgrad_shapes.h, the C++ the ORT kernels
compile too (backends/cxx_shapes.py). So the aclnn wrapper rejects what `spec.validate` rejects,
with the same message and aclnn code (a test runs both on the same invalid calls).
"""

from __future__ import annotations

from pathlib import Path

from lossgrad_compiler import errors, messages, spec
from lossgrad_compiler.backends.ascendc.cxx import ACL_DTYPES
from lossgrad_compiler.backends.cxx import cxx_identifier, cxx_string_literal
from lossgrad_compiler.backends.cxx_messages import message
from lossgrad_compiler.messages import Kind, Slot, parts_of

TEMPLATE = Path(__file__).parent / "templates" / "lossgrad_checks.h"


_LINE_SLOTS = {
    "op": Kind.TEXT,
    "argument": Kind.TEXT,
    "rule": Kind.TEXT,
    "code": Kind.INT,
    "code_name": Kind.TEXT,
}


def _format_expression(code: int) -> str:
    """errors.LINE as a C++ string expression over op, argument and rule, for `code`."""
    fixed = {"code": code, "code_name": errors.ACLNN_CODE_NAMES[code]}
    parts = parts_of(errors.LINE, _LINE_SLOTS, fixed)
    return " + ".join(p.name if isinstance(p, Slot) else cxx_string_literal(p) for p in parts)


def _rule_messages() -> str:
    """ElementTypeMessage(op, input, type_name) and AttributeValueMessage(op, attribute,
    valid, value), the value already written as Python writes it (an aclnn reduction is
    its int code)."""
    element = message("ElementTypeMessage", messages.ELEMENT_TYPE, allowed=spec.ALLOWED_TYPES)
    value = message("AttributeValueMessage", messages.ATTRIBUTE_VALUE, Kind.TEXT)
    return element.cxx_function() + value.cxx_function()


def print_checks_header(op: spec.OperatorSpec | None = None) -> str:
    """The header of a project (of `op`): the checks every operator shares, and for an
    operator with more inputs than grad_output, self and target, CheckInputs for its inputs
    (an optional one may be null: absent), under a guard of its own so that projects of
    several operators compile together."""
    floats = [ACL_DTYPES[t.name] for t in spec.FLOAT_TYPES]
    cases = "\n".join(
        f"        case {value}: return {cxx_string_literal(name)};"
        for name, value in ACL_DTYPES.items()
    )
    values = {
        "@FORMAT_NULLPTR@": _format_expression(errors.ACLNN_ERR_PARAM_NULLPTR),
        "@FORMAT_INVALID@": _format_expression(errors.ACLNN_ERR_PARAM_INVALID),
        "@DTYPE_CASES@": cases,
        "@FLOAT_TEST@": " || ".join(f"dtype == {v}" for v in floats),
        "@MESSAGES@": _rule_messages(),
        "@ELEMENT_TYPE_CODE@": str(messages.ELEMENT_TYPE.code),
        "@ATTRIBUTE_VALUE_CODE@": str(messages.ATTRIBUTE_VALUE.code),
        "@INPUT_NAMES@": ", ".join(cxx_string_literal(n) for n in spec.INPUT_NAMES),
    }
    text = TEMPLATE.read_text()
    for key, value in values.items():
        text = text.replace(key, value)
    if op is not None and op.has_classes:
        text += _class_inputs(op)
    elif op is not None and len(op.inputs) > len(spec.INPUT_NAMES):
        text += _more_inputs(len(op.inputs))
    return text


def class_checks_names(op: spec.OperatorSpec) -> tuple[str, str, str]:
    """(shapes struct, types check, shapes check) of a classification operator."""
    name = cxx_identifier(op.name)
    return f"ClassShapes_{name}", f"CheckClassTypes_{name}", f"CheckClassShapes_{name}"


def _class_messages() -> str:
    """The messages the class checks add (under a guard: several operators share them)."""
    index = message("IndexTypeMessage", messages.ELEMENT_TYPE, allowed=spec.ALLOWED_INDEX_TYPES)
    rank = message("RankMessage", messages.RANK, max_rank=spec.MAX_RANK)
    same = message("SameTypeMessage", messages.SAME_TYPE)
    shape = message("ClassShapeMessage", messages.CLASS_SHAPE)
    target = message("TargetRangeMessage", messages.TARGET_RANGE)
    body = "".join(m.cxx_function() for m in (index, rank, same, shape, target))
    return (
        "\n#ifndef LOSSGRAD_CLASS_MESSAGES_H\n#define LOSSGRAD_CLASS_MESSAGES_H\n"
        f"namespace lossgrad_checks {{\n\n{body}\n"
        "inline std::string ShapeText(const Dims& dims)\n"
        "{\n    return lossgrad_shapes::shape_repr(dims);\n}\n"
        "\ninline bool OneElement(const Dims& dims)\n{\n"
        "    return dims.size() <= 1 && std::all_of(dims.begin(), dims.end(), "
        "[](int64_t d) { return d == 1; });\n}\n"
        "\n}  // namespace lossgrad_checks\n#endif  // LOSSGRAD_CLASS_MESSAGES_H\n"
    )


def _class_inputs(op: spec.OperatorSpec) -> str:
    """spec.validate's checks of a classification operator, in its order: null (a required
    input), element types (a class index int64 or int32, the others float), ranks, the
    float inputs of self's type (`CheckClassTypes_<op>`); after the attributes, the classes
    shape rule (`CheckClassShapes_<op>`, spec.check_class_shapes), which fills the
    iteration shape: self's."""
    struct, types_fn, shapes_fn = class_checks_names(op)
    n = len(op.inputs)
    names = op.input_names
    k_self = names.index("self")
    params = ", ".join(f"const aclTensor* input{k}" for k in range(n))
    args = ", ".join(f"input{k}" for k in range(n))
    present = ", ".join(f"input{k} != nullptr" for k in range(n))
    index_inputs = ", ".join(
        "true" if i.kind is spec.InputKind.CLASS_INDEX else "false" for i in op.inputs
    )
    index_test = " || ".join(f"dtype == {ACL_DTYPES[t.name]}" for t in spec.INDEX_TYPES)
    ranks = " || ".join(f"x.size() == {r}" for r in op.class_ranks)
    ranks_text = cxx_string_literal(" or ".join(f"rank {r}" for r in op.class_ranks))
    min_classes_check = ""
    if op.min_classes:  # spec's min_classes: the gather of an invalid row reads class 0
        expected = f'std::string("C >= {op.min_classes} along dimension ") + std::to_string(c)'
        min_classes_check = (
            f"    if (x[c] < {op.min_classes}) {{\n"
            f"        return FailLine({messages.CLASS_SHAPE.code}, "
            f'ClassShapeMessage(op, "self", x, {expected}, x));\n'
            "    }\n"
        )
    shape_checks = []
    for k, name in enumerate(names):
        literal = cxx_string_literal(name)
        if name == "target":
            cond = "shapes->inputs[{k}] != rows"
            expected = 'ShapeText(rows) + " (self without dimension " + std::to_string(c) + ")"'
        elif name == "grad_output":
            cond = "(perElement ? shapes->inputs[{k}] != rows : !OneElement(shapes->inputs[{k}]))"
            expected = (
                'perElement ? ShapeText(rows) + " (target\'s, for reduction none)" : '
                'std::string("one element")'
            )
        elif name == "weight":
            cond = "shapes->inputs[{k}] != Dims{{x[c]}}"
            expected = '"[" + std::to_string(x[c]) + "] (one per class)"'
        elif name == "self":
            continue
        else:
            cond = "!OneElement(shapes->inputs[{k}])"
            expected = 'std::string("one element")'
        shape_checks += [
            f"    if (present[{k}] && {cond.format(k=k)}) {{",
            f"        return FailLine({messages.CLASS_SHAPE.code}, ClassShapeMessage(op, "
            f"{literal}, shapes->inputs[{k}], {expected}, x));",
            "    }",
        ]
    shape_lines = "\n".join(shape_checks)
    guard = f"LOSSGRAD_CLASS_CHECKS_{cxx_identifier(op.name).upper()}_H"
    return (
        _class_messages()
        + f"""
#ifndef {guard}
#define {guard}

namespace lossgrad_checks {{

struct {struct} {{
    Dims inputs[{n}];
    bool present[{n}];
    Dims iter;  // self's shape
}};

inline aclnnStatus {types_fn}(const std::string& op,
                               lossgrad_shapes::Failure (*check_present)(const bool[{n}]),
                               const char* const (&names)[{n}], {params}, {struct}* shapes)
{{
    const aclTensor* inputs[{n}] = {{{args}}};
    const bool present[{n}] = {{{present}}};
    const bool classIndex[{n}] = {{{index_inputs}}};
    const lossgrad_shapes::Failure failure = check_present(present);
    if (failure.code != 0) return FailWith(failure);
    for (int k = 0; k < {n}; ++k) {{
        shapes->present[k] = present[k];
        if (inputs[k] == nullptr) continue;  // an absent optional input
        const int dtype = static_cast<int>(inputs[k]->GetDataType());
        if (classIndex[k]) {{
            if (!({index_test})) {{
                return FailLine({messages.ELEMENT_TYPE.code},
                                IndexTypeMessage(op, names[k], DtypeName(dtype)));
            }}
            continue;
        }}
        const aclnnStatus status = CheckElementType(op, names[k], dtype);
        if (status != ACLNN_SUCCESS) return status;
    }}
    for (int k = 0; k < {n}; ++k) {{
        shapes->inputs[k] = inputs[k] ? inputs[k]->GetViewShape().dims() : Dims{{}};
        const int64_t rank = static_cast<int64_t>(shapes->inputs[k].size());
        if (inputs[k] != nullptr && rank > {spec.MAX_RANK}) {{
            return FailLine({messages.RANK.code}, RankMessage(op, names[k], rank));
        }}
    }}
    const int selfType = static_cast<int>(inputs[{k_self}]->GetDataType());
    for (int k = 0; k < {n}; ++k) {{
        if (inputs[k] == nullptr || classIndex[k]) continue;
        const int dtype = static_cast<int>(inputs[k]->GetDataType());
        if (dtype != selfType) {{
            return FailLine({messages.SAME_TYPE.code},
                            SameTypeMessage(op, names[k], DtypeName(selfType), DtypeName(dtype)));
        }}
    }}
    return ACLNN_SUCCESS;
}}

// `none`: reduction none (grad_output then has target's shape when self has a batch).
inline aclnnStatus {shapes_fn}(const std::string& op, bool none, {struct}* shapes)
{{
    const Dims& x = shapes->inputs[{k_self}];
    const bool* present = shapes->present;
    if (!({ranks})) {{
        return FailLine({messages.CLASS_SHAPE.code},
                        ClassShapeMessage(op, "self", x, {ranks_text}, x));
    }}
    const size_t c = x.size() >= 2 ? 1 : 0;
{min_classes_check}    Dims rows;
    for (size_t a = 0; a < x.size(); ++a) {{
        if (a != c) rows.push_back(x[a]);
    }}
    const bool perElement = none && x.size() >= 2;
    (void)perElement;
{shape_lines}
    shapes->iter = x;
    return ACLNN_SUCCESS;
}}

}}  // namespace lossgrad_checks

#endif  // {guard}
"""
    )


def _more_inputs(n: int) -> str:
    """CheckInputs of an operator with `n` inputs, those after the first three optional."""
    params = ", ".join(f"const aclTensor* input{k}" for k in range(n))
    args = ", ".join(f"input{k}" for k in range(n))
    present = ", ".join(f"input{k} != nullptr" for k in range(n))
    return f"""
#ifndef LOSSGRAD_CHECKS_{n}_H
#define LOSSGRAD_CHECKS_{n}_H

namespace lossgrad_checks {{

// An operator of {n} inputs: after grad_output, self and target, optional ones (null: absent).
using PresentCheck{n} = lossgrad_shapes::Failure (*)(const bool present[{n}]);
using ShapeCheck{n} = lossgrad_shapes::Failure (*)(const std::vector<int64_t>* const dims[{n}],
                                                    Dims* b, Dims* iter);

struct CallShapes{n} {{
    Dims inputs[{n}];
    Dims b;
    Dims iter;
}};

// The checks of the {n} inputs in spec.validate's order: null (of a required input), element
// type, rank, broadcast; `names` are the operator's input names.
inline aclnnStatus CheckInputs(const std::string& op, PresentCheck{n} check_present,
                               ShapeCheck{n} check_shapes,
                               const char* const (&names)[{n}], {params},
                               CallShapes{n}* shapes)
{{
    const aclTensor* inputs[{n}] = {{{args}}};
    const bool present[{n}] = {{{present}}};
    lossgrad_shapes::Failure failure = check_present(present);
    if (failure.code != 0) return FailWith(failure);
    for (int k = 0; k < {n}; ++k) {{
        if (inputs[k] == nullptr) continue;  // an absent optional input
        const int dtype = static_cast<int>(inputs[k]->GetDataType());
        const aclnnStatus status = CheckElementType(op, names[k], dtype);
        if (status != ACLNN_SUCCESS) return status;
    }}
    const std::vector<int64_t>* dims[{n}];
    for (int k = 0; k < {n}; ++k) {{
        shapes->inputs[k] = inputs[k] ? inputs[k]->GetViewShape().dims() : Dims{{}};
        dims[k] = inputs[k] ? &shapes->inputs[k] : nullptr;
    }}
    failure = check_shapes(dims, &shapes->b, &shapes->iter);
    if (failure.code != 0) return FailWith(failure);
    return ACLNN_SUCCESS;
}}

}}  // namespace lossgrad_checks

#endif  // LOSSGRAD_CHECKS_{n}_H
"""
