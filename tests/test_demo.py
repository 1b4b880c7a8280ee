"""lossgrad-demo: its table, its exit code, and its runtime-only imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from lossgrad_compiler import demo, examples


def test_demo_passes_and_prints_the_steps(capsys):
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    for text in (
        "kl_student (KlDivBackward), kl_prior (KlDivTargetBackward), box_l1 (SmoothL1LossBackward)",
        "spec validation + onnx.checker full_check",
        "grad_student_logp: float32[N,10]",
        "grad_class_prior: bfloat16[10]",
        "grad_box_pred: float32[N,4]",
        "rejected: KlDivBackward node 'kl_student': attribute 'reduction'",
        "[aclnn 161002 ACLNN_ERR_PARAM_INVALID]",
        "reduction=batchmean log_target=1",
        "reduction=none beta=0.5",
        f"all {3 * len(demo.BATCH_SIZES) * len(demo.BACKENDS)} outputs match the reference "
        "within tolerance",
    ):
        assert text in out
    for backend in ("onnx-reference", "onnx-functions", "onnx-inline", "ort-native"):
        assert f"{backend}: " in out
    for batch in demo.BATCH_SIZES:
        assert f"run N={batch}" in out
        assert f"grad_student_logp: float32[{batch},10]" in out


def _backend(name, transform):
    def prepare(model):
        return lambda feeds: transform(demo.reference_outputs(model, feeds))

    return demo.Backend(name, f"{name} test backend", prepare)


def test_a_wrong_backend_fails_the_demo(monkeypatch, capsys):
    def perturb(outputs):
        wrong = dict(outputs)
        g = wrong["grad_box_pred"]
        wrong["grad_box_pred"] = (g + np.float32(1e-3) * (np.abs(g).max() + 1)).astype(g.dtype)
        return wrong

    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, _backend("off-by-a-bit", perturb)])
    assert demo.main([]) == 1
    out = capsys.readouterr().out
    total = 3 * len(demo.BATCH_SIZES) * len(demo.BACKENDS)  # the patched list
    assert f"FAILED: {len(demo.BATCH_SIZES)} of {total} outputs" in out
    rows = [line for line in out.splitlines() if line.startswith("off-by-a-bit")]
    assert sum("FAILED" in r for r in rows) == len(demo.BATCH_SIZES)
    assert all("box_l1" in r for r in rows if "FAILED" in r)


def test_a_backend_that_raises_is_reported(monkeypatch, capsys):
    def prepare(model):
        def run(feeds):
            raise RuntimeError("kernel library missing")

        return run

    broken = demo.Backend("broken", "raises", prepare)
    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, broken])
    assert demo.main([]) == 1
    out = capsys.readouterr().out
    assert "FAILED: RuntimeError: kernel library missing" in out


def test_an_unavailable_backend_is_skipped(monkeypatch, capsys):
    def prepare(model):
        raise AssertionError("an unavailable backend must not be prepared")

    absent = demo.Backend("native", "native kernels", prepare, lambda: "no C++ compiler")
    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, absent])
    assert demo.main([]) == 0
    assert "skipped: no C++ compiler" in capsys.readouterr().out


def test_no_backend_results_is_a_failure(monkeypatch):
    monkeypatch.setattr(demo, "BACKENDS", [])
    assert demo.main([]) == 1


@pytest.mark.parametrize(
    ("got", "want", "ok", "note"),
    [
        (np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0], np.float32), True, ""),
        (np.array([1.0, 2.00001], np.float32), np.array([1.0, 2.0], np.float32), True, ""),
        (np.array([1.0, 2.001], np.float32), np.array([1.0, 2.0], np.float32), False, ""),
        (np.array([np.nan, 1], np.float64), np.array([np.nan, 1], np.float64), True, ""),
        (np.array([0.0, 1], np.float64), np.array([np.nan, 1], np.float64), False, "NaN"),
        (np.array([np.inf, 1], np.float16), np.array([np.inf, 1], np.float16), True, ""),
        (np.ones(3, np.float32), np.ones(2, np.float32), False, "got float32[3]"),
        (np.ones(2, np.float64), np.ones(2, np.float32), False, "got float64[2]"),
        (None, np.ones(2, np.float32), False, "missing"),
        (np.zeros(0, np.float32), np.zeros(0, np.float32), True, ""),
        (
            np.array([1.0, 2.02], ml_dtypes.bfloat16),
            np.array([1.0, 2.0], ml_dtypes.bfloat16),
            True,
            "",
        ),
    ],
)
def test_compare(got, want, ok, note):
    _, _, result, text = demo.compare(got, want)
    assert result is ok
    assert note in text


def test_example_feeds_match_the_model_inputs():
    model = examples.example_model()
    feeds = examples.example_feeds(6, seed=1)
    assert [i.name for i in model.graph.input] == list(feeds)
    for info in model.graph.input:
        dims = [d.dim_value or d.dim_param for d in info.type.tensor_type.shape.dim]
        assert len(dims) == feeds[info.name].ndim
        assert [6 if d == examples.BATCH else d for d in dims] == list(feeds[info.name].shape)
    assert np.all(feeds["class_prior"].astype(np.float32) > 0)
    np.testing.assert_allclose(np.exp(feeds["teacher_logp"]).sum(axis=1), 1, rtol=1e-5)


@pytest.mark.parametrize("torch_installed", [True, False], ids=["with_torch", "without_torch"])
def test_demo_runs_without_test_dependencies(torch_installed: bool):
    """`make demo` installs only the runtime dependencies: the demo must not import the test
    ones, and without the optional extra `torch` its PyTorch step says what to install."""
    code = (
        "import sys\n"
        + ("" if torch_installed else "sys.modules['torch'] = None  # import torch fails\n")
        + "from lossgrad_compiler.demo import main\n"
        "rc = main()\n"
        "banned = {'pytest', 'hypothesis', 'tests'} & set(sys.modules)\n"
        "print('BANNED', sorted(banned))\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BANNED []" in result.stdout
    if torch_installed:
        assert "fused 1 KlDivBackward, 1 SmoothL1LossBackward" in result.stdout
    else:
        assert "skipped: needs PyTorch: pip install 'lossgrad_compiler[torch]'" in result.stdout


def test_console_script():
    script = Path(sys.executable).parent / "lossgrad-demo"
    if not script.exists():
        pytest.skip("lossgrad-demo is not installed in this environment")
    result = subprocess.run([str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outputs match the reference" in result.stdout


def test_help_prints_usage_and_does_not_run_the_demo(monkeypatch, capsys):
    def no_demo():
        raise AssertionError("--help must not build the example model")

    monkeypatch.setattr(examples, "example_model", no_demo)
    with pytest.raises(SystemExit) as info:
        demo.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: lossgrad-demo [-h]")
    assert "Exit status: 0 when every output is within tolerance" in out
    with pytest.raises(SystemExit) as info:
        demo.main(["--batch", "3"])
    assert info.value.code == 2
    assert "unrecognized arguments: --batch 3" in capsys.readouterr().err


def test_console_script_help():
    """`lossgrad-demo --help` returns at once (the demo itself takes seconds)."""
    result = subprocess.run(
        [sys.executable, "-m", "lossgrad_compiler.demo", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: lossgrad-demo")
    assert "lossgrad-demo: loss gradients" not in result.stdout
