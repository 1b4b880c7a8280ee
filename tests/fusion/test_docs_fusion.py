"""Every code block of docs/fusion.md runs as written (as tests/test_readme.py runs the
README's): ```python blocks each in a fresh interpreter, ```sh blocks line by line with the
installed console scripts, in a folder holding the files the page names (`exported.onnx`:
PyTorch's form of a SmoothL1 gradient; `kl_target.onnx`: its form of KlDivTargetBackward)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import onnx
import pytest

from tests.fusion.graphs import Recipe, build

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "fusion.md"
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int

    @property
    def label(self) -> str:
        return f"docs/fusion.md:{self.line}:{self.language}"


def page_blocks() -> list[Block]:
    blocks = []
    lines = PAGE.read_text().splitlines()
    k = 0
    while k < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[k])
        if fence:
            end = next(j for j in range(k + 1, len(lines)) if lines[j].startswith("```"))
            blocks.append(Block(fence.group(1), "\n".join(lines[k + 1 : end]) + "\n", k + 1))
            k = end
        k += 1
    return blocks


BLOCKS = page_blocks()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    exported = build(Recipe("sl1_div_after_mul", scale="const", scale_value=1 / 12, opset=20))
    onnx.save(exported.model, tmp_path / "exported.onnx")
    kl_target = build(Recipe("klt_exporter", scale="const", scale_value=1 / 12, opset=20))
    onnx.save(kl_target.model, tmp_path / "kl_target.onnx")
    return tmp_path


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_every_block_has_a_runner() -> None:
    assert {b.language for b in BLOCKS} <= {"python", "sh", ""}
    assert any(b.language == "python" for b in BLOCKS) and any(b.language == "sh" for b in BLOCKS)


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.language == "python"], ids=lambda b: b.label
)
def test_python_block_runs_as_written(block: Block, workdir: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=workdir,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, f"{block.label} failed:\n{block.code}\n{run.stderr[-3000:]}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "sh"], ids=lambda b: b.label)
def test_shell_block_runs_as_written(block: Block, workdir: Path) -> None:
    for line in block.code.splitlines():
        command = line.split("  #")[0].strip()
        if not command or command.startswith("#"):
            continue
        run = subprocess.run(
            shlex.split(command),
            cwd=workdir,
            env=_environment(),
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
