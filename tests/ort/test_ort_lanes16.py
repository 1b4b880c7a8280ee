"""Which native kernels run their body on 16 lanes at a time (kLanes16, cxx/iteration.h's
value_lanes16): exactly those whose operands, result and every body value are float32 (or a
comparison's flag), printed with `auto` so that one body serves a float and 16 of them. A
body that rounds to a half type midway, or computes in double, keeps its typed form."""

from __future__ import annotations

import re

import pytest

from lossgrad_compiler.backends.ort.variant_printer import NUM_OPERANDS
from tests.ort.support import kernel_structs


@pytest.fixture(scope="module")
def kernels() -> list[tuple[str, str]]:
    found = kernel_structs()
    assert found
    return found


def all_float(body: str) -> bool:
    """The operands the body reads and its result float, and no value of the body of another
    type (a half type's rounding, a double): read from the types the iteration declares, the
    operands it uses and the conversions."""
    types = {re.search(r"using Val = (\w+);", body).group(1)}
    for i in range(NUM_OPERANDS):
        if f"kUses{i} = true;" in body:
            types.add(re.search(rf"using L{i} = (\w+);", body).group(1))
    return types == {"float"} and "convert<" not in body


def test_lanes16_exactly_where_everything_is_float(kernels: list[tuple[str, str]]) -> None:
    for name, body in kernels:
        lanes = "kLanes16 = true;" in body
        assert lanes == all_float(body), name
        assert ("static inline auto value(" in body) == lanes, name
    flags = [("kLanes16 = true;" in body) for _, body in kernels]
    assert any(flags) and not all(flags)


def test_typed_bodies_keep_their_types(kernels: list[tuple[str, str]]) -> None:
    """A body not run on lanes declares each value's C++ type (no `auto`)."""
    for name, body in kernels:
        if "kLanes16 = false;" in body:
            assert "const auto" not in body, name
            assert "static inline Val value(" in body, name
