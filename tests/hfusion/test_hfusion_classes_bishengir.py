"""The classification operators through AscendNPU IR itself: bishengir-opt's HFusion and
HIVM pipelines take the HFusion form of NLLLossBackward / NLLLoss2dBackward (one function
per result, split.py), the CPU runner runs the scheduled kernels bit for bit against
reference.evaluate and raises TARGET_RANGE (aclnn 161002) from the target check's count,
the target writes the check's kernel beside the gradient's, and the forms bishengir 1.2.0
cannot take are pinned or refused with the compiler's limitation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from xdsl.dialects.builtin import ModuleOp

pytest.importorskip("ascendnpuir", reason="needs AscendNPU IR: pip install -e '.[ascend]'")

from lossgrad_compiler import cli, errors, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.backends.ascendnpu_ir import (
    AscendNpuIrSoc,
    BishengirError,
    hfusion_module,
    hivm_text,
    summarize,
)
from lossgrad_compiler.backends.ascendnpu_ir.split import split_results
from lossgrad_compiler.context import make_context
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.class_cases import (
    CLASS_OP_TYPES,
    ClassCase,
    class_case_module,
    class_cases,
    out_of_range_case,
)
from tests.helpers.tolerances import TIGHT, assert_matches, bits
from tests.hfusion import BF16, F16, F32
from tests.hfusion.test_hfusion_classes_form import converted

TARGET = AscendNpuIrSoc()
TYPES = {"float32": F32, "float16": F16, "bfloat16": BF16}


def level2(case: ClassCase, *, dynamic: bool) -> ModuleOp:
    module = class_case_module(case, dynamic=dynamic)
    LowerLossgradPass().apply(make_context(), module)
    return module


@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_every_class_case_reaches_hivm(op_type: str, dtype: str) -> None:
    """Dynamic signatures of every case (and int32 targets for float32): each function of
    the split form outlines device kernels of vector ops and leaves no compute op. A dynamic
    signature does not depend on the values, so about half of the functions are the text of
    another case's: bishengir-opt runs once per distinct text."""
    cases = class_cases(op_type, TYPES[dtype], seed=2)
    if op_type == spec.CROSS_ENTROPY_LOSS_GRAD.name:
        cases = cases[::7]  # 72 cases of up to four functions each: a sample
    if dtype == "float32":
        cases += class_cases(op_type, F32, target_dtype=np.int32, seed=3)[::3]
    labels: dict[str, list[str]] = {}
    for case in cases:
        for function in split_results(converted(case, dynamic=True)).ops:
            text = str(ModuleOp([function.clone()]))
            name = function.sym_name.data  # type: ignore[attr-defined]
            labels.setdefault(text, []).append(f"{case.label} @{name}")
    for text, label in labels.items():
        summary = summarize(hivm_text(text, TARGET))
        assert summary.leftover_compute_ops == {}, label
        assert summary.kernels and all(k.vector_op_count for k in summary.kernels), label


def test_the_gradient_and_the_count_together_are_one_kernel_bishengir_cannot_outline() -> None:
    """Why split.py exists: the unsplit function fails AscendNPU IR 1.2.0's single-kernel
    outlining. When this test fails, the split can go."""
    case = class_cases("NLLLossBackward", F32)[0]
    with pytest.raises(BishengirError, match="outline single kernel failed"):
        hivm_text(str(converted(case, dynamic=True)), TARGET)


def test_static_unit_dimensions_beside_the_class_position_are_refused() -> None:
    case = class_cases("NLLLossBackward", F32)[24]  # self [1, 3]
    assert case.inputs["self"].shape == (1, 3)
    with pytest.raises(UnsupportedByBackendError, match=r"AscendNPU IR 1\.2\.0 cannot compile"):
        hfusion_module(level2(case, dynamic=False))
    hfusion_module(level2(case, dynamic=True))  # the dynamic signature is taken


def test_bishengir_1_2_rejects_the_position_over_a_static_unit_dimension() -> None:
    """The limitation behind the refusal, pinned on the form the pass writes."""
    from lossgrad_compiler.passes.convert_linalg_to_hfusion import ConvertLinalgToHfusionPass

    case = class_cases("NLLLossBackward", F32)[24]
    module = level2(case, dynamic=False)
    ConvertLinalgToHfusionPass().apply(make_context(), module)
    gradient = split_results(module).ops.first
    with pytest.raises(BishengirError, match=r"linalg\.index"):
        hivm_text(str(ModuleOp([gradient.clone()])), TARGET)  # type: ignore[union-attr]


runner = pytest.importorskip("lossgrad_compiler.evaluation.ascendnpu_ir")


def needs_cpu_runner() -> None:
    """Skips where the CPU runner's tools (mlir-translate, llvmlite) are missing."""
    from lossgrad_compiler.backends.ascendnpu_ir.cpu_runner import (
        CpuRunnerUnavailableError,
        llvmlite_binding,
        mlir_translate,
    )

    try:
        mlir_translate()
        llvmlite_binding()
    except CpuRunnerUnavailableError as err:
        pytest.skip(str(err))


def _runner_cases() -> list[ClassCase]:
    cases = []
    for op_type in CLASS_OP_TYPES:
        step = 11 if op_type == spec.CROSS_ENTROPY_LOSS_GRAD.name else 5  # CE: 72 per type
        for k, dtype in enumerate((F32, F16, BF16)):
            cases += class_cases(op_type, dtype, seed=4)[k::step]
        cases += class_cases(op_type, F16, target_dtype=np.int32, seed=5)[::6]
    return cases


@pytest.mark.parametrize("case", _runner_cases(), ids=lambda c: c.label)
def test_the_scheduled_kernels_match_the_reference(case: ClassCase) -> None:
    """Bit for bit, but CrossEntropyLossGrad: its exp is the runner's (its libm may differ
    from numpy's by an ulp) and its sums add in the schedule's tile order, so it is TIGHT
    (4 ulps, 1 per summed term, and 1 ulp of a half result). A half type rounds those ulps
    away nearly always, not always: 6x5 float16, sum, weighted, ls 0.25 differed in the
    clean-clone run."""
    needs_cpu_runner()
    got = runner.evaluate(*case.call)
    wanted = case.expected()
    assert got.dtype == wanted.dtype and got.shape == wanted.shape
    if case.op_type == spec.CROSS_ENTROPY_LOSS_GRAD.name:
        assert_matches(got, wanted, *case.call, tolerance=TIGHT, context=case.label)
        return
    assert (bits(got) == bits(wanted)).all(), f"{case.label}: not bit-identical"


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_bad_targets_raise_target_range(op_type: str) -> None:
    needs_cpu_runner()
    case = out_of_range_case(op_type)
    with pytest.raises(errors.TargetValueError, match=r"holds 2 value\(s\).*161002"):
        runner.evaluate(*case.call)
    i32 = dict(case.inputs, target=case.inputs["target"].astype(np.int32))
    with pytest.raises(errors.TargetValueError, match="161002"):
        runner.evaluate(case.op_type, i32, case.attrs)


def test_bishengir_1_2_cpu_runner_negates_no_mask(tmp_path: Path) -> None:
    """Why hfusion_body_rules negates by `veq(cast(x), 0)`: AscendNPU IR 1.2.0 turns `vne`
    into `vnot(veq)`, and its CPU-runner lowering computes `vnot` on i1 as the identity, so
    `t != ignore_index` came out as `t == ignore_index`. Pinned on a hand-written count; when
    it fails, vne can be emitted."""
    needs_cpu_runner()
    from lossgrad_compiler.backends.ascendnpu_ir.cpu_runner import build_library, llvm_ir
    from lossgrad_compiler.runtime.ascendnpu_ir import RunnerLibrary

    text = (Path(__file__).parent / "data" / "vne_count.mlir").read_text()
    path = tmp_path / "k.so"
    build_library(llvm_ir(text, TARGET), path)
    t = np.array([0, 7, 3, -100, 4] * 8, np.int64)
    got = RunnerLibrary(path).run("f", [t], np.zeros((), np.int64))
    assert int(got) == int(np.count_nonzero(t == 3))  # the count of t == 3, not of t != 3
    assert int(np.count_nonzero(t != 3)) != int(got)


def test_the_target_writes_the_checks_kernel(tmp_path: Path) -> None:
    node = lo.make_node(
        "NLLLossBackward", ["g", "x", "t", "tw"], "y", reduction="mean", ignore_index=1
    )
    graph = lo.make_graph(
        [node],
        [("g", "float16", ()), ("x", "float16", ("N", 5)), ("t", "int64", ("N",)),
         ("tw", "float16", ())],
        ["y"],
        name="nll",
    )  # fmt: skip
    source, out = tmp_path / "nll.onnx", tmp_path / "out"
    onnx.save(lo.make_model(graph), source)
    assert cli.main([str(source), "--target", "ascendnpu-ir", "-o", str(out), "-q"]) == 0
    (summary,) = json.loads((out / "summary.json").read_text())
    folder = out / summary["signature"]
    assert summary["kernels"] and summary["leftover_compute_ops"] == {}
    check = summary["checks"]["target_range"]
    assert check["kernels"] and check["leftover_compute_ops"] == {}
    assert "hfusion.arange" in (folder / "kernel.hfusion.mlir").read_text()
    assert "linalg.reduce" in (folder / "check_target_range.hfusion.mlir").read_text()
    assert "hivm.hir.vreduce" in (folder / "check_target_range.hivm.mlir").read_text()
