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


def print_checks_header() -> str:
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
    return text
