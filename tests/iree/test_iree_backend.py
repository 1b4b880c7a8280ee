"""The IREE target's edges: errors before anything is compiled, the missing extra, f64 and
the GPU targets, the module cache, and level 2 piped from lossgrad-opt into iree-compile
with no project code in between."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler import reference, spec
from lossgrad_compiler.backends import iree as iree_backend
from lossgrad_compiler.backends.iree import compiler as iree_compiler
from lossgrad_compiler.errors import (
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    LossGradError,
    UnsupportedByBackendError,
)
from lossgrad_compiler.evaluation import iree as iree_evaluation
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import signature_of
from lossgrad_compiler.runtime import iree as iree_runtime

F32 = np.dtype("float32")
FLAGS = iree_backend.IreeOptions().flags


def signature(op_type: str, shapes: tuple, attrs: dict, dtype: np.dtype = F32):
    infos = {n: spec.TensorInfo(dtype, s) for n, s in zip(spec.INPUT_NAMES, shapes, strict=True)}
    return signature_of(spec.validate(op_type, infos, attrs))


THREE = [
    signature("KlDivBackward", ((), (4, 3), (4, 3)), {"reduction": "mean", "log_target": 0}),
    signature("KlDivTargetBackward", ((), (4, 3), (3,)), {"reduction": "sum", "log_target": 1}),
    signature("SmoothL1LossBackward", ((), (4, 3), (4, 3)), {"reduction": "none", "beta": 0.5}),
]


@pytest.fixture
def no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("iree-compile was called")

    monkeypatch.setattr(iree_compiler, "compile_text", refuse)


@pytest.mark.usefixtures("no_compiling")
def test_invalid_calls_fail_with_the_aclnn_code_before_compiling() -> None:
    x = np.ones((4, 3), np.float32)
    with pytest.raises(LossGradError) as bad_shape:
        iree_evaluation.evaluate(
            "KlDivBackward",
            {"grad_output": np.float32(1), "self": x, "target": np.ones(5, np.float32)},
        )
    assert bad_shape.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(LossGradError) as missing:
        iree_evaluation.evaluate("KlDivBackward", {"grad_output": None, "self": x, "target": x})
    assert missing.value.code == ACLNN_ERR_PARAM_NULLPTR
    with pytest.raises(LossGradError, match="beta"):
        iree_evaluation.evaluate(
            "SmoothL1LossBackward", {"grad_output": np.float32(1), "self": x, "target": x},
            {"beta": -1.0},
        )  # fmt: skip


def test_a_missing_extra_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def without_iree(name: str, package: str | None = None):
        if name.startswith("iree"):
            raise ImportError(f"No module named '{name}'")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", without_iree)
    with pytest.raises(iree_backend.IreeUnavailableError) as raised:
        iree_compiler.compile_text("builtin.module {}")
    message = str(raised.value)
    assert "pip install 'lossgrad_compiler[iree]'" in message
    assert "\n" not in message


def test_f64_is_refused_where_the_target_has_no_f64() -> None:
    f64 = signature("SmoothL1LossBackward", ((), (3,), (3,)), {}, np.dtype("float64"))
    with pytest.raises(UnsupportedByBackendError, match=r"no float64 arithmetic.*llvm-cpu"):
        iree_backend.module_text(lower_signatures([f64]), iree_backend.IreeOptions("vulkan"))


def test_the_module_keeps_f64_in_its_dispatches() -> None:
    """IR proof beside the numbers of test_iree_numerics: the compiled dispatch subtracts in
    f64 (a demoted module would say f32)."""
    f64 = signature("SmoothL1LossBackward", ((), (3,), (3,)), {"beta": 1.0}, np.dtype("float64"))
    command = [
        iree_compiler.iree_module("iree.compiler.tools.binaries").find_tool("iree-compile"),
        "-", *FLAGS, "--compile-to=executable-sources",
    ]  # fmt: skip
    text = iree_backend.module_text(lower_signatures([f64]))
    done = subprocess.run(command, input=text.encode(), capture_output=True, check=True)
    assert "arith.subf" in done.stdout.decode()
    assert ": f64" in done.stdout.decode()
    assert "f32" not in done.stdout.decode()


@pytest.mark.parametrize("backend", ["cuda", "rocm", "vulkan"])
def test_gpu_targets_compile_without_a_device(backend: str) -> None:
    vmfb = iree_backend.compile_text(
        iree_backend.module_text(lower_signatures(THREE)), iree_backend.IreeOptions(backend)
    )
    rt = iree_compiler.iree_module("iree.runtime")
    module = rt.VmModule.copy_buffer(rt.VmInstance(), vmfb)  # loading needs no device
    assert {s.id for s in THREE} <= set(module.function_names)


def test_hip_is_rocm_and_unknown_backends_are_refused() -> None:
    assert iree_backend.IreeOptions("hip") == iree_backend.IreeOptions("rocm")
    with pytest.raises(ValueError, match="unknown IREE backend 'metalx'"):
        iree_backend.IreeOptions("metalx")


def test_modules_are_cached_and_a_damaged_one_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOSSGRAD_CACHE_DIR", str(tmp_path))
    path = iree_backend.compile_module(lower_signatures(THREE[:1]))
    built = path.read_bytes()
    calls: list[str] = []
    real = iree_compiler.compile_text

    def counting(text: str, target=None) -> bytes:
        calls.append(text)
        return real(text, target)

    monkeypatch.setattr(iree_compiler, "compile_text", counting)
    assert iree_backend.compile_module(lower_signatures(THREE[:1])) == path
    assert calls == []
    path.write_bytes(built[: len(built) // 2])
    assert iree_backend.compile_module(lower_signatures(THREE[:1])) == path
    assert len(calls) == 1
    assert path.read_bytes() == built


UNRESOLVED_CALL = """
func.func @lossgrad_broken(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = func.call @no_such_kernel(%a) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
"""


def test_a_compile_failure_carries_irees_diagnostics_and_the_command() -> None:
    """A module iree-compile refuses (a call of a function it does not have): the error
    carries IREE's own diagnostics, which name what it refused, and the command line."""
    with pytest.raises(iree_backend.IreeCompileError) as raised:
        iree_backend.compile_text(UNRESOLVED_CALL)
    message = str(raised.value)
    assert "iree-compile failed (exit " in message
    assert "'no_such_kernel' does not reference a valid function" in message
    assert "command: " in message and "iree-compile" in message


LEVEL1 = """
func.func @smooth_l1(%go: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<1x3xf32>)
    -> tensor<2x3xf32> {
  %r = "lossgrad.smooth_l1_loss_backward"(%go, %x, %t)
      <{reduction = #lossgrad<reduction mean>, beta = 5.000000e-01 : f64}>
      : (tensor<f32>, tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  func.return %r : tensor<2x3xf32>
}
"""


def test_lossgrad_opt_output_pipes_into_iree_compile(tmp_path: Path) -> None:
    """How an MLIR pipeline uses the dialect: `lossgrad-opt f.mlir -p lower-lossgrad |
    iree-compile - ...`, static shapes, nothing of the project in between; then the module
    runs and matches the reference."""
    source = tmp_path / "f.mlir"
    source.write_text(LEVEL1)
    opt = shutil.which("lossgrad-opt", path=str(Path(sys.executable).parent))
    iree_compile = iree_compiler.iree_module("iree.compiler.tools.binaries").find_tool(
        "iree-compile"
    )
    assert opt is not None
    vmfb = tmp_path / "f.vmfb"
    pipe = (
        f"'{opt}' '{source}' -p lower-lossgrad | '{iree_compile}' - {' '.join(FLAGS)} -o '{vmfb}'"
    )
    subprocess.run(["sh", "-c", f"set -e; {pipe}"], check=True)
    module = iree_runtime.load(vmfb, device="local-sync")
    assert module.names == ["smooth_l1"]
    go = np.float32(2.0)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = np.zeros((1, 3), np.float32)
    got = module("smooth_l1", go, x, t)
    want = reference.evaluate(
        "SmoothL1LossBackward", {"grad_output": go, "self": x, "target": t},
        {"reduction": "mean", "beta": 0.5},
    )  # fmt: skip
    np.testing.assert_array_equal(got, want)


def test_unknown_devices_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown IREE CPU device 'cuda'"):
        iree_runtime.load(tmp_path / "none.vmfb", device="cuda")
