"""lossgrad-demo: every backend's rows, the Ascend C project and tiling, the summary, the exit
code, the skip lines of missing extras, and its runtime-only imports.

The rows expected come from the example model (its nodes, whatever they are) and from the
backends this test names, one or more per target of the project, so that a backend dropped
from the demo, or a node dropped from a backend's rows, fails here."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from lossgrad_compiler import demo, demo_ascendc, examples
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.targets import target_names
from tests.conftest import skips_forbidden

# The demo's backends for each built-in target, and the reference; checked against the
# registry, so that a new target needs a row in the demo.
BACKENDS_OF_TARGET = {
    "onnx": ("onnx-functions", "onnx-inline"),
    "ort": ("ort-native",),
    "ascendc": ("ascendc",),
    "iree": ("iree",),
    "ascendnpu-ir": ("ascendnpu-ir",),
}
EXPECTED_BACKENDS = ("onnx-reference", *(b for bs in BACKENDS_OF_TARGET.values() for b in bs))
EXTRA_OF_BACKEND = {"iree": "iree", "ascendnpu-ir": "ascend"}
STEPS = {"iree training step": "iree", "pytorch export + fuse": "torch"}


def run_demo(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = demo.main(argv)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """One run of the whole demo, shared by the tests that read its output."""
    where = tmp_path_factory.mktemp("demo")
    code, out = run_demo(["--out", str(where)])
    return code, out, where


def check_table(out: str) -> list[list[str]]:
    """The rows of the per-output table (backend, N, node, op, attributes, output, ...)."""
    lines = out.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("backend "))
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def summary(out: str) -> dict[str, str]:
    lines = out.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("summary:"))
    found = {}
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        name, _, text = line.strip().partition(":")
        found[name] = text.strip()
    return found


def skipped_for_a_missing_extra(name: str, extra: str, out: str) -> bool:
    """The backend's one skip line names the extra; a skip is allowed only then."""
    line = summary(out)[name]
    if not line.startswith("skipped"):
        return False
    assert f"needs the extra '{extra}'" in line and "it would have shown" in line, line
    if skips_forbidden():
        pytest.fail(f"{name} skipped: {line}")
    return True


# --------------------------------------------------------------------------- the whole run


def test_the_backends_cover_every_target() -> None:
    assert set(BACKENDS_OF_TARGET) <= set(target_names())
    assert [b.name for b in demo.BACKENDS] == list(EXPECTED_BACKENDS)


def test_demo_passes_and_prints_the_steps(full_run) -> None:
    code, out, _ = full_run
    assert code == 0, out
    model = examples.example_model()
    nodes = ", ".join(f"{n.name} ({n.op_type})" for n in model.graph.node)
    for text in (
        nodes,
        "spec validation + onnx.checker full_check",
        "grad_student_logp: float32[N,10]",
        "grad_class_prior: bfloat16[10]",
        "grad_box_pred: float32[N,4]",
        "rejected: KlDivBackward node 'kl_student': attribute 'reduction'",
        "[aclnn 161002 ACLNN_ERR_PARAM_INVALID]",
        "reduction=batchmean log_target=1",
        "reduction=none beta=0.5",
    ):
        assert text in out
    for batch in demo.BATCH_SIZES:
        assert f"run N={batch}" in out
        assert f"grad_student_logp: float32[{batch},10]" in out
    ran = [v for v in summary(out).values() if not v.startswith("skipped")]
    checked = sum(int(v.split()[0]) for v in ran)
    assert re.search(rf"^all {checked} outputs right \(.*\) in [0-9.]+ s$", out, re.MULTILINE)


@pytest.mark.parametrize("backend", EXPECTED_BACKENDS)
def test_every_backend_has_a_right_row_per_node_and_batch(full_run, backend: str) -> None:
    """The rows come from the model: every node at every batch size, each one right."""
    _, out, _ = full_run
    extra = EXTRA_OF_BACKEND.get(backend)
    if extra and skipped_for_a_missing_extra(backend, extra, out):
        pytest.skip(f"{backend} needs the extra '{extra}'")
    model = examples.example_model()
    rows = [r for r in check_table(out) if r[0] == backend]
    expected = [(str(b), n.name, n.op_type) for b in demo.BATCH_SIZES for n in model.graph.node]
    assert [(r[1], r[2], r[3]) for r in rows] == expected
    assert all(r[-1] == "ok" for r in rows), rows
    outputs = len(expected)
    assert summary(out)[backend] == (
        f"{outputs} outputs checked against the reference, {outputs} right: ok"
    )


def test_float_attributes_show_the_float32_the_model_holds(full_run) -> None:
    """The classifier head's label smoothing is the float32 0.1: shown as 0.1, not as its
    widening 0.10000000149011612."""
    _, out, _ = full_run
    rows = [r for r in check_table(out) if r[3] == "CrossEntropyLossGrad"]
    assert rows
    assert all("label_smoothing=0.1" in r[4].split() for r in rows), rows


@pytest.mark.parametrize("step", STEPS)
def test_every_extra_step_has_its_summary_line(full_run, step: str) -> None:
    _, out, _ = full_run
    if skipped_for_a_missing_extra(step, STEPS[step], out):
        pytest.skip(f"{step} needs the extra '{STEPS[step]}'")
    line = summary(out)[step]
    count = int(line.split()[0])
    assert count > 0 and line.endswith(f"{count} right: ok"), line


def test_the_ascendc_project_is_written_where_the_demo_says(full_run) -> None:
    """The files on disk are the ascendc target's, each project is listed with the nodes it
    serves, and the block of file names shows every folder of a project."""
    _, out, where = full_run
    folder = where / "ascendc"
    files = compile_model(examples.example_model(), target="ascendc").artifact.files
    on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert on_disk == set(files)
    assert all((folder / path).read_bytes() == data for path, data in files.items())
    projects = {path.split("/")[0] for path in files}
    assert f"wrote {len(projects)} projects ({len(files)} files) to {folder}/" in out
    listed = dict(re.findall(r"^  (\S+)/\s+node (.+)$", out, re.MULTILINE))
    assert set(listed) == projects
    nodes = [n.strip() for names in listed.values() for n in names.split(",")]
    assert sorted(nodes) == sorted(n.name for n in examples.example_model().graph.node)
    generic = {p.split("/", 1)[1].rpartition("/")[0] for p in files}
    for sub in generic - {""}:
        assert re.search(rf"^    {re.escape(sub)}/\s+\S", out, re.MULTILINE), sub
    assert "<name>.cpp <name>_tiling.h" in out
    assert "aclnn_<name>.cpp aclnn_<name>.h" in out


def test_the_ascendc_tiling_has_a_row_per_call(full_run) -> None:
    """A row per node and batch size, the elements of the iteration space split over the
    cores as the block dim says."""
    _, out, _ = full_run
    lines = out.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("Ascend C tiling on"))
    rows = []
    for line in lines[start + 3 :]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    model = examples.example_model()
    assert [r[0] for r in rows] == [n.name for n in model.graph.node for _ in demo.BATCH_SIZES]
    for node, iteration, elements, block_dim, per_core, tile, tiles, _ in rows:
        dims = [int(d) for d in iteration.strip("[]").split(",")]
        assert int(elements) == int(np.prod(dims)), node
        runs = [tuple(map(int, part.split("x"))) for part in per_core.split(" + ")]
        assert sum(c for c, _ in runs) == int(block_dim)
        assert sum(c * n for c, n in runs) == int(elements)
        assert int(tiles) == max(-(-n // int(tile)) for _, n in runs)


# --------------------------------------------------------------------------- failures


def _backend(name, transform):
    def prepare(model, out):
        return lambda feeds: transform(demo.reference_outputs(model, feeds))

    return demo.Backend(name, f"{name} test backend", prepare)


@pytest.fixture
def quick(monkeypatch):
    """The demo with the reference backend only and no extra steps, for the failure tests."""
    monkeypatch.setattr(demo, "BACKENDS", demo.BACKENDS[:1])
    for step in ("training_step_rows", "pytorch_step_rows"):
        monkeypatch.setattr(demo, step, lambda batches: ([], demo.Tally("step")))


def test_a_wrong_backend_fails_the_demo(monkeypatch, quick, tmp_path) -> None:
    def perturb(outputs):
        wrong = dict(outputs)
        g = wrong["grad_box_pred"]
        wrong["grad_box_pred"] = (g + np.float32(1e-3) * (np.abs(g).max() + 1)).astype(g.dtype)
        return wrong

    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, _backend("off-by-a-bit", perturb)])
    code, out = run_demo(["--out", str(tmp_path)])
    assert code == 1
    nodes = len(examples.example_model().graph.node)
    total = 2 * nodes * len(demo.BATCH_SIZES)
    assert f"FAILED: {len(demo.BATCH_SIZES)} of {total} outputs wrong; failed: off-by-a-bit" in out
    rows = [line for line in out.splitlines() if line.startswith("off-by-a-bit")]
    assert sum("FAILED" in r for r in rows) == len(demo.BATCH_SIZES)
    assert all("box_l1" in r for r in rows if "FAILED" in r)
    checked = nodes * len(demo.BATCH_SIZES)
    wrong = checked - len(demo.BATCH_SIZES)
    assert summary(out)["off-by-a-bit"] == (
        f"{checked} outputs checked against the reference, {wrong} right: FAILED"
    )


def test_a_backend_without_an_output_fails_the_demo(monkeypatch, quick, tmp_path) -> None:
    def drop(outputs):
        return {k: v for k, v in outputs.items() if k != "grad_class_prior"}

    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, _backend("dropped", drop)])
    code, out = run_demo(["--out", str(tmp_path)])
    assert code == 1
    assert "FAILED (missing output)" in out


def test_a_backend_that_raises_is_reported(monkeypatch, quick, tmp_path) -> None:
    def prepare(model, out):
        def run(feeds):
            raise RuntimeError("kernel library missing")

        return run

    broken = demo.Backend("broken", "raises", prepare)
    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, broken])
    code, out = run_demo(["--out", str(tmp_path)])
    assert code == 1
    assert "FAILED: RuntimeError: kernel library missing" in out
    assert "3 step(s) failed: FAILED" in summary(out)["broken"]


def test_an_unavailable_backend_is_skipped(monkeypatch, quick, tmp_path) -> None:
    def prepare(model, out):
        raise AssertionError("an unavailable backend must not be prepared")

    absent = demo.Backend(
        "native", "native kernels", prepare, lambda: "no C++ compiler", shows="the kernels"
    )
    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, absent])
    code, out = run_demo(["--out", str(tmp_path)])
    assert code == 0
    outputs = len(examples.example_model().graph.node) * len(demo.BATCH_SIZES)
    line = (
        f"skipped: no C++ compiler; it would have shown the kernels: {outputs} outputs "
        "checked against the reference"
    )
    assert line in out and summary(out)["native"] == line


def test_a_missing_extra_is_named(monkeypatch, quick, tmp_path) -> None:
    """The extra is named when one of its modules cannot be imported, whatever the reason the
    backend's probe gives."""
    monkeypatch.setitem(sys.modules, "llvmlite", None)
    absent = demo.Backend("npu", "x", _backend("npu", dict).prepare, lambda: "whatever",
                          extra="ascend", shows="kernels")  # fmt: skip
    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, absent])
    code, out = run_demo(["--out", str(tmp_path)])
    assert code == 0
    assert summary(out)["npu"].startswith(
        "skipped: needs the extra 'ascend' (pip install 'lossgrad_compiler[ascend]'); it would "
        "have shown "
        "kernels: "
    )
    assert demo.missing_extra("ascend") and not demo.missing_extra(None)


ASCENDC = next(b for b in demo.BACKENDS if b.name == "ascendc")


def test_a_node_added_to_the_example_gets_its_rows(monkeypatch, quick, tmp_path):
    """Nothing in the demo names the example's nodes: a fourth node (a signature of its own)
    gets its check rows, its Ascend C project and its tiling rows."""
    from lossgrad_compiler import onnx as lo

    base = examples.example_model

    def with_a_fourth_node():
        model = base()
        node = lo.make_node("KlDivBackward", ["grad_prior", "student_logp", "teacher_logp"],
                            "grad_extra", name="kl_extra", reduction="sum")  # fmt: skip
        graph = lo.make_graph(
            [*model.graph.node, node], examples.INPUTS,
            [o.name for o in model.graph.output] + ["grad_extra"], name=model.graph.name,
        )  # fmt: skip
        return lo.make_model(graph)

    monkeypatch.setattr(examples, "example_model", with_a_fourth_node)
    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, ASCENDC])
    code, out = run_demo(["--out", str(tmp_path)])
    assert code == 0, out
    for backend in ("onnx-reference", "ascendc"):
        rows = [r for r in check_table(out) if r[0] == backend and r[2] == "kl_extra"]
        assert [(r[1], r[3], r[-1]) for r in rows] == [
            (str(b), "KlDivBackward", "ok") for b in demo.BATCH_SIZES
        ]
        outputs = (len(examples.OUTPUTS) + 1) * len(demo.BATCH_SIZES)
        assert summary(out)[backend].startswith(f"{outputs} outputs checked")
    assert re.search(r"^  kl_div_backward__\S+__sum_log_target0/\s+node kl_extra$", out, re.M)
    assert len(re.findall(r"^kl_extra\s+\[", out, re.MULTILINE)) == len(demo.BATCH_SIZES)


def test_ascendc_without_a_working_compiler_is_one_skip_line(monkeypatch, quick, tmp_path):
    """The emulation has no prebuilt form: a $CXX that does not run skips the backend, with
    the compiler's own words, instead of failing its build."""
    from lossgrad_compiler.backends.ascendc import build

    failing = tmp_path / "cxx"
    failing.write_text("#!/bin/sh\necho 'this compiler does not work' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setenv("CXX", str(failing))
    monkeypatch.setattr(demo, "BACKENDS", [*demo.BACKENDS, ASCENDC])
    build.compiler.cache_clear()
    try:
        code, out = run_demo(["--out", str(tmp_path / "out")])
    finally:
        build.compiler.cache_clear()
    assert code == 0
    assert summary(out)["ascendc"].startswith(
        f"skipped: ascendc: emulation: needs a C++17 compiler; {failing} --version failed "
        "(this compiler does not work)"
    )
    assert not (tmp_path / "out").exists()


def test_no_backend_results_is_a_failure(monkeypatch, quick, tmp_path) -> None:
    monkeypatch.setattr(demo, "BACKENDS", [])
    assert run_demo(["--out", str(tmp_path)])[0] == 1


# --------------------------------------------------------------------------- pieces


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


@pytest.mark.parametrize(
    ("tiling", "block_dim", "lengths", "text"),
    [
        ((10, 16, 8, 0), 2, [8, 2], "1x8 + 1x2"),
        ((320, 16, 8, 0), 40, [8] * 40, "40x8"),
        ((50, 32, 16, 1), 3, [32, 16, 2], "1x32 + 1x16 + 1x2"),
        ((48, 24, 16, 2), 2, [24, 24], "2x24"),
    ],
)
def test_core_lengths_follow_the_core_split(tiling, block_dim, lengths, text):
    names = ("totalLength", "bigCoreDataNum", "smallCoreDataNum", "bigCoreNum")
    got = demo_ascendc.core_lengths(dict(zip(names, tiling, strict=True)), block_dim)
    assert got == lengths
    assert demo_ascendc.runs_text(got) == text


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


# --------------------------------------------------------------------------- as installed


def test_demo_runs_without_the_extras_and_without_test_dependencies(tmp_path: Path):
    """Installed without extras (`pip install lossgrad_compiler`), the demo must not import the
    test dependencies, and each step whose extra is missing says in one line which extra it
    is and what it would have shown."""
    code = (
        "import sys\n"
        "for name in ('torch', 'onnxscript', 'iree', 'ascendnpuir', 'llvmlite'):\n"
        "    sys.modules[name] = None  # importing it fails, as without the extra\n"
        "from lossgrad_compiler.demo import main\n"
        f"rc = main(['--out', {str(tmp_path)!r}])\n"
        "banned = {'pytest', 'hypothesis', 'tests'} & set(sys.modules)\n"
        "print('BANNED', sorted(banned))\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BANNED []" in result.stdout
    lines = summary(result.stdout)
    for name, extra in {**EXTRA_OF_BACKEND, **STEPS}.items():
        assert lines[name].startswith(
            f"skipped: needs the extra '{extra}' (pip install 'lossgrad_compiler[{extra}]'); "
            "it would have shown "
        ), lines[name]
    for name in ("onnx-reference", "ort-native", "ascendc"):
        assert lines[name].endswith("right: ok")


def test_console_script(tmp_path: Path):
    script = Path(sys.executable).parent / "lossgrad-demo"
    if not script.exists():
        pytest.skip("lossgrad-demo is not installed in this environment")
    result = subprocess.run(
        [str(script), "--out", str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^all \d+ outputs right", result.stdout, re.MULTILINE)
    assert (tmp_path / "ascendc").is_dir()


def test_help_prints_usage_and_does_not_run_the_demo(monkeypatch, capsys):
    def no_demo():
        raise AssertionError("--help must not build the example model")

    monkeypatch.setattr(examples, "example_model", no_demo)
    with pytest.raises(SystemExit) as info:
        demo.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: lossgrad-demo [-h] [--version] [--out DIR]")
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
