"""lossgrad-compile: compiled files, the report, and every failure as one line on stderr with a
non-zero exit status, the input file untouched and no output written."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from lossgrad_compiler import cli, reference, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.runtime.ort_io import make_session, run_session
from tests.helpers.ir import lossgrad_ops
from tests.ort.support import native_library


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
    assert "SmoothL1LossBackward 1, MseLossBackward 0, " in run.stdout
    assert (
        "BinaryCrossEntropyWithLogitsBackward 0, L1LossBackward 0, NLLLossBackward 0, "
        "NLLLoss2dBackward 0, CrossEntropyLossGrad 0); 2 distinct signatures: 2 compiled, "
        "0 from the cache" in run.stdout
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
    _unavailable(monkeypatch, "lossgrad_compiler.targets.ort_library")
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    assert cli.main([str(source), "-o", str(tmp_path / "o.onnx"), "--target", "ort"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "target 'ort' is unavailable" in err
    assert not (tmp_path / "o.onnx").exists()


def test_ort_target_writes_the_functions_model_and_copies_the_library(
    tmp_path: Path, monkeypatch, capsys
):
    library = write(tmp_path / "liblossgrad_ort.so", b"not really a library")
    fake = types.ModuleType("lossgrad_compiler.targets.ort_library")
    fake.library_path = lambda: str(library)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lossgrad_compiler.targets.ort_library", fake)
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
    """The driver lowers once and hands the level-2 module to the target, which writes
    the files its backend made under -o."""
    from lossgrad_compiler.backends.ascendc import project

    calls = []

    def emitted(module, soc):
        calls.append((module, soc))
        return {"some_signature/build.sh": "#!/bin/sh\n", "some_signature/a.txt": "text"}

    monkeypatch.setattr(project, "emitted_files", emitted)
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out = tmp_path / "proj"
    assert cli.main([str(source), "-o", str(out), "--target", "ascendc", "--soc", "x", "-q"]) == 0
    ((module, soc),) = calls
    assert soc == "x"
    assert (out / "some_signature" / "a.txt").read_text() == "text"
    assert os.access(out / "some_signature" / "build.sh", os.X_OK)
    names = [f.sym_name.data for f in module.body.block.ops]
    assert names == [
        "kl_div_backward__f32_f32_f32__0d_dxd_1xd__batchmean_log_target0",
        "smooth_l1_loss_backward__f32_f32_f32__0d_dxd_1xd__mean_beta0p5",
    ]
    assert not lossgrad_ops(module) and "linalg.generic" in str(module)


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
    """The written model runs with the copied library registered (skipped, as every native
    test, without a C++ toolchain or ORT headers: the runtime then cannot build the kernels)."""
    library = Path(native_library())
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


# --------------------------------------------------------------------------- output paths


def compiled_bytes(tmp_path: Path, source: Path) -> bytes:
    """What a regular -o receives: the reference for outputs that are not regular files."""
    reference_out = tmp_path / "reference" / "out.onnx"
    assert cli.main([str(source), "-o", str(reference_out), "-q"]) == 0
    return reference_out.read_bytes()


def one_error_line(captured) -> str:
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lossgrad-compile: error: "), captured.err
    return lines[0]


def test_fifo_output_receives_the_model_and_stays_a_fifo(tmp_path: Path):
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the writer's open does not block
    try:
        assert cli.main([str(source), "-o", str(fifo), "-q"]) == 0
        received = b""
        while chunk := os.read(reader, 1 << 16):
            received += chunk
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert received == compiled_bytes(tmp_path, source)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx", "pipe", "reference"]


def test_character_device_output_is_written_in_place(tmp_path: Path, capsys):
    """/dev/null is opened for writing (no root needed), never renamed over."""
    before = os.stat("/dev/null")
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    assert cli.main([str(source), "-o", "/dev/null"]) == 0
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (
        before.st_ino,
        before.st_rdev,
    )
    assert "wrote /dev/null" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_symlink_output_writes_its_target(kind: str, tmp_path: Path, capsys):
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    (tmp_path / "models").mkdir()
    target = write(tmp_path / "models" / "real.onnx", b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to("models/real.onnx" if kind == "relative" else target)
    assert cli.main([str(source), "-o", str(link)]) == 0
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert target.read_bytes() == compiled_bytes(tmp_path, source)
    assert f"wrote {target}" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["real.onnx"]


def test_dangling_symlink_output_is_refused(tmp_path: Path, capsys):
    """Like `cp`, the compiler does not write through a link whose target is missing."""
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    link = tmp_path / "link.onnx"
    link.symlink_to("missing/model.onnx")
    assert cli.main([str(source), "-o", str(link)]) == 1
    line = one_error_line(capsys.readouterr())
    assert "dangling symbolic link" in line and "missing/model.onnx" in line
    assert link.is_symlink() and os.readlink(link) == "missing/model.onnx"
    assert not (tmp_path / "missing").exists()


def test_regular_file_output_is_replaced_and_keeps_its_permissions(tmp_path: Path):
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out = write(tmp_path / "out.onnx", b"previous model")
    out.chmod(0o640)
    assert cli.main([str(source), "-o", str(out), "-q"]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert len(onnx.load(out).functions) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx", "out.onnx"]


@pytest.mark.parametrize("special", ["fifo", "/dev/null"])
def test_ort_target_refuses_an_output_it_cannot_put_a_library_beside(
    special: str, tmp_path: Path, monkeypatch, capsys
):
    _fake_ort_runtime(tmp_path, monkeypatch)
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out = tmp_path / "pipe" if special == "fifo" else Path(special)
    if special == "fifo":
        os.mkfifo(out)
    assert cli.main([str(source), "-o", str(out), "--target", "ort"]) == 1
    line = one_error_line(capsys.readouterr())
    assert "also writes the kernel library" in line
    assert stat.S_ISFIFO(os.lstat(out).st_mode) or stat.S_ISCHR(os.lstat(out).st_mode)


@pytest.mark.parametrize("kind", ["regular file", "FIFO", "character device"])
def test_ascendc_target_refuses_an_output_that_is_not_a_directory(
    kind: str, tmp_path: Path, capsys
):
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    if kind == "character device":
        out = Path("/dev/null")
    else:
        out = tmp_path / "out"
        os.mkfifo(out) if kind == "FIFO" else out.write_bytes(b"keep")
    assert cli.main([str(source), "-o", str(out), "--target", "ascendc"]) == 1
    line = one_error_line(capsys.readouterr())
    assert f"is a {kind}; --target ascendc writes a project directory" in line
    if kind == "regular file":
        assert out.read_bytes() == b"keep"


def test_ascendc_target_follows_a_symlink_to_a_directory(tmp_path: Path):
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    (tmp_path / "projects").mkdir()
    link = tmp_path / "link"
    link.symlink_to("projects")
    assert cli.main([str(source), "-o", str(link), "--target", "ascendc", "-q"]) == 0
    assert link.is_symlink()
    assert len([p for p in (tmp_path / "projects").iterdir() if p.is_dir()]) == 2


def test_an_output_name_as_long_as_the_file_system_allows(tmp_path: Path):
    """The temporary file has a short name of its own, not the output's name plus a suffix."""
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out = tmp_path / ("m" * 250 + ".onnx")  # 255 bytes, the usual NAME_MAX
    assert cli.main([str(source), "-o", str(out), "-q"]) == 0
    assert len(onnx.load(out).functions) == 2


@pytest.mark.parametrize("form", ["trailing slash, new folder", "existing folder"])
def test_a_directory_output_receives_the_input_file_name(form: str, tmp_path: Path):
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    folder = tmp_path / "deploy"
    if form == "existing folder":
        folder.mkdir()
        argument = str(folder)
    else:
        argument = f"{folder}/"
    assert cli.main([str(source), "-o", argument, "-q"]) == 0
    assert folder.is_dir()
    assert len(onnx.load(folder / "in.onnx").functions) == 2


def test_a_directory_output_must_not_be_the_inputs_folder(tmp_path: Path, capsys):
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    before = digest(source)
    assert cli.main([str(source), "-o", f"{tmp_path}/"]) == 1
    assert "would overwrite the input" in one_error_line(capsys.readouterr())
    assert digest(source) == before


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--target", "ascendc", "--mode", "inline"], "--mode applies to --target onnx and ort"),
        (["--target", "ascendc", "--mode", "functions"], "--mode applies to --target onnx"),
        (["--target", "ort", "--mode", "inline"], "drop --mode inline"),
        (["--soc", "ascend950"], "--soc applies to --target ascendc and ascendnpu-ir, not to onnx"),
        (["-o", ""], "-o needs a path"),
    ],
)
def test_options_the_target_does_not_use_are_usage_errors(arguments, words, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["in.onnx", "-o", "out", *arguments])
    assert info.value.code == 2
    assert words in capsys.readouterr().err


def _fake_ort_runtime(tmp_path: Path, monkeypatch) -> Path:
    """A runtime module whose library_path() is a small file in tmp_path/cache."""
    (tmp_path / "cache").mkdir()
    library = write(tmp_path / "cache" / "liblossgrad_ort.so", b"not really a library")
    fake = types.ModuleType("lossgrad_compiler.targets.ort_library")
    fake.library_path = lambda: str(library)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lossgrad_compiler.targets.ort_library", fake)
    return library


def test_ort_output_named_like_the_library_is_refused(tmp_path: Path, monkeypatch, capsys):
    """The model would be written, then overwritten by the library copied beside it."""
    library = _fake_ort_runtime(tmp_path, monkeypatch)
    source = write(tmp_path / "in.onnx", good_model().SerializeToString())
    out = tmp_path / "deploy" / library.name
    assert cli.main([str(source), "-o", str(out), "--target", "ort"]) == 1
    assert "the kernel library's own file name" in one_error_line(capsys.readouterr())
    assert not out.exists()
    assert library.read_bytes() == b"not really a library"


# --------------------------------------------------------------------------- external data


def external_data_model(folder: Path, location: str = "weights.bin") -> tuple[Path, np.ndarray]:
    """in/ok.onnx: SmoothL1LossBackward with its target an initializer stored in
    `folder/location` (the way onnx.save_model writes external data)."""
    node = lo.make_node("SmoothL1LossBackward", ["go", "x", "t"], "g", reduction="none")
    graph = lo.make_graph(
        [node], [("go", "float32", []), ("x", "float32", [256])], [("g", "float32", [256])]
    )
    target = np.linspace(-1, 1, 256, dtype=np.float32)
    graph.initializer.append(numpy_helper.from_array(target, "t"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ok.onnx"
    onnx.save_model(
        lo.make_model(graph), path, save_as_external_data=True, location=location,
        size_threshold=0,
    )  # fmt: skip
    return path, target


def run_external_data_model(path: Path, target: np.ndarray) -> None:
    session = make_session(onnx.load(path))  # onnx.load reads the data beside `path`
    x = np.linspace(-2, 2, 256, dtype=np.float32)
    feeds = {"go": np.array(1.0, np.float32), "x": x}
    (got,) = run_session(session, feeds)
    inputs = {"grad_output": feeds["go"], "self": x, "target": target}
    expected = reference.evaluate("SmoothL1LossBackward", inputs, {"reduction": "none"})
    np.testing.assert_array_equal(got, expected)
    direct = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(direct.run(None, feeds)[0], expected)


def test_external_data_is_written_beside_the_output(tmp_path: Path, capsys):
    source, target = external_data_model(tmp_path / "in")
    before = {p.name: digest(p) for p in (tmp_path / "in").iterdir()}
    out = tmp_path / "other" / "out.onnx"
    assert cli.main([str(source), "-o", str(out)]) == 0
    assert f"wrote its external data to {out}.data" in capsys.readouterr().out
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.onnx", "out.onnx.data"]
    written = onnx.load(out, load_external_data=False).graph.initializer[0]
    assert {e.key: e.value for e in written.external_data}["location"] == "out.onnx.data"
    run_external_data_model(out, target)
    assert {p.name: digest(p) for p in (tmp_path / "in").iterdir()} == before


def test_external_data_goes_inline_into_a_stream(tmp_path: Path):
    source, target = external_data_model(tmp_path / "in")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert cli.main([str(source), "-o", str(fifo), "-q"]) == 0
        received = b""
        while chunk := os.read(reader, 1 << 16):
            received += chunk
    finally:
        os.close(reader)
    model = onnx.load_model_from_string(received)
    (initializer,) = model.graph.initializer
    assert initializer.data_location == TensorProto.DEFAULT
    np.testing.assert_array_equal(numpy_helper.to_array(initializer), target)


def test_output_must_not_overwrite_the_inputs_external_data(tmp_path: Path, capsys):
    source, _ = external_data_model(tmp_path / "in", location="out.onnx.data")
    data = tmp_path / "in" / "out.onnx.data"
    before = digest(data)
    assert cli.main([str(source), "-o", str(tmp_path / "in" / "out.onnx")]) == 1
    assert "would overwrite the input" in one_error_line(capsys.readouterr())
    assert digest(data) == before
    assert cli.main([str(source), "-o", str(data)]) == 1
    assert "would overwrite the input" in one_error_line(capsys.readouterr())
    assert digest(data) == before


@pytest.mark.parametrize("escape", ["parent folder", "absolute path", "symbolic link"])
def test_external_data_outside_the_model_folder_is_never_read(escape: str, tmp_path: Path, capsys):
    """onnx's external-data reader refuses these locations; the compiler reads through it."""
    secret = write(tmp_path / "secret.bin", b"SECRET" * 200)
    source, _ = external_data_model(tmp_path / "in")
    if escape == "symbolic link":
        (tmp_path / "in" / "weights.bin").unlink()
        (tmp_path / "in" / "weights.bin").symlink_to(secret)
    else:
        model = onnx.load(source, load_external_data=False)
        location = "../secret.bin" if escape == "parent folder" else str(secret)
        for entry in model.graph.initializer[0].external_data:
            if entry.key == "location":
                entry.value = location
        source.write_bytes(model.SerializeToString())
    out = tmp_path / "other" / "out.onnx"
    assert cli.main([str(source), "-o", str(out)]) == 1
    line = one_error_line(capsys.readouterr())
    assert "external data of tensor 't'" in line
    assert not out.exists() and not (tmp_path / "other" / "out.onnx.data").exists()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()]
    written.remove(secret)
    assert all(b"SECRET" not in p.read_bytes() for p in written)


def test_the_flags_no_target_option_may_take_are_the_commands_own() -> None:
    """targets.interface.COMMAND_FLAGS, which a target's declaration is checked against."""
    from lossgrad_compiler.targets.interface import COMMAND_FLAGS

    parser = cli.build_parser([])
    own = {flag for action in parser._actions for flag in action.option_strings}
    assert own == COMMAND_FLAGS
