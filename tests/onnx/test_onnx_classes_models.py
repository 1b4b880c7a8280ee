"""End to end for the classification operators: ONNX models with ai.lossgrad
NLLLossBackward / NLLLoss2dBackward / CrossEntropyLossGrad nodes → compile_model (--target
onnx, functions and inline) → stock ONNX Runtime, bit-identical to reference.evaluate (CE in
float32/float64 within TIGHT: ORT's Exp and ReduceSum; test_onnx_classes_translation's
`assert_agrees`); and what the report says
about the target check, which standard ONNX cannot make (a bad target gives a zero row).

A sample of all_class_cases (every SAMPLE-th case: all four float types, both target types,
every reduction, weight, ignore_index, [C], [N, C, H, W], empty batches), one model per
operator and shape form (symbolic or static shapes) with one node per case, compiled in
each mode. test_onnx_classes_translation.py runs every case from lossgrad-level modules."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from lossgrad_compiler import messages, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.cli import main
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.runtime.ort_io import make_session, run_session
from tests.helpers.class_cases import (
    CLASS_OP_TYPES,
    ClassCase,
    all_class_cases,
    make_class_case,
    out_of_range_case,
)
from tests.onnx.test_onnx_classes_translation import (
    assert_agrees,
    assert_bits_equal,
    safe_result,
)

MODES = ("functions", "inline")
SHORT = {"grad_output": "g", "self": "x", "target": "t", "total_weight": "tw", "weight": "w"}
SAMPLE = 5


def one_element(case: ClassCase, name: str) -> bool:
    """grad_output of a reduced loss (or of [C]) and total_weight: one element, static."""
    per_element = case.attrs["reduction"] == "none" and case.inputs["self"].ndim >= 2
    return name == "total_weight" or (name == "grad_output" and not per_element)


def cases_model(
    cases: list[ClassCase], *, static: bool
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One node per case with its own inputs; every dimension symbolic unless `static` (a
    one-element input keeps its static shape)."""
    nodes, inputs, outputs, feeds = [], [], [], {}
    for k, case in enumerate(cases):
        names = [f"{SHORT[n]}{k}" if n in case.present else "" for n in spec.operator(
            case.op_type).input_names]  # fmt: skip
        while names[-1] == "":
            names.pop()
        nodes.append(
            helper.make_node(
                case.op_type, names, [f"r{k}"], name=f"n{k}", domain=spec.DOMAIN, **case.attrs
            )
        )
        for name, input_name in zip([n for n in names if n], case.present, strict=True):
            array = case.inputs[input_name]
            keep = static or one_element(case, input_name)
            shape = list(array.shape) if keep else [f"{name}_{j}" for j in range(array.ndim)]
            inputs.append((name, array.dtype, shape))
            feeds[name] = array
        result = case.inputs["self"]
        shape = list(result.shape) if static else [f"r{k}_{j}" for j in range(result.ndim)]
        outputs.append((f"r{k}", result.dtype, shape))
    return lo.make_model(lo.make_graph(nodes, inputs, outputs)), feeds


SAMPLED = list(all_class_cases())[::SAMPLE]


def _sampled(op_type: str) -> list[ClassCase]:
    return [c for c in SAMPLED if c.op_type == op_type]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("static", [False, True], ids=["symbolic", "static"])
@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_compiled_model_is_bit_identical_in_onnxruntime(op_type: str, static: bool, mode: str):
    cases = _sampled(op_type)
    model, feeds = cases_model(cases, static=static)
    compiled = compile_model(model, mode=mode).model
    onnx.checker.check_model(compiled, full_check=True)
    if mode == "inline":
        assert spec.DOMAIN not in {n.domain for n in compiled.graph.node}
    for threads in (1, 2):
        outputs = run_session(make_session(compiled, threads), feeds)
        for got, case in zip(outputs, cases, strict=True):
            assert_agrees(got, case.expected(), case, f"{mode}, {threads} threads: {case.label}")


def test_the_sample_covers_every_type_and_form():
    seen = {(c.inputs["self"].dtype.name, c.inputs["target"].dtype.name) for c in SAMPLED}
    assert {f.dtype.name for f in spec.FLOAT_TYPES} <= {s for s, _ in seen}
    assert {"int64", "int32"} <= {t for _, t in seen}
    assert {c.attrs["reduction"] for c in SAMPLED} == {"none", "mean", "sum"}
    assert {"weight" in c.inputs for c in SAMPLED} == {False, True}
    assert {c.attrs["ignore_index"] for c in SAMPLED} == {-100, 1}
    shapes = {c.inputs["self"].shape for c in SAMPLED}
    assert any(len(s) == 1 for s in shapes) and any(len(s) == 4 for s in shapes)
    assert any(0 in s for s in shapes)


@pytest.mark.parametrize("mode", MODES)
def test_one_compiled_file_runs_every_batch_size(mode: str):
    probe = make_class_case("NLLLoss2dBackward", (2, 3, 2, 2), np.float32, reduction="none",
                            weighted=True)  # fmt: skip
    model, _ = cases_model([probe], static=False)
    session = make_session(compile_model(model, mode=mode).model)
    for batch in (0, 1, 3):
        case = make_class_case("NLLLoss2dBackward", (batch, 3, 2, 5), np.float32,
                               reduction="none", weighted=True, seed=batch)  # fmt: skip
        feeds = {f"{SHORT[n]}0": case.inputs[n] for n in case.present}
        (got,) = run_session(session, feeds)
        assert_bits_equal(got, case.expected(), f"N={batch}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_no_classes_at_run_time_give_an_empty_result(op_type: str, mode: str):
    """A symbolic C fed as 0 (which the paths that see values refuse with 161002, and a
    graph cannot): the weight's gather reads its appended zero, never outside the weight,
    and the result is the empty one, not an error of ONNX Runtime's Gather."""
    shape = (2, 3, 2, 2) if op_type == "NLLLoss2dBackward" else (4, 3)
    case = make_class_case(op_type, shape, np.float32, reduction="mean", weighted=True)
    model, feeds = cases_model([case], static=False)
    empty = (shape[0], 0, *shape[2:])
    feeds = {**feeds, "x0": np.zeros(empty, np.float32), "w0": np.zeros(0, np.float32)}
    feeds["t0"] = np.full((shape[0], *shape[2:]), -100, np.int64)
    (got,) = run_session(make_session(compile_model(model, mode=mode).model), feeds)
    assert got.shape == empty and got.dtype == np.float32


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # total_weight 0, unused
@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_functions_model_runs_in_reference_evaluator(op_type: str):
    """The function bodies alone, in onnx's ReferenceEvaluator (one node per model: it
    ignores `overload`)."""
    for case in _sampled(op_type)[1::3]:
        model, feeds = cases_model([case], static=False)
        compiled = compile_model(model, mode="functions").model
        (got,) = ReferenceEvaluator(compiled).run(None, feeds)
        assert_agrees(np.asarray(got), case.expected(), case, f"ReferenceEvaluator: {case.label}")


# --------------------------------------------------------------------------- the target check


def _check_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if messages.TARGET_RANGE.key in line]


@pytest.mark.parametrize("mode", MODES)
def test_the_report_says_a_bad_target_gives_a_zero_row(mode: str):
    cases = [out_of_range_case(op) for op in CLASS_OP_TYPES]
    model, _ = cases_model(cases, static=False)
    result = compile_model(model, mode=mode)
    lines = _check_lines(result.artifact.lines)
    assert len(lines) == len(result.report.signatures) == len(CLASS_OP_TYPES)
    for line, op_type in zip(sorted(lines), sorted(CLASS_OP_TYPES), strict=True):
        assert f"note: {op_type} (signature " in line
        assert "1 node(s)" in line
        assert "a target outside [0, C) that is not ignore_index gives a zero row" in line
        assert "instead of the error aclnn 161002 ACLNN_ERR_PARAM_INVALID" in line


def test_the_report_has_one_line_per_signature_and_none_without_checks():
    cases = [make_class_case("NLLLossBackward", (4, 3), np.float32, seed=k) for k in range(3)]
    model, _ = cases_model(cases, static=True)  # one signature, three nodes
    (line,) = _check_lines(compile_model(model).artifact.lines)
    assert "3 node(s)" in line
    plain = lo.make_model(lo.make_graph(
        [helper.make_node("MseLossBackward", ["g", "x", "t"], ["r"], domain=spec.DOMAIN)],
        [("g", "float32", []), ("x", "float32", [2, 3]), ("t", "float32", [2, 3])],
        [("r", "float32", [2, 3])],
    ))  # fmt: skip
    assert _check_lines(compile_model(plain).artifact.lines) == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("static", [False, True], ids=["symbolic", "static"])
def test_a_bad_target_model_gives_zero_rows_in_onnxruntime(static: bool, mode: str):
    """Targets C and -7 in both operators: ORT runs (no crash, no out-of-bounds read), the
    bad rows are zeros and the others the reference's."""
    cases: list[Any] = [out_of_range_case(op) for op in CLASS_OP_TYPES]
    cases.append(out_of_range_case("NLLLossBackward", np.float16))
    model, feeds = cases_model(cases, static=static)
    outputs = run_session(make_session(compile_model(model, mode=mode).model), feeds)
    for got, case in zip(outputs, cases, strict=True):
        assert_agrees(got, safe_result(case), case, f"{mode}: {case.label}")
        axis = spec.operator(case.op_type).class_dim(got.ndim)
        target = case.inputs["target"]
        bad = (target < 0) | (target >= got.shape[axis])
        assert bad.sum() == 2 and not np.moveaxis(got, axis, -1)[bad].any()


def test_the_command_line_prints_the_note(tmp_path, capsys):
    model, _ = cases_model([out_of_range_case("NLLLoss2dBackward")], static=False)
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    assert main([str(source), "-o", str(tmp_path / "out.onnx"), "--mode", "inline"]) == 0
    (line,) = _check_lines(capsys.readouterr().out.splitlines())
    assert line.startswith("note: NLLLoss2dBackward (signature ")
    assert "gives a zero row instead of the error aclnn 161002" in line
