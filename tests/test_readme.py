"""Every code block of the README runs as written, the way a user copies it.

* ```python blocks run, each in a fresh interpreter, in a folder holding the files the
  README's examples name (`model.onnx`: the demo's example model; `model.mlir`: one lossgrad
  op), so a name shadowed after first use or a Path where ORT wants a str fails here.
* ```sh blocks run line by line in such a folder with the installed console scripts on PATH;
  `make demo`, `make test` (the commands CI itself runs, `.ci/run`) and `make wheel` are
  resolved with `make -n` and must name the demo, the test runner and `python -m build`.
* the ```cpp block is generated code: it must appear in what the Ascend C target prints.
* a fence without a language holds diagrams, tables or program output, not code; any other
  language fails, so that a new kind of example gets a runner before it gets a block.
"""

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

from lossgrad_compiler import examples

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent

MODEL_MLIR = """\
func.func @f(%go: tensor<f32>, %x: tensor<?x4xf32>, %t: tensor<4xf32>) -> tensor<?x4xf32> {
  %g = lossgrad.smooth_l1_loss_backward %go, %x, %t reduction = mean beta = 5.000000e-01
       : tensor<f32>, tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  func.return %g : tensor<?x4xf32>
}
"""


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int  # where the block starts in README.md

    @property
    def label(self) -> str:
        return f"README.md:{self.line}:{self.language}"


def readme_blocks() -> list[Block]:
    blocks = []
    lines = README.read_text().splitlines()
    k = 0
    while k < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[k])
        if fence:
            end = next(j for j in range(k + 1, len(lines)) if lines[j].startswith("```"))
            blocks.append(Block(fence.group(1), "\n".join(lines[k + 1 : end]) + "\n", k + 1))
            k = end
        k += 1
    return blocks


BLOCKS = readme_blocks()
RUNNERS = {"python", "sh", "cpp", ""}


def by_language(language: str) -> list[Block]:
    return [b for b in BLOCKS if b.language == language]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    onnx.save(examples.example_model(), tmp_path / "model.onnx")
    (tmp_path / "model.mlir").write_text(MODEL_MLIR)
    return tmp_path


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_every_block_has_a_runner() -> None:
    unknown = [b.label for b in BLOCKS if b.language not in RUNNERS]
    assert not unknown, f"README code blocks nobody runs: {unknown}"
    assert by_language("python") and by_language("sh")


@pytest.mark.parametrize("block", by_language("python"), ids=lambda b: b.label)
def test_python_block_runs_as_written(block: Block, workdir: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=workdir,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, f"{block.label} failed:\n{block.code}\n{run.stderr[-3000:]}"


def shell_commands(block: Block) -> list[str]:
    commands = []
    for line in block.code.splitlines():
        command = line.split("  #")[0].strip()
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


@pytest.mark.parametrize("block", by_language("sh"), ids=lambda b: b.label)
def test_shell_block_runs_as_written(block: Block, workdir: Path) -> None:
    for command in shell_commands(block):
        argv = shlex.split(command)
        if argv[0] == "make":
            check_make_target(argv[1:])
            continue
        run = subprocess.run(
            argv, cwd=workdir, env=environment(), capture_output=True, text=True, timeout=1200
        )
        assert run.returncode == 0, f"{block.label}: `{command}` failed:\n{run.stderr[-3000:]}"


def check_make_target(targets: list[str]) -> None:
    """`make demo` / `make test`: what they run, resolved without running it (CI runs them)."""
    expected = {"demo": "lossgrad-demo", "test": "pytest", "wheel": "-m build"}
    for target in targets:
        run = subprocess.run(
            ["make", "-n", "-W", "pyproject.toml", target],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        assert expected[target] in run.stdout, run.stdout


@pytest.mark.parametrize("block", by_language("cpp"), ids=lambda b: b.label)
def test_cpp_block_is_what_the_ascendc_target_prints(block: Block, workdir: Path) -> None:
    """The README's kernel excerpt: KlDivBackward, mean, 0-d grad_output, float32."""
    source = workdir / "kl.mlir"
    source.write_text(
        "func.func @kl(%go: tensor<f32>, %x: tensor<?x?xf32>, %t: tensor<?x?xf32>)"
        " -> tensor<?x?xf32> {\n"
        "  %g = lossgrad.kl_div_backward %go, %x, %t reduction = mean"
        " : tensor<f32>, tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?x?xf32>\n"
        "  func.return %g : tensor<?x?xf32>\n}\n"
    )
    run = subprocess.run(
        [
            BIN / "lossgrad-opt",
            source,
            "-p",
            "lower-lossgrad,convert-linalg-to-ascendc,ascendc-plan-buffers",
            "-t",
            "ascendc",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert stripped_lines(block.code) in stripped_lines(run.stdout), (
        f"{block.label} is not in the printed kernel"
    )


def stripped_lines(text: str) -> str:
    """The text with each line's indentation removed (the README shows a method unindented)."""
    return "\n".join(line.strip() for line in text.strip().splitlines())
