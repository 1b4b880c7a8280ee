"""An initializer of a graph input (its default value) whose type or shape is not the one the
input declares: found by fuzzing (36 of 62,386 mutated models), where onnx's raw
`InferenceError` ("Inferred elem type differs from existing elem type: (11) vs (1)") escaped
compile_model without naming the value. Now one line with 161002 naming the initializer,
from compile_model and the CLI, whether or not the importer runs shape inference; anything
else onnx's inference refuses is one line with 161002 too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from lossgrad_compiler import cli
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID, InvalidArgumentError
from lossgrad_compiler.frontend import inference

F32 = TensorProto.FLOAT


def model(read: str, initializers=(), sparse=(), x_dims=(2, 3)) -> onnx.ModelProto:
    """SmoothL1LossBackward reading `read`: "x" itself (its declared type is enough, nothing
    is inferred) or "xn" = Neg(x) (typed by onnx's inference)."""
    nodes = [helper.make_node("Neg", ["x"], ["xn"])] if read == "xn" else []
    nodes.append(lo.make_node("SmoothL1LossBackward", ["g", read, "t"], "y", beta=1.0))
    graph = lo.make_graph(
        nodes,
        [("g", "float32", ()), ("x", "float32", x_dims), ("t", "float32", (2, 3))],
        [("y", "float32", (2, 3))],
        name="g",
    )
    graph.initializer.extend(initializers)
    graph.sparse_initializer.extend(sparse)
    return lo.make_model(graph)


def sparse_x(dtype: type) -> onnx.SparseTensorProto:
    values = numpy_helper.from_array(np.array([1.0], dtype), "x")
    indices = numpy_helper.from_array(np.array([0], np.int64), "x_indices")
    return helper.make_sparse_tensor(values, indices, [2, 3])


CONFLICTS = {
    "element type": (
        {"initializers": [numpy_helper.from_array(np.zeros((2, 3)), "x")]},
        "it is float64 [2,3], but the graph declares its input 'x' float32 [2,3]",
    ),
    "integer": (
        {"initializers": [numpy_helper.from_array(np.zeros((2, 3), np.int64), "x")]},
        "it is int64 [2,3], but the graph declares its input 'x' float32 [2,3]",
    ),
    "rank": (
        {"initializers": [numpy_helper.from_array(np.zeros(6, np.float32), "x")]},
        "it is float32 [6], but the graph declares its input 'x' float32 [2,3]",
    ),
    "dimension": (
        {"initializers": [numpy_helper.from_array(np.zeros((2, 4), np.float32), "x")]},
        "it is float32 [2,4], but the graph declares its input 'x' float32 [2,3]",
    ),
    "sparse": (
        {"sparse": [sparse_x(np.float64)]},
        "it is a sparse tensor of float64 [2,3], but the graph declares its input 'x' "
        "float32 [2,3]",
    ),
}


@pytest.mark.parametrize("read", ["x", "xn"], ids=["declared", "inferred"])
@pytest.mark.parametrize("conflict", CONFLICTS)
def test_compile_model_names_the_initializer(conflict: str, read: str) -> None:
    parts, says = CONFLICTS[conflict]
    with pytest.raises(InvalidArgumentError) as raised:
        compile_model(model(read, **parts))
    message = str(raised.value)
    assert raised.value.code == ACLNN_ERR_PARAM_INVALID
    assert message.startswith(f"model: initializer 'x': {says}; "), message
    assert message.endswith("[aclnn 161002 ACLNN_ERR_PARAM_INVALID]")
    assert "\n" not in message


def test_the_cli_prints_one_line_naming_the_initializer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "clash.onnx"
    onnx.save(model("xn", **CONFLICTS["element type"][0]), source)
    assert cli.main([str(source), "-o", str(tmp_path / "out.onnx")]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith("lossgrad-compile: error: model: initializer 'x': it is float64")
    assert "[aclnn 161002 ACLNN_ERR_PARAM_INVALID]" in error
    assert not (tmp_path / "out.onnx").exists()


def test_an_initializer_of_a_loop_body_input_is_checked_too() -> None:
    """Subgraphs have inputs as well (a Loop body's iteration count, condition and carried
    values); the error says which graph."""
    body = lo.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            lo.make_node("SmoothL1LossBackward", ["g", "carried", "t"], "grad", beta=1.0),
        ],
        [("i", "int64", ()), ("cond", "bool", ()), ("carried", "float32", (2, 3))],
        [("cond_out", "bool", ()), ("grad", "float32", (2, 3))],
        name="body",
    )
    body.initializer.append(numpy_helper.from_array(np.zeros((2, 3), np.float16), "carried"))
    loop = helper.make_node("Loop", ["n", "", "x"], ["y"], name="loop", body=body)
    graph = lo.make_graph(
        [loop],
        [("n", "int64", ()), ("g", "float32", ()), ("x", "float32", (2, 3)),
         ("t", "float32", (2, 3))],
        [("y", "float32", (2, 3))],
        name="g",
    )  # fmt: skip
    with pytest.raises(InvalidArgumentError) as raised:
        compile_model(lo.make_model(graph))
    assert str(raised.value).startswith(
        "model: initializer 'carried': it is float16 [2,3], but subgraph 'body' of node "
        "'loop' declares its input 'carried' float32 [2,3]; "
    )


@pytest.mark.parametrize("read", ["x", "xn"], ids=["declared", "inferred"])
def test_an_initializer_of_the_declared_type_is_a_default_value(read: str) -> None:
    """Symbolic dimensions take any size."""
    default = numpy_helper.from_array(np.ones((2, 3), np.float32), "x")
    result = compile_model(model(read, initializers=[default], x_dims=("N", 3)))
    assert result.report.nodes == 1


def test_anything_else_onnx_inference_refuses_is_one_line_with_161002(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No other refusal of the importer's (non-strict) inference is known; one would come out
    in onnx's words, with the code, instead of as onnx's own exception."""

    def refuse(model: onnx.ModelProto, strict_mode: bool = False) -> onnx.ModelProto:
        raise onnx.shape_inference.InferenceError(
            "[TypeInferenceError] type case mismatch.\n existing=tensor_type"
        )

    monkeypatch.setattr(inference.onnx.shape_inference, "infer_shapes", refuse)
    with pytest.raises(InvalidArgumentError) as raised:
        compile_model(model("xn"))
    assert str(raised.value) == (
        "model: value types: onnx's shape inference refuses the model: [TypeInferenceError] "
        "type case mismatch. existing=tensor_type [aclnn 161002 ACLNN_ERR_PARAM_INVALID]"
    )
