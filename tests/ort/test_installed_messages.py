"""Messages and help texts never point at files the installed package does not have: the
repository's scripts, docs, Makefile or an editable install (`pip install -e`). The wheel
holds lossgrad_compiler/ only (tests/packaging/test_packaging.py), so an installed user who
is told to "run fetch_ort_headers.sh" or to read docs/level2.md is sent nowhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lossgrad_compiler.backends.ort import build
from tests.helpers.dists import package_roots

# A reference to something outside the installed package: a repository file by its suffix,
# the checkout's folders, or the commands that only work in a checkout.
OUTSIDE = re.compile(
    r"[\w-]+(/[\w.-]+)*\.(md|sh|toml|cfg)\b|third_party/|scripts/|tests/|benchmarks/|docs/"
    r"|pip install -e|\bmake (demo|test|wheel)\b"
)
# Files the package itself writes into the projects it generates, and path pieces that are
# no message (build.py's constants, used only when a checkout is there; tested below).
ALLOWED = {
    "build.sh",  # the Ascend C project's own build script (backends/ascendc/project.py)
    "compile.sh",  # the ascendnpu-ir target's per-signature compile script
    "fetch_ort_headers.sh",  # build.FETCH_SCRIPT's name, named only in a checkout
}


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """The string constants of `path` except bare string statements (docstrings, attribute
    documentation), which no user sees as a message."""
    tree = ast.parse(path.read_text())
    bare = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare
    ]


def test_no_message_names_a_file_outside_the_package() -> None:
    found = []
    for source in sorted({p for p in package_roots().values()}):
        for path in sorted(source.rglob("*.py")):
            for line, text in _string_constants(path):
                for match in OUTSIDE.finditer(text):
                    if match.group(0) not in ALLOWED:
                        found.append(f"{path.relative_to(source.parent)}:{line}: {match.group(0)}")
    assert not found, "\n".join(found)


def test_missing_headers_outside_a_checkout_name_no_repository_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed package (no fetch script beside it) whose shipped headers are gone: the
    message names the variable, a reinstall and Debian's package, not the script."""
    monkeypatch.delenv(build.ENV_INCLUDE, raising=False)
    monkeypatch.setattr(build, "FETCH_SCRIPT", tmp_path / "scripts" / "fetch_ort_headers.sh")
    monkeypatch.setattr(build, "SHIPPED_INCLUDE", tmp_path / "site-packages" / "include")
    monkeypatch.setattr(build, "VENDORED_INCLUDE", tmp_path / "third_party" / "include")
    monkeypatch.setattr(build, "SYSTEM_INCLUDE", tmp_path / "usr" / "include")
    with pytest.raises(build.NativeUnavailableError) as err:
        build.find_headers()
    message = str(err.value)
    assert "fetch_ort_headers" not in message and "third_party" not in message, message
    assert "$LOSSGRAD_ORT_INCLUDE" in message and "reinstall" in message, message


def test_missing_headers_in_a_checkout_name_the_fetch_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(build.ENV_INCLUDE, raising=False)
    script = tmp_path / "scripts" / "fetch_ort_headers.sh"
    script.parent.mkdir()
    script.write_text("exit 1\n")
    monkeypatch.setattr(build, "PROJECT_ROOT", tmp_path)
    monkeypatch.setattr(build, "FETCH_SCRIPT", script)
    monkeypatch.setattr(build, "SHIPPED_INCLUDE", tmp_path / "site-packages" / "include")
    monkeypatch.setattr(build, "VENDORED_INCLUDE", tmp_path / "third_party" / "include")
    monkeypatch.setattr(build, "SYSTEM_INCLUDE", tmp_path / "usr" / "include")
    with pytest.raises(build.NativeUnavailableError, match=r"run scripts/fetch_ort_headers\.sh"):
        build.find_headers(fetch=False)


def test_the_shipped_headers_come_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An installed package builds against its own headers, whatever else is around."""
    monkeypatch.delenv(build.ENV_INCLUDE, raising=False)
    shipped = tmp_path / "include"
    shipped.mkdir()
    (shipped / build.HEADER).write_text("#define ORT_API_VERSION 21\n")
    monkeypatch.setattr(build, "SHIPPED_INCLUDE", shipped)
    assert build.find_headers() == shipped
    monkeypatch.setenv(build.ENV_INCLUDE, str(build.VENDORED_INCLUDE))
    if (build.VENDORED_INCLUDE / build.HEADER).is_file():
        assert build.find_headers() == build.VENDORED_INCLUDE  # the variable still wins
