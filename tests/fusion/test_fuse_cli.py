"""lossgrad-compile --fuse and --fuse-only on an exporter-style graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from lossgrad_compiler import cli, spec
from lossgrad_compiler.evaluation.ort import session
from lossgrad_compiler.runtime.ort_io import run_session
from tests.fusion.test_fuse_graphs import FEEDS, smooth_l1_graph


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    path = tmp_path / "exported.onnx"
    onnx.save(smooth_l1_graph(scale=0.25), str(path))
    return path


def test_fuse_only_writes_the_fused_model(exported: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fused.onnx"
    assert cli.main([str(exported), "--fuse-only", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fused SmoothL1LossBackward(beta=0.5, reduction=none)" in printed
    fused = onnx.load(str(out))
    assert [(n.domain, n.op_type) for n in fused.graph.node] == [
        (spec.DOMAIN, "SmoothL1LossBackward")
    ]
    want = run_session(session(str(exported)), FEEDS)[0]
    np.testing.assert_allclose(run_session(session(str(out)), FEEDS)[0], want, rtol=2e-7)


def test_fuse_then_inline(exported: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "inline.onnx"
    assert cli.main([str(exported), "--fuse", "--mode", "inline", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("fused 1 SmoothL1LossBackward") and "wrote" in printed
    inlined = onnx.load(str(out))
    assert all(n.domain != spec.DOMAIN for n in inlined.graph.node)
    want = run_session(session(str(exported)), FEEDS)[0]
    np.testing.assert_allclose(run_session(session(str(out)), FEEDS)[0], want, rtol=2e-7)


def test_fuse_for_the_native_target(exported: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "ort.onnx"
    assert cli.main([str(exported), "--fuse", "--target", "ort", "-o", str(out)]) == 0
    assert "copied the kernel library" in capsys.readouterr().out
    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert ops == ["SmoothL1LossBackward"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--target", "ort"], "--fuse-only writes an ONNX model"),
        (["--mode", "inline"], "--fuse-only compiles nothing"),
    ],
)
def test_fuse_only_usage_errors(exported: Path, extra: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([str(exported), "--fuse-only", "-o", "x.onnx", *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_fuse_only_with_external_data(tmp_path: Path, capsys) -> None:
    """Initializers stored outside the model are not read to fuse (they are no scale or
    beta a form needs here), and the fused model keeps its data beside it."""
    model = smooth_l1_graph()
    big = np.zeros((64, 64), np.float32)
    model.graph.initializer.append(onnx.numpy_helper.from_array(big, "unused_weight"))
    source = tmp_path / "big.onnx"
    onnx.save(model, str(source), save_as_external_data=True, size_threshold=1024)
    out = tmp_path / "fused.onnx"
    assert cli.main([str(source), "--fuse-only", "-o", str(out)]) == 0
    assert "fused SmoothL1LossBackward" in capsys.readouterr().out
    fused = onnx.load(str(out))
    assert [n.op_type for n in fused.graph.node] == ["SmoothL1LossBackward"]
    assert any(i.name == "unused_weight" for i in fused.graph.initializer)


def test_fuse_reassociate_is_opt_in(tmp_path: Path, capsys) -> None:
    """A hand-written KlDivTargetBackward that groups its operations otherwise than the
    operator: left by --fuse-only, fused by --fuse-only --fuse-reassociate, which says so."""
    from tests.fusion.graphs import Recipe, build

    source = tmp_path / "klt.onnx"
    onnx.save(build(Recipe("klt_grouped", scale="const")).model, str(source))
    out = tmp_path / "fused.onnx"
    assert cli.main([str(source), "--fuse-only", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fused nothing" in printed and "(--fuse-reassociate) accepts it" in printed
    assert cli.main([str(source), "--fuse-only", "--fuse-reassociate", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fused KlDivTargetBackward" in printed and "reassociated" in printed
    assert [n.op_type for n in onnx.load(str(out)).graph.node] == ["KlDivTargetBackward"]


def test_fuse_reassociate_needs_fuse(exported: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([str(exported), "--fuse-reassociate", "-o", "x.onnx"])
    assert exit_info.value.code == 2
    assert "--fuse-reassociate applies to --fuse and --fuse-only" in capsys.readouterr().err
