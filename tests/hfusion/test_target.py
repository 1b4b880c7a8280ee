"""`lossgrad-compile --target ascendnpu-ir`: per signature, the HFusion form, the HIVM IR
bishengir-opt makes of it, the bishengir-compile command and a JSON summary; the SoC option;
the one-line errors; and the reader of bishengir's HIVM text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest

pytest.importorskip("ascendnpuir", reason="needs AscendNPU IR: pip install -e '.[ascend]'")

from lossgrad_compiler import cli, examples
from lossgrad_compiler.backends.ascendnpu_ir import (
    AscendNpuIrSoc,
    AscendNpuIrUnavailableError,
    BishengirError,
    summarize,
    toolchain,
)
from lossgrad_compiler.context import parse_module
from lossgrad_compiler.dialects import hfusion as hf
from lossgrad_compiler.errors import UnsupportedByBackendError


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    path = tmp_path / "example.onnx"
    onnx.save(examples.example_model(), path)
    return path


def test_every_signature_gets_its_four_files(model_path: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert cli.main([str(model_path), "--target", "ascendnpu-ir", "-o", str(out)]) == 0
    report = capsys.readouterr().out
    nodes = examples.example_model().graph.node  # one distinct signature each
    assert f"{len(nodes)} distinct signatures: " in report
    assert "; target ascendnpu-ir (ascend910b, Ascend910B1, block dim 48)" in report
    index = json.loads((out / "summary.json").read_text())
    assert sorted(s["operator"] for s in index) == sorted(n.op_type for n in nodes)
    for summary in index:
        folder = out / summary["signature"]
        assert json.loads((folder / "summary.json").read_text()) == summary
        hfusion = parse_module((folder / "kernel.hfusion.mlir").read_text())
        named = [op for op in hfusion.walk() if isinstance(op, hf.ElementwiseNamedOp)]
        assert named and not [op for op in hfusion.walk() if op.name == "linalg.generic"]
        hivm = (folder / "kernel.hivm.mlir").read_text()
        assert summary == {**summary, **summarize(hivm).as_json()}
        assert summary["kernels"] and summary["leftover_compute_ops"] == {}
        for kernel in summary["kernels"]:
            assert kernel["block_dim"] == 48 and kernel["fusion_kind"]
            assert kernel["vector_op_count"] == sum(kernel["vector_ops"].values()) > 0
            assert all(name.startswith("hivm.hir.v") for name in kernel["vector_ops"])
            assert kernel["ub_buffers"] and kernel["tile_elements"] > 0
        script = folder / "compile.sh"
        assert os.access(script, os.X_OK)
        assert (
            "bishengir-compile kernel.hfusion.mlir --enable-hfusion-compile=true "
            "--enable-hivm-compile=true --target=Ascend910B1 --block-dim=48 -o kernel.o"
        ) in script.read_text()


def test_the_soc_sets_the_device_and_the_block_dim(model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [str(model_path), "--target", "ascendnpu-ir", "--soc", "ascend910b3", "-o", str(out)]
    assert cli.main([*argv, "-q"]) == 0
    (summary, *_) = json.loads((out / "summary.json").read_text())
    assert summary["device"] == "Ascend910B3" and summary["block_dim"] == 40
    assert {k["block_dim"] for k in summary["kernels"]} == {40}


def test_an_soc_bishengir_does_not_drive_is_one_line(model_path: Path, tmp_path: Path, capsys):
    argv = [str(model_path), "--target", "ascendnpu-ir", "--soc", "ascend950", "-o", str(tmp_path)]
    assert cli.main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "Ascend 950 needs the separate *-a5 tools" in line and "[aclnn 161002" in line


def test_options_of_other_targets_are_usage_errors(model_path: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main([str(model_path), "--target", "ascendnpu-ir", "--mode", "inline", "-o", "x"])
    assert exit_.value.code == 2


def test_without_the_extra_the_target_says_what_to_install(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(toolchain, "PACKAGE", "ascendnpuir_not_installed")
    toolchain.package_folder.cache_clear()
    try:
        with pytest.raises(AscendNpuIrUnavailableError, match=r"lossgrad_compiler\[ascend\]"):
            toolchain.tool("bishengir-opt")
        argv = [str(model_path), "--target", "ascendnpu-ir", "-o", str(tmp_path / "o")]
        assert cli.main(argv) == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert line.endswith("pip install 'lossgrad_compiler[ascend]'")
        assert not (tmp_path / "o").exists()
    finally:
        toolchain.package_folder.cache_clear()


def test_a_rejected_input_names_the_tool_and_its_diagnostic() -> None:
    wanted = r"(?s)bishengir-opt failed \(exit 1\): .*error: .*command: "
    with pytest.raises(BishengirError, match=wanted):
        toolchain.run_opt("func.func @f( {", ["--lower-hfusion-pipeline"])


def test_float64_models_are_refused(tmp_path: Path, capsys) -> None:
    model = examples.example_model()
    for value in [*model.graph.input, *model.graph.output]:
        if value.type.tensor_type.elem_type != onnx.TensorProto.INT64:  # labels stay indices
            value.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    path = tmp_path / "f64.onnx"
    onnx.save(model, path)
    assert cli.main([str(path), "--target", "ascendnpu-ir", "-o", str(tmp_path / "o")]) == 1
    assert "float64 is not supported by AscendNPU IR" in capsys.readouterr().err


def test_the_target_only_names_socs_of_the_table() -> None:
    with pytest.raises(UnsupportedByBackendError, match="ascend910b, ascend910b3, ascend910_93"):
        AscendNpuIrSoc("ascend310p")


HIVM = (Path(__file__).parent / "data" / "sample.hivm.mlir").read_text()
"""A hand-made module in the shape bishengir-opt prints: a host tiling function, a device
kernel, and a host function that still holds a linalg.generic."""


def test_the_hivm_reader_counts_kernels_ops_buffers_and_leftovers() -> None:
    summary = summarize(HIVM)
    (kernel,) = summary.kernels
    assert (kernel.name, kernel.fusion_kind, kernel.block_dim) == ("sig_0_0", "PURE_ELEMWISE", 48)
    assert kernel.vector_ops == {"hivm.hir.vmul": 2} and (kernel.loads, kernel.stores) == (1, 1)
    assert [b.bytes for b in kernel.buffers] == [65536, 2048]
    assert kernel.tile_elements == 65536 // 4  # the mask buffer does not count
    assert summary.kernels_of("sig") == [kernel] and summary.kernels_of("si") == []
    assert summary.leftover_compute_ops == {"linalg.generic": 1, "linalg.yield": 1}
