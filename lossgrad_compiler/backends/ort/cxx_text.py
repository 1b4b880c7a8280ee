"""C++ spelling of level-2 types and constants, and the sanitisers every printed name or string
goes through: generated source never contains raw text from outside the compiler."""

from __future__ import annotations

import math
import re

from xdsl.dialects.builtin import IndexType, IntegerType
from xdsl.ir import Attribute

from lossgrad_compiler.backends.ort.errors import OrtBackendError
from lossgrad_compiler.dialects.lossgrad import element_float_type


def cxx_type(t: Attribute) -> str:
    """The C++ type that holds a level-2 scalar of type `t`."""
    float_type = element_float_type(t)
    if float_type is not None:
        return float_type.cxx
    if isinstance(t, IndexType):
        return "uint64_t"
    if isinstance(t, IntegerType):
        width = t.width.data
        if width == 1:
            return "bool"
        if width == 64:
            return "int64_t"
    raise OrtBackendError(f"the ORT backend has no C++ type for {t}")


def cxx_float_literal(value: float, type_name: str) -> str:
    """An exact C++ literal of `value` (already rounded to its type) as `type_name`."""
    if math.isnan(value):
        return f"std::numeric_limits<{type_name}>::quiet_NaN()"
    if math.isinf(value):
        sign = "-" if value < 0 else ""
        return f"{sign}std::numeric_limits<{type_name}>::infinity()"
    return f"static_cast<{type_name}>({float(value).hex()})"


_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


def cxx_identifier(text: str) -> str:
    """`text` reduced to a C++ identifier: anything but [A-Za-z0-9_] becomes `_`, a leading
    digit gets a prefix, and reserved double underscores are broken up."""
    name = _IDENTIFIER.sub("_", text) or "_"
    if name[0].isdigit():
        name = "n_" + name
    while "__" in name:
        name = name.replace("__", "_u")
    return name


def cxx_string_literal(text: str) -> str:
    """A C++ narrow string literal whose bytes are the UTF-8 of `text`: only alphanumerics,
    spaces and a few punctuation characters appear as themselves, every other byte is an
    octal escape (so no quote, backslash, newline, trigraph or `*/` survives)."""
    safe = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,:;=()[]<>+-'")
    out = []
    for byte in text.encode("utf-8"):
        out.append(chr(byte) if byte in safe else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'
