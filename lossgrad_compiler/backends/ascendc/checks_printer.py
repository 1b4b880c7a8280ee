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

from lossgrad_compiler import errors, spec
from lossgrad_compiler.backends.ascendc.cxx import ACL_DTYPES
from lossgrad_compiler.backends.cxx import cxx_string_literal

TEMPLATE = Path(__file__).parent / "templates" / "lossgrad_checks.h"


def _format_expression(code: int) -> str:
    """errors.format_error as a C++ string expression over op, argument and rule."""
    text = errors.format_error("\x01", "\x02", "\x03", code)
    head, rest = text.split("\x01")
    middle, rest = rest.split("\x02")
    before_rule, tail = rest.split("\x03")
    return (
        f"{cxx_string_literal(head)} + op + {cxx_string_literal(middle)} + argument + "
        f"{cxx_string_literal(before_rule)} + rule + {cxx_string_literal(tail)}"
    )


def print_checks_header(op: spec.OperatorSpec | None = None) -> str:
    """The header of a project (of `op`): the checks every operator shares, and for an
    operator with more inputs than grad_output, self and target, CheckInputs for its inputs
    (an optional one may be null: absent), under a guard of its own so that projects of
    several operators compile together."""
    allowed = ", ".join(t.name for t in spec.FLOAT_TYPES)
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
        "@ELEMENT_TYPE_RULE@": cxx_string_literal(f"element type must be one of {allowed}, got "),
        "@INPUT_NAMES@": ", ".join(cxx_string_literal(n) for n in spec.INPUT_NAMES),
    }
    text = TEMPLATE.read_text()
    for key, value in values.items():
        text = text.replace(key, value)
    if op is not None and len(op.inputs) > len(spec.INPUT_NAMES):
        text += _more_inputs(len(op.inputs))
    return text


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
