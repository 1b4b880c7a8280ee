"""One ai.lossgrad version rule for every entry point that takes a model (issue 44, item 4):
onnx/opsets.check_opset_imports. The reference runtime ran a version-2 operator in a model
importing version 1, and a model importing version 3, which check_model and compile_model
refuse; here every entry point refuses both with the same 161002 message, and runs the
model once its import is right."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from lossgrad_compiler import cli, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID, InvalidArgumentError
from lossgrad_compiler.evaluation import ascendc as ascendc_evaluation
from lossgrad_compiler.evaluation import ort as ort_evaluation
from lossgrad_compiler.pipeline import import_checked, lowered_model

FEEDS = {
    "go": np.ones((), np.float32),
    "x": np.full((2, 4), 0.5, np.float32),
    "t": np.full((2, 4), 0.25, np.float32),
}


def mse_model(version: int) -> onnx.ModelProto:
    """One MseLossBackward (ai.lossgrad from version 2) in a model importing `version`."""
    node = lo.make_node("MseLossBackward", ["go", "x", "t"], "g", name="m1")
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in FEEDS.items()
    ]
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("g", TensorProto.FLOAT, [2, 4])]
    )
    imports = [helper.make_opsetid("", 21), helper.make_opsetid(spec.DOMAIN, version)]
    return helper.make_model(graph, ir_version=10, opset_imports=imports)


ENTRY_POINTS: dict[str, Callable[[onnx.ModelProto], Any]] = {
    "check_model": lo.check_model,
    "compile_model": compile_model,
    "import_checked": import_checked,
    "lowered_model": lowered_model,
    "run_reference": lambda model: lo.run_reference(model, FEEDS),
    "reference_evaluator": lo.reference_evaluator,
    "evaluation.ort.session": lambda model: ort_evaluation.session(model, native=False),
    "evaluation.ascendc.session": ascendc_evaluation.session,
}

REFUSALS = {
    1: "MseLossBackward node 'm1': opset_import: MseLossBackward is in ai.lossgrad from "
    "version 2; the model imports version 1 (import version 2 or later) "
    "[aclnn 161002 ACLNN_ERR_PARAM_INVALID]",
    spec.OPSET_VERSION + 1: f"model: opset_import: model imports ai.lossgrad version "
    f"{spec.OPSET_VERSION + 1}; versions 1 to {spec.OPSET_VERSION} exist "
    "[aclnn 161002 ACLNN_ERR_PARAM_INVALID]",
}


@pytest.mark.parametrize("version", sorted(REFUSALS))
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_entry_point_refuses_the_same_imports_the_same_way(entry: str, version: int):
    with pytest.raises(InvalidArgumentError) as raised:
        ENTRY_POINTS[entry](mse_model(version))
    assert str(raised.value) == REFUSALS[version]
    assert raised.value.code == ACLNN_ERR_PARAM_INVALID


@pytest.mark.parametrize("version", sorted(REFUSALS))
def test_the_command_line_refuses_them_too(
    version: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(mse_model(version), source)
    assert cli.main([str(source), "-o", str(tmp_path / "out.onnx")]) == 1
    line = capsys.readouterr().err.strip()
    assert line == f"lossgrad-compile: error: {REFUSALS[version]}"


def test_the_reference_runtime_runs_the_model_at_version_2() -> None:
    (g,) = lo.run_reference(mse_model(2), FEEDS).values()
    np.testing.assert_allclose(g, np.full((2, 4), 2 * 0.25 / 8, np.float32))


def test_reference_runtime_refuses_a_version_2_operator_in_a_function_of_a_version_1_model():
    """A function body inherits the model's import: the rule's scopes hold here too."""
    body = [lo.make_node("MseLossBackward", ["go", "x", "t"], "g", name="inner")]
    function = helper.make_function(
        "local", "F", ["go", "x", "t"], ["g"], body, [helper.make_opsetid("", 21)]
    )
    model = mse_model(1)
    model.graph.node[0].CopyFrom(helper.make_node("F", ["go", "x", "t"], ["g"], domain="local"))
    model.opset_import.append(helper.make_opsetid("local", 1))
    model.functions.append(function)
    message = re.escape("node 'local.F/inner': opset_import: MseLossBackward is in ai.lossgrad")
    with pytest.raises(InvalidArgumentError, match=message):
        lo.run_reference(model, FEEDS)
