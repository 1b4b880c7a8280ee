"""Model-level checks before compiling: the ai.lossgrad opset import (versions 1 to 4; an
operator only from its own version on)
and the model's structure (onnx's checker without full_check, plus what it misses), through
compile_model, the lossgrad-compile CLI and lo.check_model."""

from __future__ import annotations

import re

import onnx
import pytest
from onnx import TensorProto, helper

from lossgrad_compiler import cli, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID, CompileError, InvalidArgumentError
from lossgrad_compiler.pipeline import lowered_model

F32 = TensorProto.FLOAT
KL = "KlDivBackward"
MSE = "MseLossBackward"


def vi(name: str, shape: list | None = None, elem: int = F32) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def kl(inputs: list[str], output: str, name: str) -> onnx.NodeProto:
    return lo.make_node(KL, inputs, output, name=name, reduction="sum")


INPUTS = [vi("go", []), vi("x", ["N", 4]), vi("t", ["N", 4])]


def model_with(
    nodes: list[onnx.NodeProto],
    lossgrad_version: int | None = 1,
    outputs: tuple[str, ...] = ("g",),
    functions: tuple[onnx.FunctionProto, ...] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", INPUTS, [vi(o, ["N", 4]) for o in outputs])
    imports = [helper.make_opsetid("", 21), helper.make_opsetid("local", 1)]
    if lossgrad_version is not None:
        imports.append(helper.make_opsetid(spec.DOMAIN, lossgrad_version))
    return helper.make_model(graph, ir_version=10, opset_imports=imports, functions=list(functions))


def one_node(version: int | None) -> onnx.ModelProto:
    return model_with([kl(["go", "x", "t"], "g", "n1")], version)


# --------------------------------------------------------------------------- opset import


@pytest.mark.parametrize("version", [0, spec.OPSET_VERSION + 1, 7])
def test_other_lossgrad_opset_versions_are_rejected_with_161002(version: int, tmp_path, capsys):
    model = one_node(version)
    message = re.escape(
        f"imports {spec.DOMAIN} version {version}; versions 1 to {spec.OPSET_VERSION} exist"
    )
    for run in (compile_model, lo.check_model, lowered_model):
        with pytest.raises(InvalidArgumentError, match=message) as raised:
            run(model)
        assert raised.value.code == ACLNN_ERR_PARAM_INVALID
    path = tmp_path / "in.onnx"
    onnx.save(model, path)
    assert cli.main([str(path), "-o", str(tmp_path / "out.onnx")]) == 1
    assert re.search(message + r".*\[aclnn 161002", capsys.readouterr().err)
    assert not (tmp_path / "out.onnx").exists()


def test_a_missing_lossgrad_opset_import_is_rejected_with_161002():
    with pytest.raises(InvalidArgumentError, match=r"imports no ai\.lossgrad opset") as raised:
        compile_model(one_node(None))
    assert raised.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(InvalidArgumentError, match=r"imports no ai\.lossgrad opset"):
        lo.check_model(one_node(None))


def mse(version: int | None) -> onnx.ModelProto:
    return model_with([lo.make_node(MSE, ["go", "x", "t"], "g", name="m1")], version)


def test_a_version_2_operator_needs_version_2():
    """MseLossBackward came in version 2: a version-1 scope cannot resolve it (onnx would
    find no schema there and skip the node); a missing import names version 2."""
    message = (
        r"MseLossBackward node 'm1': opset_import: MseLossBackward is in ai\.lossgrad from "
        r"version 2; the model imports version 1 \(import version 2 or later\)"
    )
    for run in (compile_model, lo.check_model):
        with pytest.raises(InvalidArgumentError, match=message) as raised:
            run(mse(1))
        assert raised.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(InvalidArgumentError, match=r"add ai\.lossgrad version 2\)"):
        compile_model(mse(None))
    assert compile_model(mse(2)).report.nodes == 1


def test_a_version_2_operator_in_a_function_of_a_version_1_model_is_rejected():
    body = [lo.make_node(MSE, ["go", "x", "t"], "g", name="inner")]
    f1 = helper.make_function(
        "local", "F", ["go", "x", "t"], ["g"], body, [helper.make_opsetid("", 21)]
    )
    call = helper.make_node("F", ["go", "x", "t"], ["g"], domain="local", name="call")
    with pytest.raises(
        InvalidArgumentError, match=r"node 'local\.F/inner'.*the model imports version 1"
    ):
        compile_model(model_with([call], 1, functions=(f1,)))
    assert compile_model(model_with([call], 2, functions=(f1,))).report.nodes == 1


def test_builders_stamp_the_smallest_version_the_model_needs():
    x = ("x", F32, [2, 3])
    only_v1 = lo.make_model(
        lo.make_graph([kl(["x", "x", "x"], "g", "k")], [x], [("g", F32, [2, 3])])
    )
    both = lo.make_model(
        lo.make_graph(
            [kl(["x", "x", "x"], "g", "k"), lo.make_node(MSE, ["x", "x", "x"], "m", name="m")],
            [x],
            [("g", F32, [2, 3]), ("m", F32, [2, 3])],
        )
    )
    versions = [{o.domain: o.version for o in m.opset_import}[spec.DOMAIN] for m in (only_v1, both)]
    assert versions == [1, 2]
    lo.check_model(only_v1)
    lo.check_model(both)


def function_with_node(version: int | None) -> onnx.FunctionProto:
    imports = [helper.make_opsetid("", 21)]
    if version is not None:
        imports.append(helper.make_opsetid(spec.DOMAIN, version))
    return helper.make_function(
        "local", "F", ["go", "x", "t"], ["g"], [kl(["go", "x", "t"], "g", "inner")], imports
    )


def test_function_imports_are_checked_and_a_body_inherits_the_models_import():
    call = helper.make_node("F", ["go", "x", "t"], ["g"], domain="local", name="call")
    inherited = model_with([call], 1, functions=(function_with_node(None),))
    assert compile_model(inherited).report.nodes == 1
    with pytest.raises(InvalidArgumentError, match=r"function 'local\.F' imports ai\.lossgrad v"):
        compile_model(
            model_with([call], 1, functions=(function_with_node(spec.OPSET_VERSION + 1),))
        )
    with pytest.raises(InvalidArgumentError, match=r"function 'local\.F' has ai\.lossgrad nodes"):
        compile_model(model_with([call], None, functions=(function_with_node(None),)))


def nll_model(version: int | None) -> onnx.ModelProto:
    """One NLLLossBackward (ai.lossgrad from version 4) in a model importing `version`."""
    node = lo.make_node("NLLLossBackward", ["go", "x", "c", "tw"], "g", name="nll")
    graph = helper.make_graph(
        [node],
        "g",
        [vi("go", []), vi("x", ["N", 4]), vi("c", ["N"], TensorProto.INT64), vi("tw", [])],
        [vi("g", ["N", 4])],
    )
    imports = [helper.make_opsetid("", 21)]
    if version is not None:
        imports.append(helper.make_opsetid(spec.DOMAIN, version))
    return helper.make_model(graph, ir_version=10, opset_imports=imports)


def test_a_version_4_operator_needs_version_4():
    """The classification operators came in version 4; builders stamp it."""
    message = (
        r"NLLLossBackward node 'nll': opset_import: NLLLossBackward is in ai\.lossgrad from "
        r"version 4; the model imports version 3 \(import version 4 or later\)"
    )
    for run in (lo.check_model, lowered_model):
        with pytest.raises(InvalidArgumentError, match=message) as raised:
            run(nll_model(3))
        assert raised.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(InvalidArgumentError, match=r"add ai\.lossgrad version 4\)"):
        lo.check_model(nll_model(None))
    lo.check_model(nll_model(4))
    imported, _ = lowered_model(nll_model(4))
    assert imported.nodes_per_operator()["NLLLossBackward"] == 1
    built = lo.make_model(lo.make_graph(nll_model(4).graph.node, nll_model(4).graph.input, ["g"]))
    assert {o.domain: o.version for o in built.opset_import}[spec.DOMAIN] == 4


def test_version_1_and_models_without_lossgrad_nodes_pass():
    compile_model(one_node(1))
    lo.check_model(one_node(1))
    compile_model(one_node(2))  # version 2 still has version 1's operators
    plain = model_with([helper.make_node("Neg", ["x"], ["g"])], None)
    assert compile_model(plain).report.nodes == 0


# --------------------------------------------------------------------------- structure


def cycle() -> onnx.ModelProto:
    return model_with(
        [
            kl(["go", "x", "b"], "a", "n1"),
            helper.make_node("Relu", ["a"], ["b"], name="n2"),
            helper.make_node("Identity", ["a"], ["g"], name="n3"),
        ]
    )


def function_cycle() -> onnx.ModelProto:
    body = [
        kl(["go", "x", "b"], "a", "f1"),
        helper.make_node("Relu", ["a"], ["b"], name="f2"),
        helper.make_node("Identity", ["a"], ["g"], name="f3"),
    ]
    imports = [helper.make_opsetid("", 21), helper.make_opsetid(spec.DOMAIN, 1)]
    function = helper.make_function("local", "F", ["go", "x", "t"], ["g"], body, imports)
    call = helper.make_node("F", ["go", "x", "t"], ["g"], domain="local", name="call")
    return model_with([call], functions=(function,))


def branch_cycle() -> onnx.ModelProto:
    then = helper.make_graph(
        [helper.make_node("Relu", ["b"], ["a"], name="r1"), kl(["go", "a", "t"], "b", "k1")],
        "then",
        [],
        [vi("a")],
    )
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e")])
    branch = helper.make_node("If", ["c"], ["g"], then_branch=then, else_branch=other)
    model = model_with([branch])
    model.graph.input.append(vi("c", [], TensorProto.BOOL))
    return model


def unproduced_function_output() -> onnx.ModelProto:
    imports = [helper.make_opsetid("", 21), helper.make_opsetid(spec.DOMAIN, 1)]
    function = helper.make_function(
        "local", "F", ["go", "x", "t"], ["g"], [kl(["go", "x", "t"], "other", "f1")], imports
    )
    call = helper.make_node("F", ["go", "x", "t"], ["g"], domain="local", name="call")
    return model_with([call], functions=(function,))


STRUCTURE = {
    "cycle": (cycle, r"the graph has a cycle: 'n2' -> 'n1' -> 'n2'"),
    "cycle in a function": (function_cycle, r"function 'local.F' has a cycle: 'f2' -> 'f1'"),
    "cycle in a branch": (branch_cycle, r"subgraph 'then' has a cycle: 'k1' -> 'r1' -> 'k1'"),
    "two nodes, one output": (
        lambda: model_with([kl(["go", "x", "t"], "g", "n1"), kl(["go", "x", "t"], "g", "n2")]),
        r"'g' has been used as output names multiple times",
    ),
    "a node writes a graph input": (
        lambda: model_with(
            [kl(["go", "x", "t"], "x", "n1"), helper.make_node("Identity", ["x"], ["g"])]
        ),
        r"'x' has been used as output names multiple times",
    ),
    "undefined input": (
        lambda: model_with([kl(["go", "x", "nowhere"], "g", "n1")]),
        r"input 'nowhere' of node: name: n1 OpType: KlDivBackward is not output",
    ),
    "graph output nobody writes": (
        lambda: model_with([kl(["go", "x", "t"], "g", "n1")], outputs=("g", "h")),
        r"Graph output 'h' is not an output of any node",
    ),
    "function output nobody writes": (
        unproduced_function_output,
        r"function 'local.F': output 'g' is not an output of any node in its body",
    ),
}


@pytest.mark.parametrize("case", list(STRUCTURE))
def test_structurally_invalid_models_are_not_compiled(case: str, tmp_path, capsys):
    make, message = STRUCTURE[case]
    model = make()
    for mode in ("functions", "inline"):
        with pytest.raises(CompileError, match="the model is not valid ONNX: .*" + message):
            compile_model(model, mode=mode)
    with pytest.raises(CompileError, match=message):
        lowered_model(model)
    path = tmp_path / "in.onnx"
    onnx.save(model, path)
    assert cli.main([str(path), "-o", str(tmp_path / "out.onnx")]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not valid ONNX" in err
    with pytest.raises(onnx.checker.ValidationError):
        lo.check_model(model)


def test_invalid_lossgrad_nodes_keep_their_aclnn_errors_before_the_structure_check():
    """onnx's checker would reject the unknown attribute in its own words first."""
    node = kl(["go", "x", "t"], "g", "n1")
    node.attribute.append(helper.make_attribute("colour", 3))
    with pytest.raises(InvalidArgumentError, match="node 'n1': attribute 'colour'"):
        compile_model(model_with([node]))


def test_missing_types_or_shapes_of_graph_inputs_and_outputs_are_no_structural_flaw():
    """onnx's checker requires them; ONNX Runtime does not, nor does the compiler."""
    model = one_node(1)
    model.graph.output[0].type.tensor_type.ClearField("shape")
    assert compile_model(model).report.nodes == 1
