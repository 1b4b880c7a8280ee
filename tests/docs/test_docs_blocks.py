"""Every code block of README.md and docs/*.md runs as written, the way a user copies it.

The fence's info string says how a block is run:

* ```python blocks run, each in a fresh interpreter, in a folder holding the files the
  examples name (`model.onnx`: the demo's example model; `model.mlir`: the one lossgrad op
  docs/lossgrad-opt.md shows), so a name shadowed after first use or a Path where ORT
  wants a str fails here.
* ```sh blocks run line by line in such a folder with the installed console scripts on
  PATH; `make demo`, `make test` and `make wheel` are the commands CI itself runs
  (`.ci/run`), so here they are resolved with `make -n` and must name what they run.
* ```mlir blocks are whole modules: `lossgrad-opt` parses and verifies each, and lowers it
  with lower-lossgrad (an excerpt of IR goes in a fence without a language).
* ```cpp blocks are generated code: each must appear in what the Ascend C target prints
  for the kernel they show (KlDivBackward, reduction mean, 0-d grad_output, float32).
* `<!-- extra: NAME -->` on the line before a fence marks a block that needs the optional
  extra NAME (pyproject.toml; the comment does not show on GitHub, and the fence stays
  plain for other readers): it runs where the extra is installed and skips, naming the
  extra, where it is not (which fails under LOSSGRAD_NO_SKIPS=1, as in CI).
* A fence without a language holds program output, diagrams or tables: it is not run.
* A page whose blocks need more than a folder (docs/extending.md installs a plugin
  package; docs/fusion.md reads exported models) is run by a test of its own, named in
  DEDICATED, which must run every block.

Any other language fails, so that a new kind of example gets a runner before it gets a
block.
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
from lossgrad_compiler.demo import EXTRA_MODULES, missing_extra

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent

# Pages whose blocks a test of their own runs as written.
DEDICATED = {
    "docs/extending.md": "tests/targets/test_extending.py",
    "docs/fusion.md": "tests/fusion/test_docs_fusion.py",  # the exported models it names
}

MODEL_MLIR = """\
func.func @f(%go: tensor<f32>, %x: tensor<?x4xf32>, %t: tensor<4xf32>) -> tensor<?x4xf32> {
  %g = lossgrad.smooth_l1_loss_backward %go, %x, %t reduction = mean beta = 5.000000e-01
       : tensor<f32>, tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  func.return %g : tensor<?x4xf32>
}
"""

FENCE = re.compile(r"^```(\S*)((?:\s+\S+)*)\s*$")
EXTRA = re.compile(r"^<!-- extra: (\S+) -->$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    language: str
    info: str  # the rest of the fence's info string (none is used)
    code: str
    line: int  # where the block starts in its page
    extra: str | None = None  # the optional extra the block needs

    @property
    def label(self) -> str:
        return f"{self.page}:{self.line}:{self.language or 'text'}"


def page_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """The fenced blocks of one page (a fence closes at the next line starting with ```)."""
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    page = str(path.relative_to(root))
    k = 0
    while k < len(lines):
        fence = FENCE.match(lines[k])
        if fence:
            end = next(j for j in range(k + 1, len(lines)) if lines[j].startswith("```"))
            marker = EXTRA.match(lines[k - 1]) if k else None
            code = "\n".join(lines[k + 1 : end]) + "\n"
            blocks.append(Block(page, fence.group(1), fence.group(2).strip(), code, k + 1,
                                marker.group(1) if marker else None))  # fmt: skip
            k = end
        k += 1
    return blocks


BLOCKS = [b for path in PAGES for b in page_blocks(path)]
RUN_HERE = [b for b in BLOCKS if b.page not in DEDICATED]
RUNNERS = {"python", "sh", "mlir", "cpp", ""}


def by_language(language: str) -> list[Block]:
    return [b for b in RUN_HERE if b.language == language]


def needs_extra(block: Block) -> None:
    """Skip, naming the extra, a block whose extra is not installed."""
    if block.extra and missing_extra(block.extra):
        pytest.skip(f"{block.label} needs the extra '{block.extra}'")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    onnx.save(examples.example_model(), tmp_path / "model.onnx")
    (tmp_path / "model.mlir").write_text(MODEL_MLIR)
    return tmp_path


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


# --------------------------------------------------------------------------- the rule


def test_every_block_has_a_runner() -> None:
    unknown = [b.label for b in RUN_HERE if b.language not in RUNNERS]
    assert not unknown, f"code blocks nobody runs: {unknown}"
    assert by_language("python") and by_language("sh") and by_language("mlir")


def test_every_extra_is_known() -> None:
    """An extra marker names an extra of pyproject.toml; a fence has nothing after its
    language (what a block needs goes in the marker before it)."""
    assert [b.label for b in BLOCKS if b.extra and b.extra not in EXTRA_MODULES] == []
    assert [f"{b.label}: {b.info}" for b in BLOCKS if b.info] == []
    markers = sum(1 for p in PAGES for line in p.read_text().splitlines() if EXTRA.match(line))
    assert markers == sum(1 for b in BLOCKS if b.extra), "an extra marker not before a fence"
    extras = re.search(r"\[project\.optional-dependencies\](.*?)\n\[", _pyproject(), re.S)
    assert extras and set(EXTRA_MODULES) <= set(re.findall(r"^(\w+) =", extras.group(1), re.M))


def _pyproject() -> str:
    return (ROOT / "pyproject.toml").read_text()


def test_pages_with_a_test_of_their_own_name_it() -> None:
    for page, test in DEDICATED.items():
        assert (ROOT / page).is_file() and (ROOT / test).is_file()
        assert page in (ROOT / test).read_text(), f"{test} does not say it runs {page}"


def test_the_model_mlir_of_the_examples_is_the_one_the_docs_show() -> None:
    shown = [b.code for b in by_language("mlir") if b.page == "docs/lossgrad-opt.md"]
    assert shown == [MODEL_MLIR]


def test_the_parser_reads_info_strings(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("x\n<!-- extra: iree -->\n```python\nprint(1)\n```\n```\nout\n```\n")
    first, second = page_blocks(page, tmp_path)
    assert (first.language, first.extra, first.code, first.line) == ("python", "iree",
                                                                      "print(1)\n", 3)  # fmt: skip
    assert (second.language, second.extra, second.code) == ("", None, "out\n")


def test_a_block_whose_extra_is_missing_skips_naming_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # importing it fails, as without the extra
    with pytest.raises(pytest.skip.Exception, match=r"x\.md:1:python needs the extra 'torch'"):
        needs_extra(Block("x.md", "python", "", "import torch\n", 1, "torch"))
    needs_extra(Block("x.md", "python", "", "import numpy\n", 1, None))  # runs


# --------------------------------------------------------------------------- the runners


@pytest.mark.parametrize("block", by_language("python"), ids=lambda b: b.label)
def test_python_block_runs_as_written(block: Block, workdir: Path) -> None:
    run_python_block(block, workdir)


def run_python_block(block: Block, workdir: Path) -> None:
    """A python block run as a user pastes it: a fresh interpreter in a scratch folder."""
    needs_extra(block)
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
    needs_extra(block)
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
    """`make demo` / `make test` / `make wheel`: what they run, resolved without running it
    (CI runs them)."""
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


@pytest.mark.parametrize("block", by_language("mlir"), ids=lambda b: b.label)
def test_mlir_block_parses_verifies_and_lowers(block: Block, tmp_path: Path) -> None:
    needs_extra(block)
    source = tmp_path / "block.mlir"
    source.write_text(block.code)
    run = subprocess.run(
        [BIN / "lossgrad-opt", source, "-p", "lower-lossgrad"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"{block.label}: {run.stderr[-3000:]}"
    assert "linalg.generic" in run.stdout or "lossgrad." not in block.code


@pytest.mark.parametrize("block", by_language("cpp"), ids=lambda b: b.label)
def test_cpp_block_is_what_the_ascendc_target_prints(block: Block, workdir: Path) -> None:
    """The kernel excerpt: KlDivBackward, mean, 0-d grad_output, float32."""
    needs_extra(block)
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
    """The text with each line's indentation removed (the docs show a method unindented)."""
    return "\n".join(line.strip() for line in text.strip().splitlines())
