"""Runs the lit + FileCheck suite in tests/filecheck (dialect round trips, verifier messages,
lower-lossgrad output, level-2 IR in upstream mlir-opt); any failure shows lit's report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).parents[1] / "filecheck"

# `python -m lit` does not exist (lit has no __main__); call lit's entry point instead.
_RUN_LIT = "import sys; from lit.main import main; sys.argv[0] = 'lit'; main()"


def run_lit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _RUN_LIT, *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_filecheck_suite() -> None:
    result = run_lit("-v", str(SUITE))
    report = result.stdout[-8000:] + result.stderr[-4000:]
    assert result.returncode == 0, report
    assert "Failed" not in result.stdout, report


def test_broken_check_line_fails(tmp_path: Path) -> None:
    """The harness reports a failing FileCheck line (so a green suite means something)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "lit.cfg").write_text((SUITE / "lit.cfg").read_text())
    (suite / "broken.mlir").write_text(
        "// RUN: lossgrad-opt %s | filecheck %s\n"
        "func.func @f() {\n  func.return\n}\n"
        "// CHECK: func.func @not_there\n"
    )
    result = run_lit("-v", str(suite))
    assert result.returncode != 0
    assert "Failed Tests (1)" in result.stdout
