"""Generated C++ never carries text from a model: the library source does not depend on any
model, and every name or string the printer writes goes through a sanitiser."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossgrad_compiler import reference
from lossgrad_compiler.backends.cxx import cxx_identifier, cxx_string_literal
from lossgrad_compiler.backends.ort import build
from lossgrad_compiler.evaluation.ort import run_native
from lossgrad_compiler.targets.ort_library import kernel_library_source as library_source
from lossgrad_compiler.targets.ort_library import library_path
from tests.helpers.cases import make_case
from tests.ort.support import feeds_of, native_library, node_model

HOSTILE = [
    '"); system("rm -rf /"); //',
    "*/ #include </etc/passwd> /*",
    "??=define x \\\n",
    "\x00\x01\xff\ufffd\u202e",
    'ai.lossgrad"\nint main(){}',
]


@given(st.text())
def test_identifiers_are_plain(text: str) -> None:
    name = cxx_identifier(text)
    assert name and name.isascii() and (name.replace("_", "a").isalnum())
    assert not name[0].isdigit() and "__" not in name


@given(st.text())
def test_string_literals_hold_only_safe_characters(text: str) -> None:
    literal = cxx_string_literal(text)
    inner = literal[1:-1]
    assert literal[0] == literal[-1] == '"'
    assert '"' not in inner and "\n" not in inner and "?" not in inner and "*/" not in inner
    assert all(32 <= ord(c) < 127 for c in inner)


def test_string_literals_round_trip_through_the_compiler(tmp_path: Path) -> None:
    """The compiled literals hold exactly the UTF-8 bytes of the hostile strings."""
    strings = HOSTILE
    try:
        tools = build.toolchain()
    except build.NativeUnavailableError as err:
        pytest.skip(str(err))
    body = "".join(
        f"  fwrite({cxx_string_literal(s)}, 1, sizeof({cxx_string_literal(s)}) - 1, stdout);"
        "  fputc(0x1e, stdout);\n"
        for s in strings
    )
    source = f"#include <cstdio>\nint main() {{\n{body}  return 0;\n}}\n"
    cc = tmp_path / "literals.cc"
    exe = tmp_path / "literals"
    cc.write_text(source)
    subprocess.run([*tools.compiler, str(cc), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True).stdout
    assert out.split(b"\x1e")[:-1] == [s.encode("utf-8") for s in strings]


def test_library_source_is_model_independent_and_plain_ascii() -> None:
    source = library_source()
    assert source.isascii()
    for s in HOSTILE:
        assert s not in source


def test_hostile_node_names_and_docs_do_not_reach_the_library() -> None:
    native_library()
    before = library_path()
    case = make_case("KlDivBackward", {"reduction": "sum"}, (2, 3), (3,), ())
    dtypes = tuple(case.inputs[n].dtype for n in ("grad_output", "self", "target"))
    shapes = tuple(case.inputs[n].shape for n in ("grad_output", "self", "target"))
    for hostile in HOSTILE:
        model = node_model(
            case.op_type,
            case.attrs,
            dtypes,
            shapes,
            (case.result_dtype, case.result_shape),
            node_name=hostile,
        )
        model.doc_string = hostile
        model.graph.node[0].doc_string = hostile
        got = run_native(model, feeds_of(case.inputs))[0]
        expected = reference.evaluate(case.op_type, case.inputs, case.attrs)
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert library_path() == before
    assert library_source() == library_source.__wrapped__()
