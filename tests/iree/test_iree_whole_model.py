"""Whole ONNX models as one IREE module (`lossgrad-compile --target iree`): the level-2
functions spliced into IREE's ONNX import, the run-time size checks in front of them, and
`runtime.iree.session` running the module by ONNX names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler import cli, demo, examples
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.backends.iree import (
    IreeOptions,
    WholeModelError,
    compile_module,
    compile_whole_model,
    splice,
)
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID, BroadcastError, LossGradError
from lossgrad_compiler.frontend.importer import import_model
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.runtime.iree import SessionInputError, session
from lossgrad_compiler.runtime.ort_io import make_session, run_session

BATCHES = (1, 5, 32)


def compiled(model: onnx.ModelProto, folder: Path, name: str = "model.vmfb") -> Path:
    vmfb, _ = compile_whole_model(model, IreeOptions(), lower_signatures)
    path = folder / name
    path.write_bytes(vmfb)
    return path


def assert_matches(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        max_diff, tolerance, ok, note = demo.compare(g, w)
        assert ok, f"max |diff| {max_diff} > {tolerance} {note}"


def test_cli_compiles_the_example_and_session_matches_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "example.onnx"
    onnx.save(examples.example_model(), source)
    assert cli.main([str(source), "--target", "iree", "-o", str(tmp_path) + "/"]) == 0
    printed = capsys.readouterr().out
    assert f"{len(examples.example_model().graph.node)} ai.lossgrad nodes" in printed
    assert "function: loss_gradients(grad_kl: float32[], student_logp: float32[N,10], " in printed
    assert "-> (grad_student_logp: float32[N,10], grad_class_prior: bfloat16[10]" in printed
    module = session(tmp_path / "example.vmfb")  # a Path, as users write it
    assert module.input_names == [name for name, _, _ in examples.INPUTS]
    model = examples.example_model()
    for batch in BATCHES:
        feeds = examples.example_feeds(batch, seed=batch)
        want = demo.reference_outputs(model, feeds)
        got = module.run(None, feeds)
        assert_matches(got, [want[n] for n in module.output_names])
        (only,) = module.run(["grad_box_pred"], feeds)
        np.testing.assert_array_equal(only, got[2])


def test_standard_nodes_around_the_operators_match_onnxruntime(tmp_path: Path) -> None:
    model = examples.training_step_model()
    module = session(str(compiled(model, tmp_path)))
    ort = make_session(compile_model(model, target="onnx", mode="inline").model, 1)
    for batch in BATCHES:
        feeds = examples.training_step_feeds(batch, seed=batch)
        assert_matches(module.run(None, feeds), run_session(ort, feeds))


def test_the_level2_functions_are_called_not_decomposed() -> None:
    spliced = splice(examples.training_step_model(), lower_signatures)
    for signature in spliced.imported.signatures.values():
        assert f"func.func private @{signature.id}(" in spliced.text
        assert f"call @{signature.id}__checked(" in spliced.text
    assert "torch.operator" not in spliced.text.split("func.func @training_step")[0]
    assert '"onnx.LogSoftmax"' in spliced.text  # the standard nodes stay IREE's to import


def _f64_rank4_model(opset: int) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Exp", ["x"], ["ex"]),
        lo.make_node("SmoothL1LossBackward", ["g", "ex", "t"], "d", reduction="mean", beta=0.25),
        helper.make_node("Add", ["d", "x"], ["y"]),
    ]
    graph = lo.make_graph(
        nodes,
        [("g", "float64", ()), ("x", "float64", ("B", 3, "H", 2)), ("t", "float64", (1, 3, 1, 2))],
        ["y"],
        name="f64_rank4",
    )
    return lo.make_model(graph, onnx_opset=opset)


@pytest.mark.parametrize("opset", [13, 17, 21])
def test_f64_models_at_several_opsets_match_the_onnx_reference(opset: int, tmp_path: Path) -> None:
    model = _f64_rank4_model(opset)
    module = session(compiled(model, tmp_path))
    rng = np.random.default_rng(opset)
    feeds = {
        "g": np.array(1.5),
        "x": rng.standard_normal((2, 3, 5, 2)),
        "t": rng.standard_normal((1, 3, 1, 2)),
    }
    (got,) = module.run(None, feeds)
    assert got.dtype == np.float64
    want = lo.run_reference(model, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def _control_flow_model() -> onnx.ModelProto:
    """An If with a KL node in each branch, and a user function holding a SmoothL1 node."""
    kl = {"reduction": "sum", "log_target": 1}
    then_graph = helper.make_graph(
        [lo.make_node("KlDivBackward", ["g", "x", "t"], "a", **kl)],
        "then",
        [],
        [helper.make_tensor_value_info("a", TensorProto.DOUBLE, None)],
    )
    else_graph = helper.make_graph(
        [lo.make_node("KlDivTargetBackward", ["g", "x", "t"], "b", **kl)],
        "else",
        [],
        [helper.make_tensor_value_info("b", TensorProto.DOUBLE, None)],
    )
    user = helper.make_function(
        "user.fns",
        "ReluThenSmoothL1",
        ["go", "p", "q"],
        ["out"],
        [
            helper.make_node("Relu", ["p"], ["rp"]),
            lo.make_node("SmoothL1LossBackward", ["go", "rp", "q"], "out", reduction="none"),
        ],
        [helper.make_opsetid("", 21), helper.make_opsetid("ai.lossgrad", 1)],
    )
    nodes = [
        helper.make_node("If", ["c"], ["k"], then_branch=then_graph, else_branch=else_graph),
        helper.make_node("ReluThenSmoothL1", ["g", "x", "t"], ["s"], domain="user.fns"),
    ]
    graph = lo.make_graph(
        nodes,
        [
            ("c", "bool", ()),
            ("g", "float64", ()),
            ("x", "float64", ("N", 4)),
            ("t", "float64", ("N", 4)),
        ],
        [("k", "float64", ("N", 4)), ("s", "float64", ("N", 4))],
        name="control_flow",
    )
    model = lo.make_model(graph, functions=[user])
    model.opset_import.append(helper.make_opsetid("user.fns", 1))
    return model


def test_nodes_in_if_branches_and_user_functions(tmp_path: Path) -> None:
    model = _control_flow_model()
    module = session(compiled(model, tmp_path))
    rng = np.random.default_rng(7)
    for condition in (True, False):
        feeds = {
            "c": np.array(condition),
            "g": np.array(0.5),
            "x": rng.standard_normal((3, 4)),
            "t": rng.standard_normal((3, 4)),
        }
        want = lo.run_reference(model, feeds)
        got = module.run(None, feeds)
        np.testing.assert_allclose(got[0], want["k"], rtol=1e-12)
        np.testing.assert_allclose(got[1], want["s"], rtol=1e-12)


def _two_symbols_model(op_type: str, attrs: dict) -> onnx.ModelProto:
    node = lo.make_node(op_type, ["g", "x", "t"], "y", **attrs)
    graph = lo.make_graph(
        [node],
        [("g", "float32", ()), ("x", "float32", ("A", "C")), ("t", "float32", ("B", "D"))],
        ["y"],
        name="two_symbols",
    )
    return lo.make_model(graph)


@pytest.mark.parametrize(
    ("op_type", "attrs"),
    [
        ("SmoothL1LossBackward", {"reduction": "none", "beta": 1.0}),
        ("KlDivBackward", {"reduction": "mean", "log_target": 0}),
    ],
)
def test_dynamic_sizes_that_differ_fail_with_the_aclnn_code(
    op_type: str, attrs: dict, tmp_path: Path
) -> None:
    module = session(compiled(_two_symbols_model(op_type, attrs), tmp_path))
    x = np.ones((4, 3), np.float32)
    feeds = {"g": np.array(1.0, np.float32), "x": x, "t": np.zeros((4, 3), np.float32)}
    (fine,) = module.run(None, feeds)
    assert fine.shape == (4, 3)
    # IREE compares no dynamic sizes: unchecked, the second call read past `t` (a heap
    # corruption that aborted the process) before the guards existed
    for t in (np.zeros((5, 3), np.float32), np.zeros((4, 1000), np.float32)):
        with pytest.raises(BroadcastError) as err:
            module.run(None, {**feeds, "t": t})
        assert err.value.code == ACLNN_ERR_PARAM_INVALID
        assert err.value.op == op_type
        assert "must be equal at run time" in str(err.value)


def test_session_checks_feeds_against_the_model_interface(tmp_path: Path) -> None:
    module = session(compiled(examples.example_model(), tmp_path))
    feeds = examples.example_feeds(4)
    cases = {
        "missing ['box_anchor']": {k: v for k, v in feeds.items() if k != "box_anchor"},
        "unknown ['extra']": {**feeds, "extra": np.zeros(1)},
        "is float64, the model wants float32": {**feeds, "grad_kl": np.array(1.0)},
        "has rank 1, the model wants 2": {**feeds, "box_pred": np.zeros(16, np.float32)},
        "dimension 1 is 5, the model wants 4": {
            **feeds,
            "box_anchor": np.zeros((1, 5), np.float16),
        },
        "dimension 'N' is 4 in input 'student_logp' and 3": {
            **feeds,
            "teacher_logp": feeds["teacher_logp"][:3],
        },
    }
    for message, bad in cases.items():
        with pytest.raises(
            SessionInputError, match=message.replace("[", r"\[").replace("]", r"\]")
        ):
            module.run(None, bad)
    with pytest.raises(SessionInputError, match="unknown output"):
        module.run(["nope"], feeds)


def test_a_module_of_signatures_is_not_a_session(tmp_path: Path) -> None:
    model = examples.example_model()
    path = compile_module(lower_signatures(import_model(model).signatures.values()))
    with pytest.raises(ValueError, match="not a whole-model module"):
        session(path)


def test_invalid_nodes_are_rejected_before_compiling(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = examples.example_model()
    for attr in model.graph.node[2].attribute:
        if attr.name == "beta":
            attr.f = -1.0
    source = tmp_path / "bad.onnx"
    onnx.save(model, source)
    assert cli.main([str(source), "--target", "iree", "-o", str(tmp_path / "bad.vmfb")]) == 1
    error = capsys.readouterr().err
    assert "beta" in error and "[aclnn 161002" in error
    assert not (tmp_path / "bad.vmfb").exists()
    with pytest.raises(LossGradError):
        splice(model, lower_signatures)


def test_untyped_values_are_a_clear_error() -> None:
    model = examples.example_model()
    model.graph.node[0].input[1] = "undefined_value"
    with pytest.raises((WholeModelError, LossGradError)):
        splice(model, lower_signatures)


@pytest.mark.parametrize("backend", ["cuda", "vulkan", "rocm"])
def test_gpu_modules_of_a_whole_model_compile(backend: str, tmp_path: Path) -> None:
    source = tmp_path / "step.onnx"
    onnx.save(examples.training_step_model(), source)
    out = tmp_path / f"step-{backend}.vmfb"
    assert (
        cli.main([str(source), "--target", "iree", "--iree-backend", backend, "-o", str(out), "-q"])
        == 0
    )
    rt = pytest.importorskip("iree.runtime")
    module = rt.VmModule.copy_buffer(rt.VmInstance(), out.read_bytes())  # needs no device
    assert "training_step" in module.function_names


def test_vulkan_refuses_f64_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "f64.onnx"
    onnx.save(_f64_rank4_model(21), source)
    status = cli.main(
        [
            str(source),
            "--target",
            "iree",
            "--iree-backend",
            "vulkan",
            "-o",
            str(tmp_path / "x.vmfb"),
        ]
    )
    assert status == 1
    assert "float64" in capsys.readouterr().err
    with pytest.raises(LossGradError):
        compile_whole_model(_f64_rank4_model(21), IreeOptions("vulkan"), lower_signatures)


@pytest.mark.parametrize(
    "argv",
    [
        ["--target", "onnx", "--iree-backend", "cuda"],
        ["--target", "ort", "--iree-arch", "sm_80"],
        ["--target", "iree", "--mode", "inline"],
        ["--target", "iree", "--iree-backend", "metal"],
    ],
)
def test_iree_options_are_usage_errors_elsewhere(argv: list[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["in.onnx", "-o", str(tmp_path / "out"), *argv])
    assert exit_.value.code == 2


def test_the_output_may_not_overwrite_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "model.onnx"
    onnx.save(examples.example_model(), source)
    assert cli.main([str(source), "--target", "iree", "-o", str(source)]) == 1
    assert "would overwrite the input" in capsys.readouterr().err
    assert onnx.load(source).graph.name == "loss_gradients"
