"""`lossgrad-opt` and the stock `xdsl-opt` (through the xdsl.universe entry point) lower all
three ops; the registration table; error exits. Subprocess runs cost ~0.5 s each, so most
checks run LossgradOptMain in-process."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import lossgrad_compiler
from lossgrad_compiler import universe
from lossgrad_compiler.dialects import get_all_dialects
from lossgrad_compiler.opt import LossgradOptMain, OptError, main
from lossgrad_compiler.passes import get_all_passes
from tests.helpers.ir import lossgrad_ops

ALL_OPS = """
func.func @grads(%dy: tensor<f32>, %x: tensor<?x4xf16>, %t: tensor<1x4xf16>)
    -> (tensor<?x4xf16>, tensor<1x4xf16>, tensor<?x4xf32>) {
  %a = lossgrad.kl_div_backward %dy, %x, %t reduction = batchmean
       : tensor<f32>, tensor<?x4xf16>, tensor<1x4xf16> -> tensor<?x4xf16>
  %b = lossgrad.kl_div_target_backward %dy, %x, %t reduction = mean log_target = true
       : tensor<f32>, tensor<?x4xf16>, tensor<1x4xf16> -> tensor<1x4xf16>
  %c = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum beta = 0.000000e+00
       : tensor<f32>, tensor<?x4xf16>, tensor<1x4xf16> -> tensor<?x4xf32>
  func.return %a, %b, %c : tensor<?x4xf16>, tensor<1x4xf16>, tensor<?x4xf32>
}
"""

INVALID = """
func.func @bad(%dy: tensor<f32>, %x: tensor<4xf32>, %t: tensor<4xf32>) -> tensor<4xf32> {
  %a = lossgrad.smooth_l1_loss_backward %dy, %x, %t beta = -1.0
       : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
"""


@pytest.fixture()
def all_ops(tmp_path: Path) -> Path:
    path = tmp_path / "all_ops.mlir"
    path.write_text(ALL_OPS)
    return path


def tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def opt_in_process(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        LossgradOptMain(args=list(args)).run()
    return out.getvalue()


def assert_lowered(text: str) -> None:
    assert not lossgrad_ops(text)
    assert text.count("linalg.generic") == 4  # KL target is summed: a second truncf generic
    assert "func.return" in text


@pytest.mark.parametrize("command", ["lossgrad-opt", "xdsl-opt"])
def test_cli_lowers_all_three_ops(command: str, all_ops: Path) -> None:
    result = run(tool(command), str(all_ops), "-p", "lower-lossgrad")
    assert result.returncode == 0, result.stderr
    assert_lowered(result.stdout)


def test_python_m_with_upstream_passes_composed(all_ops: Path) -> None:
    result = run(
        sys.executable,
        "-m",
        "lossgrad_compiler.opt",
        str(all_ops),
        "-p",
        "lower-lossgrad,canonicalize,cse",
    )
    assert result.returncode == 0, result.stderr
    assert not lossgrad_ops(result.stdout)
    assert "linalg.generic" in result.stdout


def test_in_process_matches_the_pass_output(all_ops: Path) -> None:
    assert_lowered(opt_in_process(str(all_ops), "-p", "lower-lossgrad"))
    again = opt_in_process(str(all_ops), "-p", "lower-lossgrad,canonicalize,cse")
    assert not lossgrad_ops(again)


def test_verifier_error_exits_nonzero_with_the_spec_message(tmp_path: Path) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text(INVALID)
    result = run(tool("lossgrad-opt"), str(path))
    assert result.returncode == 1
    assert result.stderr == (
        f"lossgrad-opt: error: {path}:3:8: SmoothL1LossBackward: attribute 'beta': must be a "
        "float >= 0 (not NaN), got -1.0 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]\n"
    )
    assert result.stdout == ""
    diagnostics = opt_in_process(str(path), "--verify-diagnostics")
    assert "SmoothL1LossBackward: attribute 'beta'" in diagnostics


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text(INVALID)
    result = run(tool("lossgrad-opt"), str(path), "--debug")
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "VerifyException: SmoothL1LossBackward: attribute 'beta'" in result.stderr


def test_unknown_pass_is_rejected(all_ops: Path) -> None:
    with pytest.raises(
        OptError, match=r"pass pipeline: Unrecognized passes: \['lower-lossgrads'\]"
    ):
        LossgradOptMain(args=[str(all_ops), "-p", "lower-lossgrads"])


def test_version_names_the_tool() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        LossgradOptMain(args=["--version"])
    assert out.getvalue().startswith(f"lossgrad-opt {lossgrad_compiler.__version__} (xdsl ")


def test_one_registration_table_for_every_entry() -> None:
    """lossgrad-opt, xdsl-opt (the universe), dialects/ and passes/ list the same names,
    including the ascendc and HFusion-form names registered ahead of their modules."""
    main = LossgradOptMain(args=[])
    assert set(universe.DIALECTS) == {"lossgrad", "ascendc", "hfusion", "hacc"}
    assert set(universe.PASSES) == {
        "lower-lossgrad",
        "convert-linalg-to-ascendc",
        "ascendc-plan-buffers",
        "convert-linalg-to-hfusion",
    }
    assert set(universe.OPT_OUTPUTS) == {"ascendc"}
    assert set(universe.DIALECTS) <= set(main.ctx.registered_dialect_names)
    assert set(universe.PASSES) <= set(main.available_passes)
    assert set(universe.OPT_OUTPUTS) <= set(main.available_targets)
    assert set(get_all_dialects()) == set(universe.DIALECTS)
    assert set(get_all_passes()) == set(universe.PASSES)
    assert set(universe.LOSSGRAD_UNIVERSE.all_passes) == set(universe.PASSES)


def test_factories_import_lazily_and_load_the_named_object() -> None:
    from lossgrad_compiler.dialects.lossgrad import Lossgrad
    from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass

    assert get_all_dialects()["lossgrad"]() is Lossgrad
    assert get_all_passes()["lower-lossgrad"]() is LowerLossgradPass
    missing = universe.lazy("lossgrad_compiler.no_such_module:Thing")
    with pytest.raises(ModuleNotFoundError):
        missing()  # nothing is imported until the factory is called


# --------------------------------------------------------------------------- user errors

NOT_REGISTERED = "func.func @f() {\n  %x = foo.bar : () -> i32\n}\n"


def deeply_nested(depth: int) -> str:
    return "builtin.module {" * depth + "}" * depth + "\n"


# name -> (file content or None for a missing file, extra arguments, expected line after
# "lossgrad-opt: error: ", with {path} for the input's path)
USER_ERRORS: dict[str, tuple[bytes | None, list[str], str]] = {
    "spec violation": (
        INVALID.encode(),
        [],
        "{path}:3:8: SmoothL1LossBackward: attribute 'beta': must be a float >= 0 (not NaN), "
        "got -1.0 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]",
    ),
    "spec violation in a pass": (
        INVALID.encode(),
        ["-p", "lower-lossgrad", "--disable-verify"],
        "{path}:3:8: SmoothL1LossBackward: attribute 'beta': must be a float >= 0 (not NaN), "
        "got -1.0 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]",
    ),
    "missing file": (None, [], "{path}: cannot read: No such file or directory"),
    "binary input": (b"\x7fELF\x02\x01\x01\x00" + bytes(range(128, 256)), [], "{path}:1:9: not "),
    "unknown pass": (ALL_OPS.encode(), ["-p", "lower-lossgrads"], "pass pipeline: Unrecognized"),
    "pipeline syntax": (ALL_OPS.encode(), ["-p", "lower-lossgrad{"], "pass pipeline: column 16"),
    "pass option": (
        ALL_OPS.encode(),
        ["-p", "ascendc-plan-buffers{soc=npu}"],
        "{path}: ascendc: soc: must be one of ascend910b, ",
    ),
    "deep nesting": (deeply_nested(2000).encode(), [], "{path}:1:"),
    "unregistered operation": (
        NOT_REGISTERED.encode(),
        [],
        "{path}:2:16: Operation foo.bar is not registered",
    ),
}


@pytest.mark.parametrize("case", USER_ERRORS, ids=list(USER_ERRORS))
def test_user_errors_are_one_line_with_exit_1(case: str, tmp_path: Path, capsys) -> None:
    content, arguments, expected = USER_ERRORS[case]
    path = tmp_path / "in.mlir"
    if content is not None:
        path.write_bytes(content)
    assert main([str(path), *arguments]) == 1
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("lossgrad-opt: error: " + expected.format(path=path)), lines[0]
    assert captured.out == ""


def test_deep_nesting_is_reported_as_such(tmp_path: Path, capsys) -> None:
    path = tmp_path / "deep.mlir"
    path.write_text(deeply_nested(2000))
    assert main([str(path)]) == 1
    assert "nested too deeply" in capsys.readouterr().err


def test_a_directory_input_is_one_line(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path)]) == 1
    assert (
        capsys.readouterr().err == f"lossgrad-opt: error: {tmp_path}: cannot read: Is a directory\n"
    )


def test_errors_in_split_input_files_name_the_files_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "split.mlir"
    path.write_text(ALL_OPS + "// -----\n" + INVALID)
    assert main([str(path), "--split-input-file"]) == 1
    first = ALL_OPS.count("\n") + 1  # the separator's line
    assert capsys.readouterr().err.startswith(f"lossgrad-opt: error: {path}:{first + 3}:8: ")
    assert main([str(path), "--split-input-file", "--verify-diagnostics"]) == 0
    assert "Operation does not verify: SmoothL1LossBackward" in capsys.readouterr().out


# --------------------------------------------------------------------------- output files


def test_output_may_name_the_input(all_ops: Path) -> None:
    """The input is read before the output is written (it used to be truncated first)."""
    assert main([str(all_ops), "-p", "lower-lossgrad", "-o", str(all_ops)]) == 0
    assert_lowered(all_ops.read_text())
    assert sorted(p.name for p in all_ops.parent.iterdir()) == ["all_ops.mlir"]


def test_a_failed_run_leaves_the_output_untouched(tmp_path: Path) -> None:
    source = tmp_path / "bad.mlir"
    source.write_text(INVALID)
    out = tmp_path / "out.mlir"
    out.write_text("previous output\n")
    assert main([str(source), "-o", str(out)]) == 1
    assert out.read_text() == "previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mlir", "out.mlir"]


def test_output_to_a_fifo_is_streamed(all_ops: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert main([str(all_ops), "-p", "lower-lossgrad", "-o", str(fifo)]) == 0
        received = b""
        while chunk := os.read(reader, 1 << 16):
            received += chunk
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert_lowered(received.decode())


def test_output_to_dev_null_keeps_the_device(all_ops: Path) -> None:
    before = os.stat("/dev/null")
    assert main([str(all_ops), "-o", "/dev/null"]) == 0
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_output_through_a_symlink_writes_its_target(kind: str, all_ops: Path, tmp_path: Path):
    (tmp_path / "keep").mkdir()
    target = tmp_path / "keep" / "lowered.mlir"
    target.write_text("old\n")
    link = tmp_path / "link.mlir"
    link.symlink_to("keep/lowered.mlir" if kind == "relative" else target)
    assert main([str(all_ops), "-p", "lower-lossgrad", "-o", str(link)]) == 0
    assert link.is_symlink()
    assert_lowered(target.read_text())


def test_output_through_a_dangling_symlink_is_refused(all_ops: Path, tmp_path: Path, capsys):
    link = tmp_path / "link.mlir"
    link.symlink_to("nowhere/lowered.mlir")
    assert main([str(all_ops), "-o", str(link)]) == 1
    assert "dangling symbolic link" in capsys.readouterr().err
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()


def test_dash_is_standard_output(all_ops: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([str(all_ops), "-p", "lower-lossgrad", "-o", "-"]) == 0
    assert_lowered(capsys.readouterr().out)
    assert not (tmp_path / "-").exists()
