"""emit_project: one CANN custom-operator project per signature, in msOpGen's layout, with
the OpDef, the aclnn API, the ONNX plugin and the build files derived from spec.py; the
`-t ascendc` target; names and sanitising."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.ascendc import emit_project
from lossgrad_compiler.backends.ascendc.build import EMULATOR_DIR, compiler
from lossgrad_compiler.backends.ascendc.signature_info import msopgen_snake, signature_info
from lossgrad_compiler.errors import InvalidArgumentError
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import signature_of
from lossgrad_compiler.opt import main as opt_main


def _signature(
    op_type: str, attrs: dict, shapes=((), (4, 3), (1, 3)), dtype=np.float16, optional=None
):
    infos = {
        n: spec.TensorInfo(np.dtype(dtype), s)
        for n, s in zip(spec.INPUT_NAMES, shapes, strict=True)
    }
    infos.update({n: spec.TensorInfo(np.dtype(dtype), s) for n, s in (optional or {}).items()})
    return signature_of(spec.validate(op_type, infos, attrs))


def _op_type(root: Path) -> str:
    (json_file,) = [p for p in root.glob("*.json") if p.name != "CMakePresets.json"]
    return json_file.stem


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list]:
    signatures = [
        _signature("KlDivTargetBackward", {"reduction": "batchmean", "log_target": 1}),
        _signature("SmoothL1LossBackward", {"reduction": "sum", "beta": 0.25}, dtype=np.float32),
    ]
    out = tmp_path_factory.mktemp("projects")
    return out, emit_project(lower_signatures(signatures), out), signatures


def test_one_project_per_signature_in_msopgen_layout(projects) -> None:
    out, written, signatures = projects
    for signature in signatures:
        root = out / signature.id
        op_type = _op_type(root)
        name = msopgen_snake(op_type)
        expected = {
            f"{op_type}.json", "CMakeLists.txt", "CMakePresets.json", "build.sh",
            f"op_kernel/{name}.cpp", f"op_kernel/{name}_tiling.h", "op_kernel/CMakeLists.txt",
            f"op_host/{name}.cpp", "op_host/CMakeLists.txt",
            f"op_api/aclnn_{name}.h", f"op_api/aclnn_{name}.cpp", "op_api/lossgrad_checks.h",
            "op_api/lossgrad_shapes.h",
            "op_api/CMakeLists.txt", "framework/CMakeLists.txt",
            f"framework/onnx_plugin/{name}_onnx_plugin.cc",
            "framework/onnx_plugin/CMakeLists.txt",
        }  # fmt: skip
        files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        assert files == expected
        assert {p for p in written if root in p.parents} == {root / f for f in files}
        assert (root / "build.sh").stat().st_mode & 0o111


def test_msopgen_json_and_opdef_come_from_spec(projects) -> None:
    out, _, signatures = projects
    signature = signatures[1]  # SmoothL1LossBackward, f32
    root = out / signature.id
    (op,) = json.loads((root / f"{_op_type(root)}.json").read_text())
    assert [d["name"] for d in op["input_desc"]] == list(spec.INPUT_NAMES)
    assert [d["type"] for d in op["input_desc"]] == [["float"]] * 3
    assert op["output_desc"][0]["name"] == spec.SMOOTH_L1_LOSS_BACKWARD.output
    assert [(a["name"], a["default_value"]) for a in op["attr"]] == [
        (a.name, a.default) for a in spec.SMOOTH_L1_LOSS_BACKWARD.attributes
    ]
    host = next((root / "op_host").glob("*.cpp")).read_text()
    assert 'this->Attr("reduction").AttrType(OPTIONAL).String("mean");' in host
    assert 'this->Attr("beta").AttrType(OPTIONAL).Float(1.0f);' in host
    assert 'AddConfig("ascend910b")' in host
    assert 'std::strcmp(attr0, "sum") != 0' in host  # the tiling refuses another signature
    plugin = next((root / "framework" / "onnx_plugin").glob("*.cc")).read_text()
    assert '.OriginOpType("ai.lossgrad::1::SmoothL1LossBackward")' in plugin
    header = next((root / "op_api").glob("aclnn_*.h")).read_text()
    assert "int64_t reduction, double beta, aclTensor* out, uint64_t* workspaceSize" in header


def test_tiling_reads_the_scale_from_the_iteration_shape(projects) -> None:
    """batchmean over self [?, ?]: the divisor is self's dim 0, i.e. iteration dim 0."""
    out, _, signatures = projects
    host = next((out / signatures[0].id / "op_host").glob("*.cpp")).read_text()
    assert "iter.GetDim(0)" in host and "tiling->scale = " in host


def test_soc_option_reaches_the_project(tmp_path: Path) -> None:
    signature = _signature("KlDivBackward", {"reduction": "none"})
    emit_project(lower_signatures([signature]), tmp_path, soc="ascend910_93")
    root = tmp_path / signature.id
    assert 'AddConfig("ascend910_93")' in next((root / "op_host").glob("*.cpp")).read_text()
    assert '"value": "ascend910_93"' in (root / "CMakePresets.json").read_text()
    with pytest.raises(InvalidArgumentError, match="soc: must be one of ascend910b"):
        emit_project(lower_signatures([signature]), tmp_path, soc="gpu")


def test_model_text_never_reaches_cpp(tmp_path: Path) -> None:
    """A function name is only ever printed sanitised; attributes come from spec values."""
    module = lower_signatures([_signature("KlDivBackward", {"reduction": "sum"})])
    (function,) = [f for f in module.ops if isinstance(f, func.FuncOp)]
    evil = 'x"; system("rm -rf /"); //\n#include <evil>'
    function.sym_name = StringAttr(evil)
    function.attributes["lossgrad.op_type"] = StringAttr("KlDivBackward")
    function.attributes["lossgrad.attributes"] = DictionaryAttr(
        {"reduction": StringAttr("sum"), "log_target": StringAttr("0")}
    )
    with pytest.raises(Exception, match="must be an int"):
        emit_project(module, tmp_path)
    function.attributes["lossgrad.attributes"] = DictionaryAttr({"reduction": StringAttr("sum")})
    written = emit_project(module, tmp_path)
    for path in written:
        text = path.read_text()
        assert "system(" not in text and "<evil>" not in text, path
        assert all(" " not in part for part in path.relative_to(tmp_path).parts), path


def test_signature_ids_round_trip() -> None:
    """Every broadcast operator (the classification operators' projects are built and run
    by test_ascendc_classes.py)."""
    for op_type in spec.BROADCAST_OPERATORS:
        op = spec.operator(op_type)
        if op_type == "SmoothL1LossBackward":
            grid = [{"reduction": "mean", "beta": 1e-5}, {"reduction": "none", "beta": 0.0}]
        elif op_type == "HuberLossBackward":
            grid = [{"reduction": "mean", "delta": 0.25}, {"reduction": "sum"}]
        elif "batchmean" in [r.value for r in op.reductions]:
            grid = [{"reduction": "batchmean", "log_target": 1}, {"reduction": "sum"}]
        else:
            grid = [{"reduction": "mean"}, {"reduction": "none"}]
        optional = {n: (3,) for n in op.optional_inputs}  # given, one per column
        for attrs in grid:
            signature = _signature(op_type, attrs, optional=optional)
            module = lower_signatures([signature])
            (function,) = [f for f in module.ops if isinstance(f, func.FuncOp)]
            info = signature_info(function)
            assert info.op.name == op_type
            assert info.attrs == dict(signature.attrs)
            assert info.kernel_name == msopgen_snake(info.op_type)


def test_a_function_without_its_identity_is_refused() -> None:
    """Which operator a function computes is read from the attributes lower-lossgrad puts on
    it, never from its name: without them there is no project to print."""
    module = lower_signatures([_signature("KlDivBackward", {"reduction": "sum"})])
    (function,) = [f for f in module.ops if isinstance(f, func.FuncOp)]
    del function.attributes[level2.OP_TYPE_ATTR]
    with pytest.raises(level2.Level2ContractError, match=r"lossgrad\.op_type"):
        signature_info(function)


def test_a_renamed_function_keeps_its_operator() -> None:
    module = lower_signatures(
        [_signature("SmoothL1LossBackward", {"reduction": "sum", "beta": 2.0})]
    )
    (function,) = [f for f in module.ops if isinstance(f, func.FuncOp)]
    function.sym_name = StringAttr("my_function")
    info = signature_info(function)
    assert info.op is spec.SMOOTH_L1_LOSS_BACKWARD
    assert info.attrs == {"reduction": "sum", "beta": 2.0}
    assert info.project == "my_function"


@pytest.mark.parametrize(
    ("op_type", "snake"),
    [
        ("KlDivTargetBackward", "kl_div_target_backward"),
        ("SmoothL1LossBackward", "smooth_l1_loss_backward"),
        ("KlDivBackwardSig0f1a", "kl_div_backward_sig0f1a"),
        ("ABCDef", "abc_def"),
    ],
)
def test_msopgen_naming_rule(op_type: str, snake: str) -> None:
    assert msopgen_snake(op_type) == snake


def test_lossgrad_opt_target_prints_kernels(tmp_path: Path) -> None:
    module = lower_signatures([_signature("KlDivBackward", {"reduction": "mean"})])
    path = tmp_path / "in.mlir"
    path.write_text(str(module))
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        opt_main([str(path), "-t", "ascendc"])
    text = buffer.getvalue()
    assert text.count('extern "C" __global__ __aicore__ void kl_div_backward_sig') == 1
    assert "Cast(" in text and "Muls(" in text and "struct KlDivBackwardSig" in text
    assert isinstance(module, ModuleOp)


def test_onnx_plugins_compile_against_the_plugin_api(projects) -> None:
    """The framework plugins are checked for syntax and types with the emulation's slice of
    the domi registration API (the rest of each project compiles in every emulation run)."""
    out, _, _ = projects
    cxx, _ = compiler()
    for plugin in out.glob("*/framework/onnx_plugin/*_onnx_plugin.cc"):
        done = subprocess.run(
            [
                cxx,
                "-std=c++17",
                "-fsyntax-only",
                "-Wall",
                "-Werror",
                f"-I{EMULATOR_DIR}",
                str(plugin),
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
