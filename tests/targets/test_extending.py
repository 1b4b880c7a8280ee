"""docs/extending.md as written: its toy target, registered through the entry-point group by
a package this repository does not contain (a module and a .dist-info the test makes on
sys.path, as `pip install` would), is reached by `compile_model`, `lossgrad-compile` and
`--help` with no change to this repository's code. Every code block of the page runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import onnx
import pytest

from lossgrad_compiler import cli, examples
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.targets import ENTRY_POINT_GROUP, get_target, target_names

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "extending.md"
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.DOTALL | re.MULTILINE)
_SIGNATURES = len(examples.example_model().graph.node)
"""The example model's nodes differ in operator or types: one level-2 function each."""


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(PAGE.read_text()) if lang == language]


def test_the_page_has_the_blocks_this_test_runs() -> None:
    """A block added to the page must be run here: count them."""
    assert {lang for lang, _ in FENCE.findall(PAGE.read_text())} == {"python", "toml", "sh"}
    assert (len(blocks("python")), len(blocks("toml")), len(blocks("sh"))) == (2, 1, 1)


@pytest.fixture
def toy_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The page's target module and its distribution's metadata, from the page's blocks,
    in a folder that is put on sys.path (and on PYTHONPATH for subprocesses)."""
    folder = tmp_path / "site"
    folder.mkdir()
    group = tomllib.loads(blocks("toml")[0])["project"]["entry-points"][ENTRY_POINT_GROUP]
    ((name, reference),) = group.items()
    module = reference.partition(":")[0]
    (folder / f"{module}.py").write_text(blocks("python")[0])
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {reference}\n")
    monkeypatch.syspath_prepend(str(folder))
    return folder


def _environment(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


def test_the_registry_lists_the_toy_target_beside_the_built_in_ones(toy_package: Path) -> None:
    names = target_names()
    assert "level2-text" in names and {"onnx", "ort", "ascendc", "iree", "ascendnpu-ir"} <= set(
        names
    )
    target = get_target("level2-text")
    assert [o.name for o in target.options] == ["banner"]


def test_the_shell_block_runs_as_written(toy_package: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    onnx.save(examples.example_model(), work / "model.onnx")
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", blocks("sh")[0]],
        cwd=work,
        env=_environment(toy_package),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = (work / "model.mlir").read_text()
    assert text.startswith("// for review\n") and text.count("func.func @") == _SIGNATURES


def test_the_python_block_runs_as_written(toy_package: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", blocks("python")[1]],
        env=_environment(toy_package),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "target level2-text" in done.stdout
    assert f"{_SIGNATURES} distinct signatures" in done.stdout


def test_compile_model_and_the_cli_reach_the_toy_target_in_process(
    toy_package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = compile_model(examples.example_model(), target="level2-text", banner="hi")
    assert result.artifact.data.startswith(b"// hi\n") and result.report.target == "level2-text"
    source = tmp_path / "m.onnx"
    onnx.save(examples.example_model(), source)
    assert cli.main([str(source), "--target", "level2-text", "-o", f"{tmp_path}/"]) == 0
    printed = capsys.readouterr().out
    assert f"{_SIGNATURES} level-2 functions" in printed and "target level2-text" in printed
    generics = (tmp_path / "m.mlir").read_text().count("linalg.generic")
    assert generics >= _SIGNATURES  # suffix from the target
    with pytest.raises(SystemExit) as exit_:
        cli.main([str(source), "--target", "onnx", "--banner", "x", "-o", str(tmp_path / "o")])
    assert exit_.value.code == 2
    assert "--banner applies to --target level2-text, not to onnx" in capsys.readouterr().err


def test_help_lists_the_toy_target_and_its_option(
    toy_package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "level2-text: the level-2 module as MLIR text, a module" in text
    assert "--banner BANNER a comment line written first (--target level2-text)" in text


def test_without_the_package_the_toy_target_is_unknown() -> None:
    """The target comes from the package's metadata only: nothing here names it."""
    assert "level2-text" not in target_names()
    assert not list((ROOT / "lossgrad_compiler").rglob("level2_text*"))
