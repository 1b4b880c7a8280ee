"""lossgrad-compile: compiled files, the report, and every failure as one line on stderr with a
non-zero exit status, the input file untouched and no output written."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from lossgrad_compiler import cli, reference, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.backends.onnx.run import make_session, run_session


def command() -> list[str]:
    """The installed console script, or the module when the checkout is not reinstalled."""
    script = shutil.which("lossgrad-compile", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "lossgrad_compiler.cli"]


def good_model() -> onnx.ModelProto:
    nodes = [
        lo.make_node("KlDivBackward", ["go", "x", "t"], "g1", name="kl", reduction="batchmean"),
        lo.make_node("SmoothL1LossBackward", ["go", "x", "t"], "g2", name="sl1", beta=0.5),
    ]
    graph = lo.make_graph(
        nodes,
        [("go", "float32", []), ("x", "float32", ["N", 4]), ("t", "float32", [1, 4])],
        [("g1", "float32", ["N", 4]), ("g2", "float32", ["N", 4])],
    )
    return lo.make_model(graph)


def bad_node(inputs=("go", "x", "t"), **attrs) -> onnx.NodeProto:
    node = helper.make_node("KlDivBackward", list(inputs), ["g"], name="broken", **attrs)
    node.domain = spec.DOMAIN
    return node


def bad_model(node=None, x_shape=(4, 3), t_shape=(4, 3)) -> bytes:
    graph = helper.make_graph(
        [node or bad_node()],
        "g",
        [
            helper.make_tensor_value_info("go", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape)),
            helper.make_tensor_value_info("t", TensorProto.FLOAT, list(t_shape)),
        ],
        [helper.make_tensor_value_info("g", TensorProto.FLOAT, list(x_shape))],
    )
    return lo.make_model(graph).SerializeToString()


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_compiles_a_model_and_reports(tmp_path: Path):
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    before = digest(source)
    out = tmp_path / "sub" / "out.onnx"
    run = subprocess.run([*command(), str(source), "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert "2 ai.lossgrad nodes (KlDivBackward 1, KlDivTargetBackward 0, " in run.stdout
    assert "SmoothL1LossBackward 1); 2 distinct signatures: 2 compiled, 0 from the cache" in (
        run.stdout
    )
    assert f"wrote {out}" in run.stdout
    assert digest(source) == before
    compiled = onnx.load(out)
    onnx.checker.check_model(compiled, full_check=True)
    assert len(compiled.functions) == 2


def test_inline_mode_writes_a_plain_onnx_model(tmp_path: Path):
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out = tmp_path / "out.onnx"
    assert cli.main([str(source), "-o", str(out), "--mode", "inline", "-q"]) == 0
    compiled = onnx.load(out)
    assert all(n.domain == "" for n in compiled.graph.node)
    feeds = {
        "go": np.array(1.0, np.float32),
        "x": np.ones((2, 4), np.float32),
        "t": np.full((1, 4), 0.5, np.float32),
    }
    g1, g2 = run_session(make_session(compiled), feeds)
    np.testing.assert_allclose(g1, np.full((2, 4), -0.25, np.float32))
    np.testing.assert_allclose(g2, np.full((2, 4), 0.125, np.float32))


def truncated() -> bytes:
    data = good_model().SerializeToString()
    return data[: len(data) // 2]


INVALID = {
    "unknown attribute": (lambda: bad_model(bad_node(foo=1)), ["'broken'", "foo", "161002"]),
    "attribute type": (lambda: bad_model(bad_node(log_target=0.5)), ["'broken'", "log_target"]),
    "reduction": (lambda: bad_model(bad_node(reduction="avg")), ["'broken'", "161002"]),
    "broadcast": (
        lambda: bad_model(x_shape=(4, 3), t_shape=(5, 3)),
        ["'broken'", "do not broadcast", "161002"],
    ),
    "missing input": (
        lambda: bad_model(
            helper.make_node(
                "KlDivBackward", ["go", "", "t"], ["g"], name="broken", domain=spec.DOMAIN
            )
        ),
        ["'broken'", "self", "161001"],
    ),
    "rank 9": (
        lambda: bad_model(x_shape=(1,) * 9, t_shape=(3,)),
        ["'broken'", "rank must be at most 8", "161002"],
    ),
    "malformed protobuf": (truncated, ["is not an ONNX model"]),
    "not onnx": (lambda: b"hello, I am a text file\n", ["is not an ONNX model"]),
    "empty file": (lambda: b"", ["is not an ONNX model"]),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_invalid_input_is_one_line_with_a_non_zero_exit(case, tmp_path: Path, capsys):
    build, words = INVALID[case]
    source = write(tmp_path / "in.onnx", build())
    before = digest(source)
    out = tmp_path / "out.onnx"
    status = cli.main([str(source), "-o", str(out)])
    captured = capsys.readouterr()
    assert status == 1
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lossgrad-compile: error: "), captured.err
    for word in words:
        assert word in lines[0]
    assert digest(source) == before
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [source]  # no temporary file left behind


@pytest.mark.parametrize("case", ["broadcast", "not onnx"])
def test_errors_in_a_real_process_have_no_traceback(case, tmp_path: Path):
    source = write(tmp_path / "in.onnx", INVALID[case][0]())
    run = subprocess.run(
        [*command(), str(source), "-o", str(tmp_path / "out.onnx")], capture_output=True, text=True
    )
    assert run.returncode == 1
    assert len(run.stderr.splitlines()) == 1 and "Traceback" not in run.stderr


def test_missing_file_and_overwriting_the_input_are_errors(tmp_path: Path, capsys):
    assert cli.main([str(tmp_path / "absent.onnx"), "-o", str(tmp_path / "o.onnx")]) == 1
    assert "cannot read" in capsys.readouterr().err
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    before = digest(source)
    assert cli.main([str(source), "-o", str(source)]) == 1
    assert "would overwrite the input" in capsys.readouterr().err
    assert digest(source) == before


def test_usage_errors_exit_with_2(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["in.onnx"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        cli.main(["in.onnx", "-o", "x", "--target", "gpu"])
    assert info.value.code == 2


def _unavailable(monkeypatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import` then raises ImportError


def test_ort_target_unavailable_is_one_line(tmp_path: Path, monkeypatch, capsys):
    _unavailable(monkeypatch, "lossgrad_compiler.runtime.ort")
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    assert cli.main([str(source), "-o", str(tmp_path / "o.onnx"), "--target", "ort"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "target 'ort' is unavailable" in err
    assert not (tmp_path / "o.onnx").exists()


def test_ort_target_writes_the_functions_model_and_copies_the_library(
    tmp_path: Path, monkeypatch, capsys
):
    library = write(tmp_path / "liblossgrad_ort.so", b"not really a library")
    fake = types.ModuleType("lossgrad_compiler.runtime.ort")
    fake.library_path = lambda: library  # type: ignore[attr-defined]
    fake.prepare_model = lambda model: model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lossgrad_compiler.runtime.ort", fake)
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out_dir = tmp_path / "deploy"
    status = cli.main([str(source), "-o", str(out_dir / "m.onnx"), "--target", "ort"])
    report = capsys.readouterr().out
    assert status == 0
    assert (out_dir / library.name).read_bytes() == library.read_bytes()
    assert "register_custom_ops_library" in report and str(out_dir / library.name) in report
    assert len(onnx.load(out_dir / "m.onnx").functions) == 2


def test_ascendc_target_unavailable_is_one_line(tmp_path: Path, monkeypatch, capsys):
    _unavailable(monkeypatch, "lossgrad_compiler.backends.ascendc")
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    assert cli.main([str(source), "-o", str(tmp_path / "proj"), "--target", "ascendc"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "target 'ascendc' is unavailable" in err


def test_ascendc_target_gets_one_level2_function_per_signature(tmp_path: Path, monkeypatch):
    calls = []
    fake = types.ModuleType("lossgrad_compiler.backends.ascendc")
    fake.emit_project = lambda module, out_dir, soc: calls.append(  # type: ignore[attr-defined]
        (module, out_dir, soc)
    )
    monkeypatch.setitem(sys.modules, "lossgrad_compiler.backends.ascendc", fake)
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out = tmp_path / "proj"
    assert cli.main([str(source), "-o", str(out), "--target", "ascendc", "--soc", "x", "-q"]) == 0
    ((module, out_dir, soc),) = calls
    assert (out_dir, soc) == (out, "x")
    names = [f.sym_name.data for f in module.body.block.ops]
    assert names == [
        "kl_div_backward__f32_f32_f32__0d_dxd_1xd__batchmean_log_target0",
        "smooth_l1_loss_backward__f32_f32_f32__0d_dxd_1xd__mean_beta0p5",
    ]
    assert not any(op.name.startswith("lossgrad.") for op in module.walk())  # no op left
    assert "linalg.generic" in str(module)


def test_progress_bar_only_for_many_nodes():
    stream = io.StringIO()
    bar = cli.ProgressBar(stream)
    bar("import", 5, 10)
    bar.close()
    assert stream.getvalue() == ""
    bar("import", 0, 5000)
    bar("import", 5000, 5000)
    bar.close()
    text = stream.getvalue()
    assert "5000/5000 nodes" in text and text.endswith("\n")


def test_ort_target_with_the_real_kernel_library(tmp_path: Path):
    """The written model runs with the copied library registered (skipped without a C++
    toolchain or ORT headers: the runtime then cannot build the kernels)."""
    runtime = pytest.importorskip("lossgrad_compiler.runtime.ort")
    from lossgrad_compiler.backends.ort.build import NativeUnavailableError

    try:
        library = runtime.library_path()
    except NativeUnavailableError as err:
        pytest.skip(f"native kernels unavailable: {err}")
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out = tmp_path / "deploy" / "m.onnx"
    assert cli.main([str(source), "-o", str(out), "--target", "ort", "-q"]) == 0
    copied = out.parent / library.name
    assert copied.exists()
    options = ort.SessionOptions()
    options.register_custom_ops_library(str(copied))
    session = ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])
    feeds = {
        "go": np.array(1.0, np.float32),
        "x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
        "t": np.full((1, 4), 0.5, np.float32),
    }
    inputs = {"grad_output": feeds["go"], "self": feeds["x"], "target": feeds["t"]}
    g1, g2 = session.run(None, feeds)
    attrs1 = {"reduction": "batchmean"}
    np.testing.assert_allclose(g1, reference.evaluate("KlDivBackward", inputs, attrs1), rtol=1e-6)
    attrs2 = {"beta": 0.5}
    expected2 = reference.evaluate("SmoothL1LossBackward", inputs, attrs2)
    np.testing.assert_allclose(g2, expected2, rtol=1e-6)


def test_compile_reports_progress_of_both_phases():
    from lossgrad_compiler.driver import compile_model

    count = 600
    nodes = [lo.make_node("KlDivBackward", ["go", "x", "t"], f"g{i}") for i in range(count)]
    graph = lo.make_graph(
        nodes,
        [("go", "float32", []), ("x", "float32", [3]), ("t", "float32", [3])],
        [(f"g{i}", "float32", [3]) for i in range(count)],
    )
    calls: list[tuple[str, int, int]] = []
    compile_model(lo.make_model(graph), mode="inline", progress=lambda *a: calls.append(a))
    for phase in ("import", "rewrite"):
        seen = [c for c in calls if c[0] == phase]
        assert seen[-1] == (phase, count, count)
        assert [c[1] for c in seen] == sorted(c[1] for c in seen)


def test_ascendc_target_with_the_real_backend(tmp_path: Path, capsys):
    """One project per signature; float64 is refused in one line naming the right target."""
    backend = pytest.importorskip("lossgrad_compiler.backends.ascendc")
    if not hasattr(backend, "emit_project"):
        pytest.skip("the Ascend C backend has no emit_project yet")
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out = tmp_path / "proj"
    assert cli.main([str(source), "-o", str(out), "--target", "ascendc", "-q"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "kl_div_backward__f32_f32_f32__0d_dxd_1xd__batchmean_log_target0",
        "smooth_l1_loss_backward__f32_f32_f32__0d_dxd_1xd__mean_beta0p5",
    ]
    node = lo.make_node("KlDivBackward", ["go", "x", "t"], "g", name="f64")
    graph = lo.make_graph(
        [node],
        [("go", "float64", []), ("x", "float64", [3]), ("t", "float64", [3])],
        [("g", "float64", [3])],
    )
    f64 = write(tmp_path / "f64.onnx", lo.make_model(graph).SerializeToString())
    assert cli.main([str(f64), "-o", str(tmp_path / "p64"), "--target", "ascendc"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "float64" in err and "aclnn 161002" in err
