"""Imports point one way: spec → dialects → passes → frontend → backends → runtime → pipeline
→ targets/driver/evaluation → cli.

The graph comes from the source (tests/helpers/imports.py): module-level imports between the
project's modules, `if TYPE_CHECKING:` blocks left out (annotations only). A module may
import its own layer and the layers below it; there is no cycle; an import inside a function
exists only to defer a heavy dependency, and a comment beside it says which. runtime/ loads
and runs what a target made: no module of it imports the driver, the pipeline or the
lowering, anywhere in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.imports import (
    cycles,
    every_import,
    import_graph,
    layer_of,
    module_files,
    wrong_way,
)

LAYERS: list[tuple[str, list[str]]] = [
    (
        "spec",
        [
            "lossgrad_compiler.errors",
            "lossgrad_compiler.messages",
            "lossgrad_compiler.spec",
            "lossgrad_compiler.lazy_factories",
        ],
    ),
    (
        "ONNX helpers, reference and calls",
        ["lossgrad_compiler.reference", "lossgrad_compiler.onnx", "lossgrad_compiler.calls"],
    ),
    ("graph fusion", ["lossgrad_compiler.fusion"]),
    ("dialects", ["lossgrad_compiler.dialects", "lossgrad_compiler.context"]),
    ("level 2", ["lossgrad_compiler.level2", "lossgrad_compiler.interpreter"]),
    ("passes", ["lossgrad_compiler.passes"]),
    ("frontend", ["lossgrad_compiler.frontend"]),
    ("backends", ["lossgrad_compiler.backends"]),
    ("runtime", ["lossgrad_compiler.runtime"]),
    ("pipeline", ["lossgrad_compiler.pipeline"]),
    (
        "targets and driver",
        [
            "lossgrad_compiler.torch",
            "lossgrad_compiler.targets",
            "lossgrad_compiler.driver",
            "lossgrad_compiler.evaluation",
            "lossgrad_compiler.model_files",
            "lossgrad_compiler.output_files",
        ],
    ),
    (
        "entry points",
        [
            "lossgrad_compiler",
            "lossgrad_compiler.universe",
            "lossgrad_compiler.cli",
            "lossgrad_compiler.opt",
            "lossgrad_compiler.demo",
            "lossgrad_compiler.examples",
        ],
    ),
]

MODULES = module_files()
GRAPH = import_graph(MODULES)


def test_every_module_belongs_to_a_layer() -> None:
    for module in MODULES:
        layer_of(module, LAYERS)


def test_imports_point_down_the_layers() -> None:
    assert wrong_way(GRAPH.edges, LAYERS) == []


@pytest.mark.parametrize(
    ("importer", "forbidden"),
    [
        ("lossgrad_compiler.passes", "lossgrad_compiler.backends"),
        ("lossgrad_compiler.dialects", "lossgrad_compiler.passes"),
        ("lossgrad_compiler.dialects", "lossgrad_compiler.backends"),
        ("lossgrad_compiler.backends", "lossgrad_compiler.driver"),
        ("lossgrad_compiler.backends", "lossgrad_compiler.cli"),
        ("lossgrad_compiler.backends", "lossgrad_compiler.runtime"),
        ("lossgrad_compiler.backends", "lossgrad_compiler.targets"),
        ("lossgrad_compiler.targets", "lossgrad_compiler.driver"),
        ("lossgrad_compiler.targets", "lossgrad_compiler.cli"),
    ],
)
def test_named_directions(importer: str, forbidden: str) -> None:
    """The issue's rules by name, also for imports inside functions."""
    inside = [
        f"{i.module}:{i.line} imports {i.imported}"
        for i in GRAPH.local_imports
        if _within(i.module, importer) and _within(i.imported, forbidden)
    ]
    at_module_level = [
        f"{m} imports {t}"
        for m, targets in GRAPH.edges.items()
        if _within(m, importer)
        for t in targets
        if _within(t, forbidden)
    ]
    assert at_module_level + inside == []


RUNTIME_MAY_NOT_IMPORT = (
    "lossgrad_compiler.driver",
    "lossgrad_compiler.pipeline",
    "lossgrad_compiler.frontend",  # its package imports the lowering
    "lossgrad_compiler.passes.lower_lossgrad",
    "lossgrad_compiler.evaluation",
    "lossgrad_compiler.targets",
)
"""What compiles: runtime/ gets what a target made and never reaches back for it."""


def runtime_imports_that_compile(modules: dict[str, Path]) -> list[str]:
    """Every import, anywhere in a module of runtime/, of what compiles."""
    return [
        f"{module}:{line} imports {name}"
        for module, path in modules.items()
        if _within(module, "lossgrad_compiler.runtime")
        for line, name in every_import(module, path)
        if any(_within(name, forbidden) for forbidden in RUNTIME_MAY_NOT_IMPORT)
    ]


def test_runtime_imports_neither_the_driver_nor_the_lowering() -> None:
    """Checked on every import statement of runtime/ (ast), deferred ones and annotations
    included: the pipeline hands runtime/ only what a target made."""
    assert runtime_imports_that_compile(MODULES) == []


def test_no_import_cycle() -> None:
    assert cycles(GRAPH.edges) == []


def test_imports_inside_functions_say_what_they_defer() -> None:
    bare = [
        f"{i.module}:{i.line} imports {i.imported}"
        for i in GRAPH.local_imports
        if "defer" not in i.comment
    ]
    assert bare == []


def test_imports_inside_functions_never_point_up() -> None:
    """A deferred import still respects the layers."""
    up = [
        f"{i.module}:{i.line} imports {i.imported}"
        for i in GRAPH.local_imports
        if i.imported.startswith("lossgrad_compiler")
        and layer_of(i.imported, LAYERS) > layer_of(i.module, LAYERS)
    ]
    assert up == []


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# --------------------------------------------------------------------------- the checker


def _tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return module_files(root, {"pkg": "pkg"})


TOY_LAYERS = [("low", ["pkg.low"]), ("high", ["pkg", "pkg.high"])]


def test_checker_finds_a_wrong_way_import(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path, {"__init__.py": "", "low.py": "from pkg import high\n", "high.py": ""}
    )
    assert wrong_way(import_graph(modules).edges, TOY_LAYERS) == [
        "pkg.low (low) imports pkg.high (high)"
    ]


def test_checker_ignores_type_checking_imports(tmp_path: Path) -> None:
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import high\n"
    modules = _tree(tmp_path, {"__init__.py": "", "low.py": text, "high.py": ""})
    assert wrong_way(import_graph(modules).edges, TOY_LAYERS) == []


def test_checker_finds_a_cycle_through_relative_imports(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path,
        {"__init__.py": "", "a.py": "from . import b\n", "b.py": "from .a import thing\n"},
    )
    assert cycles(import_graph(modules).edges) == [["pkg.a", "pkg.b"]]


def test_checker_finds_a_deferred_import_of_the_driver_in_runtime(tmp_path: Path) -> None:
    text = "def f():\n    # defers it\n    from lossgrad_compiler import driver\n"
    path = tmp_path / "runtime_x.py"
    path.write_text(text)
    found = runtime_imports_that_compile({"lossgrad_compiler.runtime.x": path})
    assert found == ["lossgrad_compiler.runtime.x:3 imports lossgrad_compiler.driver"]


def test_checker_reads_the_comment_of_a_function_local_import(tmp_path: Path) -> None:
    text = (
        "def f():\n    import json\n\n"
        "def g():\n    # defers numpy\n    import numpy\n    import json\n"
    )
    modules = _tree(tmp_path, {"__init__.py": "", "low.py": text})
    found = {(i.line, i.imported): i.comment for i in import_graph(modules).local_imports}
    assert found == {(2, "json"): "", (6, "numpy"): "defers numpy", (7, "json"): "defers numpy"}
