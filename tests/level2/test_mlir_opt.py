"""Level-2 IR is upstream MLIR: lower-lossgrad's output for every op, broadcast pattern,
reduction, attribute variant and element type (static and dynamic shapes) parses and
verifies in a real `mlir-opt`, which also bufferizes it and lowers it to loops.
Skipped only when no mlir-opt is installed (never in CI: see tests/conftest.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler import spec
from lossgrad_compiler.context import make_context
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.cases import fits, make_case, mixed_dtype_combinations, standard_cases
from tests.helpers.class_cases import all_class_cases, class_case_module, every
from tests.helpers.ir import lossgrad_ops
from tests.helpers.modules import build_module


def find_mlir_opt() -> str | None:
    for name in ("mlir-opt-22", "mlir-opt"):
        found = shutil.which(name)
        if found:
            return found
    candidate = "/usr/lib/llvm-22/bin/mlir-opt"
    return candidate if os.access(candidate, os.X_OK) else None


MLIR_OPT = find_mlir_opt()
pytestmark = pytest.mark.skipif(
    MLIR_OPT is None,
    reason="no mlir-opt: install LLVM 22's MLIR tools (apt-get install mlir-22-tools, as "
    ".ci/run does) or put an mlir-opt on PATH",
)


def lowered_modules() -> list[tuple[str, ModuleOp]]:
    """(label, lowered module) for the shared case matrix and the half/mixed types."""
    cases = []
    for op_type in spec.BROADCAST_OPERATORS:
        cases += standard_cases(op_type, np.float32)[::2]
        cases += standard_cases(op_type, np.float64)[1::4]
        for k, dtypes in enumerate(
            [(np.float16,) * 3, (ml_dtypes.bfloat16,) * 3, *mixed_dtype_combinations()]
        ):
            shapes = ((4, 1), (4, 3)) if k % 2 else ((2, 3), (3,))
            if fits(op_type, "target"):  # B is self: a target that fits into it
                shapes = ((4, 3), (4, 1)) if k % 2 else ((2, 3), (3,))
            cases.append(make_case(op_type, {"reduction": "mean"}, *shapes, (), dtypes, seed=k))
    modules = []
    for case in cases:
        for dynamic in (False, True):
            module = build_module(case, dynamic=dynamic)
            LowerLossgradPass().apply(make_context(), module)
            modules.append((f"{case.label} ({'dynamic' if dynamic else 'static'})", module))
    for class_case in every(list(all_class_cases()), 7):  # integer targets, linalg.index, checks
        for dynamic in (False, True):
            module = class_case_module(class_case, dynamic=dynamic)
            LowerLossgradPass().apply(make_context(), module)
            label = f"{class_case.label} ({'dynamic' if dynamic else 'static'})"
            modules.append((label, module))
    return modules


def run_mlir_opt(path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    assert MLIR_OPT is not None
    return subprocess.run(
        [MLIR_OPT, "--split-input-file", *flags, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def level2_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    modules = lowered_modules()
    text = "\n// -----\n".join(str(m) for _, m in modules)
    assert not lossgrad_ops(text)
    path = tmp_path_factory.mktemp("level2") / "lowered.mlir"
    path.write_text(text)
    return path, [label for label, _ in modules]


def failure_report(result: subprocess.CompletedProcess[str], labels: list[str]) -> str:
    """mlir-opt's errors, each with the label of the case it belongs to."""
    chunks = [int(n) for n in re.findall(r"within split at \S+:(\d+)", result.stderr)]
    text = result.stderr[-6000:]
    if chunks:
        text += f"\n(first failing chunk starts at line {chunks[0]})"
    return f"{len(labels)} modules; mlir-opt said:\n{text}"


def test_mlir_opt_parses_and_verifies(level2_file: tuple[Path, list[str]]) -> None:
    path, labels = level2_file
    assert len(labels) > 100
    result = run_mlir_opt(path)
    assert result.returncode == 0, failure_report(result, labels)
    assert result.stdout.count("linalg.generic") >= len(labels)


def test_mlir_opt_bufferizes_and_lowers_to_loops(level2_file: tuple[Path, list[str]]) -> None:
    path, labels = level2_file
    result = run_mlir_opt(
        path, "--one-shot-bufferize=bufferize-function-boundaries", "--convert-linalg-to-loops"
    )
    assert result.returncode == 0, failure_report(result, labels)
    assert "linalg.generic" not in result.stdout
    assert "scf.for" in result.stdout


def test_mlir_opt_rejects_broken_level2(tmp_path: Path) -> None:
    """The check has teeth: a lowered module with a mistyped body is rejected."""
    case = make_case("KlDivBackward", {"reduction": "sum"}, (2, 3), (2, 3), (), np.float32)
    module = build_module(case, dynamic=False)
    LowerLossgradPass().apply(make_context(), module)
    text = str(module)
    broken = re.sub(r"(linalg.yield %\w+) : f32", r"\1 : f64", text, count=1)
    assert broken != text
    path = tmp_path / "broken.mlir"
    path.write_text(broken)
    result = run_mlir_opt(path)
    assert result.returncode != 0
