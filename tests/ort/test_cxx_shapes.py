"""The two C++ backends check shapes with one piece of C++ generated from spec.py: the ORT
kernel library compiles `lossgrad_shapes_source()` and every Ascend C project ships it as
op_api/lossgrad_shapes.h (both backends' message tests then check its behaviour)."""

from __future__ import annotations

from pathlib import Path

from lossgrad_compiler import examples, spec
from lossgrad_compiler.backends.ascendc import emit_project
from lossgrad_compiler.backends.cxx_shapes import lossgrad_shapes_header, lossgrad_shapes_source
from lossgrad_compiler.pipeline import lowered_model
from lossgrad_compiler.targets.ort_library import kernel_library_source as library_source


def test_the_ort_library_compiles_the_shared_checks() -> None:
    source = library_source()
    assert lossgrad_shapes_source() in source
    for name in ("broadcast_two", "shape_repr", "float_repr"):
        assert (
            source.count(f"inline std::string {name}(") + source.count(f"inline Conflict {name}(")
            == 1
        ), f"{name} is defined more than once"
    for op in spec.BROADCAST_OPERATORS.values():
        assert f"lossgrad_shapes::check_shapes_{op.name}(dims, &b, &space)" in source


def test_every_ascendc_project_ships_the_same_checks(tmp_path: Path) -> None:
    _, module = lowered_model(examples.example_model())
    emit_project(module, tmp_path)
    headers = sorted(tmp_path.rglob("op_api/lossgrad_shapes.h"))
    assert len(headers) == len(examples.example_model().graph.node)  # one project per node
    for header in headers:
        assert header.read_text() == lossgrad_shapes_header()
        wrapper = next(header.parent.glob("aclnn_*.cpp")).read_text()
        assert "lossgrad_shapes::check_present_" in wrapper
        # the classification operators check the classes rule instead of broadcasting
        assert ("lossgrad_shapes::check_shapes_" in wrapper) != ("CheckClassShapes_" in wrapper)
    checks = (headers[0].parent / "lossgrad_checks.h").read_text()
    assert "Broadcast(" not in checks and "PyFloatRepr" not in checks
