"""The device check (scripts/device_check.sh, docs/device-check.md) end to end on this
machine: the same script the GPU machine runs, with IREE's llvm-cpu backend, 2^10 elements
and PyTorch on the CPU, so that it cannot rot. `prepare` writes the bundle, `run` checks
every case against the reference and times it; a wrong kernel fails the run. Also pinned:
IREE 3.13 compiles no sm_90 module, which is why the bundle targets sm_80."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")

from benchmarks.device_check import bundle, cases, install, libcuda, timing
from benchmarks.device_check.__main__ import main as device_check_main
from benchmarks.device_check.prepare import DEFAULT_GPU, signature_for
from benchmarks.device_check.run import failed_checks
from lossgrad_compiler import examples, spec
from lossgrad_compiler.backends.iree import IreeCompileError, IreeOptions, compile_text, module_text
from lossgrad_compiler.frontend.lowering import lower_signatures

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device_check.sh"
CLASS_SHAPES = ("4x300", "32x10")  # given largest first: the set orders them


def device_check(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """scripts/device_check.sh with this interpreter for both phases."""
    return subprocess.run(
        ["sh", str(SCRIPT), *map(str, args)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, bundle.Manifest]:
    """(bundle, output folder, manifest) of one prepare and one run."""
    root = tmp_path_factory.mktemp("device-check")
    prepared = device_check(
        "prepare", "--backend", "llvm-cpu", "--sizes", "10", "--class-shapes", *CLASS_SHAPES,
        "--no-wheels", "--bundle", root / "bundle",
    )  # fmt: skip
    assert prepared.returncode == 0, prepared.stderr
    assert "MiB" in prepared.stdout, prepared.stdout
    out = root / "out"
    ran = device_check("run", "--bundle", root / "bundle", "--out", out, "--turn-s", "0.05")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return root / "bundle", out, bundle.Manifest.read(root / "bundle")


def test_every_case_matches_the_reference_and_is_timed(checked) -> None:
    _, out, manifest = checked
    rows = json.loads((out / "results.json").read_text())
    assert [r["name"] for r in rows] == [c.name for c in manifest.cases]
    for row, case in zip(rows, manifest.cases, strict=True):
        assert row["check"] == "ok", row
        assert row["iree_s"] > 0 and row["copy_s"] > 0, row
        assert row["nbytes"] > 0, row
        if case.kind == "benchmark":  # PyTorch's backward on the CPU, for every operator
            assert row["torch_s"] > 0, row


def test_the_table_lists_every_case_with_its_ratios(checked) -> None:
    _, out, manifest = checked
    text = (out / "table.md").read_text()
    assert f"checked: {len(manifest.cases)} of {len(manifest.cases)} run cases" in text
    assert "baselines: torch" in text and "on cpu" in text
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    for case in manifest.cases:
        (line,) = [line for line in lines if line.startswith(f"| {case.name} |")]
        assert "| ok |" in line
    assert "done in" in (out / "log.txt").read_text()


def test_the_bundle_holds_the_benchmark_set_and_the_example_model(checked) -> None:
    folder, _, manifest = checked
    assert (manifest.backend, manifest.iree_driver) == ("llvm-cpu", "local-task")
    assert all((folder / m.file).is_file() for m in manifest.modules.values())
    benchmark = [c for c in manifest.cases if c.kind == "benchmark"]
    assert {(c.op, c.type_name) for c in benchmark} == {
        (op, t) for op in (*spec.BROADCAST_OPERATORS, *cases.CLASS_OPS) for t in cases.TYPES
    }
    example = [c for c in manifest.cases if c.kind == "example"]
    assert [c.op for c in example] == [n.op_type for n in examples.example_model().graph.node]
    assert {c.op for c in example} >= {"NLLLossBackward", "CrossEntropyLossGrad"}
    kl = next(c for c in benchmark if c.op == "KlDivBackward")
    assert kl.reads == ["grad_output", "target"]  # its body never reads self
    drawn = cases.drawn_case(kl).inputs()
    assert cases.digest(drawn) == kl.inputs_sha256


def test_the_classification_cases_come_first_at_their_shapes(checked) -> None:
    """Before the elementwise set (the run's time budget drops cases from the end), smallest
    shape first, one function per operator and type whatever the shape; NLL's body reads
    no self; the drawn inputs hold ignored rows and are the ones prepare drew."""
    _, _, manifest = checked
    benchmark = [c for c in manifest.cases if c.kind == "benchmark"]
    classes = [c for c in benchmark if c.classes]
    assert benchmark[: len(classes)] == classes
    assert [(c.rows, c.classes) for c in classes[:: len(classes) // 2]] == [(32, 10), (4, 300)]
    assert {c.op for c in classes} == set(cases.CLASS_OPS) <= set(spec.CLASS_OPERATORS)
    for op, type_name in {(c.op, c.type_name) for c in classes}:
        assert len({c.function for c in classes if (c.op, c.type_name) == (op, type_name)}) == 1
    nll = next(c for c in classes if c.op == "NLLLossBackward")
    assert "self" not in nll.reads and {"target", "weight"} <= set(nll.reads)
    drawn = cases.drawn_case(nll).inputs()
    assert cases.digest(drawn) == nll.inputs_sha256
    assert drawn["target"].dtype == np.int64 and (drawn["target"] == -100).any()
    assert drawn["self"].shape == (nll.rows, nll.classes)


def test_a_class_shape_must_be_n_by_c() -> None:
    for text in ("256", "256x0", "x10", "2x3x4"):
        with pytest.raises(SystemExit) as exited:
            device_check_main(["prepare", "--class-shapes", text])
        assert exited.value.code == 2  # argparse's usage error


def test_a_wrong_kernel_fails_the_run(checked, tmp_path: Path) -> None:
    folder, _, manifest = checked
    mse, huber = (
        next(c for c in manifest.cases if c.op == op and c.type_name == "float32")
        for op in ("MseLossBackward", "HuberLossBackward")
    )
    copy = shutil.copytree(folder, tmp_path / "bundle")
    swapped = bundle.Manifest.read(copy)
    swapped.cases = [
        bundle.CaseEntry(**{**vars(mse), "function": huber.function}),
        *[c for c in manifest.cases if c.kind == "example"][:1],
    ]
    swapped.write(copy)
    ran = device_check("run", "--bundle", copy, "--out", tmp_path / "out", "--turn-s", "0.01")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert rows[0]["check"].startswith("MseLossBackward:") and "differ" in rows[0]["check"]
    assert rows[1]["check"] == "ok"


def test_without_the_modules_device_every_case_is_listed_as_not_run(checked, tmp_path) -> None:
    """A bundle for CUDA on a machine whose IREE opens no CUDA device: the table still comes
    back, every row saying why, and the run fails."""
    folder, _, manifest = checked
    copy = shutil.copytree(folder, tmp_path / "bundle")
    for_cuda = bundle.Manifest.read(copy)
    for_cuda.backend = "cuda"
    for_cuda.write(copy)
    ran = device_check("run", "--bundle", copy, "--out", tmp_path / "out")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(rows) == len(manifest.cases)
    assert {r["check"] for r in rows} == {"not run (no IREE cuda device)"}


def test_wheels_are_installed_only_where_needed() -> None:
    """The runtime whenever its version differs (a module needs its own release's runtime),
    another package only where it is missing."""
    suffix = "cp312-abi3-manylinux_2_28_x86_64.whl"
    installed = metadata.version("iree-base-runtime")
    assert not install.wanted(Path(f"iree_base_runtime-{installed}-{suffix}"))
    assert install.wanted(Path(f"iree_base_runtime-0.0.1-{suffix}"))
    assert not install.wanted(Path(f"ml_dtypes-0.0.1-{suffix}"))
    assert install.wanted(Path("no_such_distribution_here-1.0-py3-none-any.whl"))


def test_a_nonzero_count_of_a_value_check_fails_the_case() -> None:
    """A classification function returns its count of bad targets after the gradient: the
    case passes only when every count is 0."""
    assert failed_checks([]) is None and failed_checks([np.array(0)]) is None
    problem = failed_checks([np.array(0), np.array(3, np.int64)])
    assert problem is not None and "[0, 3]" in problem and "outside [0, C)" in problem


def test_turns_alternate_and_give_medians() -> None:
    calls: list[str] = []
    runners = {name: (lambda n=name: calls.append(n)) for name in ("a", "b", "c")}
    times = timing.median_turns(runners, lambda: None, budget_s=0.0, min_rounds=3)
    assert set(times) == {"a", "b", "c"} and all(t >= 0 for t in times.values())
    assert calls == ["a", "b", "c", "a", "b", "c", "b", "c", "a", "c", "a", "b"]


def test_iree_3_13_compiles_sm_80_but_no_sm_90() -> None:
    """IREE 3.13 has no target details for sm_90 ('missing GPU target'), so the bundle's
    modules are sm_80 PTX, which the driver compiles for an H200. A fixed IREE shows here."""
    inputs = cases.BenchmarkCase("MseLossBackward", "float32", 4).inputs()
    module = lower_signatures([signature_for("MseLossBackward", inputs, {"reduction": "mean"})])
    options = IreeOptions("cuda", gpu=DEFAULT_GPU)
    assert compile_text(module_text(module, options), options)
    hopper = IreeOptions("cuda", gpu="sm_90")
    with pytest.raises(IreeCompileError, match="missing GPU target"):
        compile_text(module_text(module, hopper), hopper)


def test_saved_arrays_keep_their_types_and_zero_dimensional_shapes(tmp_path: Path) -> None:
    arrays = {
        "scalar": np.array(0.5, np.float32),
        "half": np.arange(3, dtype=np.float16),
        "brain": np.arange(4, dtype=spec.BFLOAT16.dtype).reshape(2, 2),
        "labels": np.array([2**40, -1, 3], np.int64),  # a classification target
        "narrow_labels": np.array([7, -100], np.int32),
    }
    bundle.save_arrays(tmp_path / "a.npz", arrays)
    loaded = bundle.load_arrays(tmp_path / "a.npz")
    for name, array in arrays.items():
        assert loaded[name].dtype == array.dtype and loaded[name].shape == array.shape
        assert loaded[name].tobytes() == array.tobytes()


def test_a_library_found_only_by_its_versioned_name_gets_a_plain_link(tmp_path: Path) -> None:
    """What the run does for IREE's CUDA driver, which opens `libcuda.so` by that name, on a
    machine with only `libcuda.so.1`; shown with libm, whose plain name is no library (a
    linker script, or nothing)."""
    assert libcuda.link_folder("libc.so.6", "libc.so.6", tmp_path) is None  # loads as it is
    assert libcuda.link_folder("libnothing.so", "libnothing.so.1", tmp_path) is None
    assert libcuda.link_folder("libm.so", "libm.so.6", tmp_path) == tmp_path
    assert libcuda.loads(str(tmp_path / "libm.so"))
