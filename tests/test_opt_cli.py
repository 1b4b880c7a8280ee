"""`lossgrad-opt` and the stock `xdsl-opt` (through the xdsl.universe entry point) lower all
three ops; the registration table; error exits. Subprocess runs cost ~0.5 s each, so most
checks run LossgradOptMain in-process."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest
from lossgrad_compiler.dialects import get_all_dialects
from lossgrad_compiler.passes import get_all_passes

from lossgrad_compiler import universe
from lossgrad_compiler.opt import LossgradOptMain

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
    assert "lossgrad." not in text
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
    assert "lossgrad." not in result.stdout
    assert "linalg.generic" in result.stdout


def test_in_process_matches_the_pass_output(all_ops: Path) -> None:
    assert_lowered(opt_in_process(str(all_ops), "-p", "lower-lossgrad"))
    again = opt_in_process(str(all_ops), "-p", "lower-lossgrad,canonicalize,cse")
    assert "lossgrad." not in again


def test_verifier_error_exits_nonzero_with_the_spec_message(tmp_path: Path) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text(INVALID)
    result = run(tool("lossgrad-opt"), str(path))
    assert result.returncode != 0
    assert "attribute 'beta': must be a float >= 0" in result.stderr
    assert "aclnn 161002" in result.stderr
    diagnostics = opt_in_process(str(path), "--verify-diagnostics")
    assert "SmoothL1LossBackward: attribute 'beta'" in diagnostics


def test_unknown_pass_is_rejected(all_ops: Path) -> None:
    with pytest.raises(ValueError, match="Unrecognized passes"):
        LossgradOptMain(args=[str(all_ops), "-p", "lower-lossgrads"])


def test_version_names_the_tool() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        LossgradOptMain(args=["--version"])
    assert out.getvalue().startswith("lossgrad-opt (xdsl ")


def test_one_registration_table_for_every_entry() -> None:
    """lossgrad-opt, xdsl-opt (the universe), dialects/ and passes/ list the same names,
    including the ascendc names registered ahead of their modules."""
    main = LossgradOptMain(args=[])
    assert set(universe.DIALECTS) == {"lossgrad", "ascendc"}
    assert set(universe.PASSES) == {
        "lower-lossgrad",
        "convert-linalg-to-ascendc",
        "ascendc-plan-buffers",
    }
    assert set(universe.TARGETS) == {"ascendc"}
    assert set(universe.DIALECTS) <= set(main.ctx.registered_dialect_names)
    assert set(universe.PASSES) <= set(main.available_passes)
    assert set(universe.TARGETS) <= set(main.available_targets)
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
