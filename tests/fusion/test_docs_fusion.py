"""Every code block of docs/fusion.md runs as written (tests/docs/test_docs_blocks.py names this
test in its DEDICATED pages and runs the other pages): ```python blocks each in a fresh
interpreter, ```sh blocks line by line with the installed console scripts, in a folder
holding the files the page names (`exported.onnx`: PyTorch's form of a SmoothL1 gradient;
`kl_target.onnx`: its form of KlDivTargetBackward). A block marked with an extra skips,
naming it, where the extra is missing (which fails under LOSSGRAD_NO_SKIPS=1)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import onnx
import pytest

from tests.docs.test_docs_blocks import (
    ROOT,
    Block,
    environment,
    needs_extra,
    page_blocks,
    run_python_block,
    shell_commands,
)
from tests.fusion.graphs import Recipe, build

PAGE = ROOT / "docs" / "fusion.md"
BLOCKS = page_blocks(PAGE)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    exported = build(Recipe("sl1_div_after_mul", scale="const", scale_value=1 / 12, opset=20))
    onnx.save(exported.model, tmp_path / "exported.onnx")
    kl_target = build(Recipe("klt_grouped", scale="const", scale_value=1 / 12, opset=20))
    onnx.save(kl_target.model, tmp_path / "kl_target.onnx")
    return tmp_path


def test_every_block_has_a_runner() -> None:
    assert {b.language for b in BLOCKS} <= {"python", "sh", ""}
    assert any(b.language == "python" for b in BLOCKS) and any(b.language == "sh" for b in BLOCKS)


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.language == "python"], ids=lambda b: b.label
)
def test_python_block_runs_as_written(block: Block, workdir: Path) -> None:
    run_python_block(block, workdir)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "sh"], ids=lambda b: b.label)
def test_shell_block_runs_as_written(block: Block, workdir: Path) -> None:
    needs_extra(block)
    for command in shell_commands(block):
        run = subprocess.run(
            shlex.split(command),
            cwd=workdir,
            env=environment(),
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert run.returncode == 0, f"{block.label}: {command}\n{run.stderr[-3000:]}"


def test_the_report_shown_is_the_passs() -> None:
    """The page's example report is what fusing the exporter's SmoothL1 form prints."""
    shown = next(b for b in BLOCKS if b.language == "" and "fused 1 SmoothL1" in b.code)
    from lossgrad_compiler import fuse

    exported = build(Recipe("sl1_div_after_mul", scale="const", scale_value=1 / 12, opset=20))
    lines = fuse(exported.model)[1].lines()
    assert lines[0] in shown.code
    assert "fused SmoothL1LossBackward(beta=0.5, reduction=mean)" in shown.code
    assert "fused SmoothL1LossBackward(beta=0.5, reduction=mean)" in lines[1]
