"""Classification nodes in whole ONNX models compiled by the IREE target (one module, run by
`runtime.iree.session`): as reference.evaluate computes them (bit-identical, but for
CrossEntropyLossGrad's exp and FMAs in float32 and float64: class_agreement.py) for every
node of one model (float types, int64 and int32 targets, reductions, weight or none,
ignore_index, label smoothing, [C], [N, C], [N, C, H, W]) at several sizes, an empty batch
included, from one compile; a bad target raises TARGET_RANGE from the session (its count is
an extra result of the module), dynamic sizes that differ are refused, and a node the check
cannot leave (in an If branch or a Loop body) is refused."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler import cli, reference, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.backends.iree import IreeOptions, WholeModelError, compile_whole_model
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID, BroadcastError, LossGradError
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.runtime.iree import IreeSession, session
from tests.helpers.class_cases import ClassCase, make_class_case
from tests.iree.class_agreement import assert_agrees

NLL, NLL2D = spec.NLL_LOSS_BACKWARD.name, spec.NLL_LOSS_2D_BACKWARD.name
CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
F16, BF16, F32, F64 = (t.dtype for t in spec.FLOAT_TYPES)


@dataclass(frozen=True)
class NodeForm:
    """One node of the model: its call's form; its inputs are graph inputs `<prefix>_*`
    with symbolic dims `<prefix>_N`, ... (target's rows `<prefix>_T...` when `own_rows`)."""

    prefix: str
    op: str
    dtype: Any
    target_dtype: Any
    reduction: str
    weighted: bool
    ignore_index: int
    rank: int
    label_smoothing: float | None = None  # CrossEntropyLossGrad's

    @property
    def attrs(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {"reduction": self.reduction, "ignore_index": self.ignore_index}
        if self.label_smoothing is not None:
            attrs["label_smoothing"] = self.label_smoothing
        return attrs

    def case(self, shape: tuple[int, ...], seed: int) -> ClassCase:
        return make_class_case(
            self.op, shape, self.dtype, reduction=self.reduction, ignore_index=self.ignore_index,
            weighted=self.weighted, target_dtype=self.target_dtype, seed=seed,
            label_smoothing=self.label_smoothing,
        )  # fmt: skip


FORMS = [
    NodeForm("a", NLL, F32, np.int64, "mean", True, -100, 2),
    NodeForm("b", NLL, BF16, np.int32, "none", False, 1, 2),
    NodeForm("c", NLL, F16, np.int64, "sum", True, 2, 1),
    NodeForm("d", NLL2D, F64, np.int32, "none", False, 1, 4),
    NodeForm("e", NLL2D, BF16, np.int64, "mean", True, -100, 4),
    NodeForm("f", CE, BF16, np.int64, "mean", True, -100, 2, 0.25),
    NodeForm("g", CE, F32, np.int32, "none", False, 1, 2, 0.0),
    NodeForm("h", CE, F16, np.int64, "sum", True, 2, 2, 1.0),
    NodeForm("i", CE, F64, np.int64, "mean", False, 1, 2, 0.25),
]
"""e, f: bfloat16 roundings in the body (backends/iree/rounding.py); f: the kept and the
class weight reduced before the gradient; g, i: exp and FMAs in float32 and float64 (compared as
class_agreement.py says)."""
SHAPES: dict[int, list[tuple[int, ...]]] = {
    1: [(5,), (3,), (7,)],
    2: [(6, 5), (1, 3), (0, 4)],
    4: [(2, 4, 3, 3), (1, 3, 1, 5), (0, 2, 2, 2)],
}
"""Per rank of self, the sizes of each run: run k gives every node its k-th shape."""


def symbols(form: NodeForm, name: str, own_rows: bool) -> list[str | int]:
    dims = {1: ["C"], 2: ["N", "C"], 4: ["N", "C", "H", "W"]}[form.rank]
    c = spec.operator(form.op).class_dim(form.rank)
    rows = [d for k, d in enumerate(dims) if k != c]
    per_element = form.reduction == "none" and form.rank >= 2
    shape = {
        "self": dims,
        "target": [f"T{d}" for d in rows] if own_rows else rows,
        "weight": [dims[c]],
        "grad_output": rows if per_element else [],
        "total_weight": [],
    }[name]
    return [d if isinstance(d, int) else f"{form.prefix}_{d}" for d in shape]


def present(form: NodeForm) -> list[str]:
    names = spec.operator(form.op).input_names
    return [n for n in names if n != "weight" or form.weighted]


def model(forms: list[NodeForm], own_rows: bool = False) -> onnx.ModelProto:
    """One node per form, then `Neg` of the first node's gradient (standard ONNX after a
    lossgrad node)."""
    nodes, inputs, outputs = [], [], []
    for form in forms:
        names = present(form)
        nodes.append(
            lo.make_node(
                form.op, [f"{form.prefix}_{n}" for n in names], f"{form.prefix}_grad",
                name=form.prefix, **form.attrs,
            )
        )  # fmt: skip
        for n in names:
            dtype = form.target_dtype if n == "target" else form.dtype
            inputs.append((f"{form.prefix}_{n}", np.dtype(dtype), symbols(form, n, own_rows)))
        outputs.append(f"{form.prefix}_grad")
    nodes.append(helper.make_node("Neg", [outputs[0]], ["negated"]))
    return lo.make_model(lo.make_graph(nodes, inputs, [*outputs, "negated"], name="classes"))


def feeds_of(forms: list[NodeForm], cases: list[ClassCase]) -> dict[str, np.ndarray]:
    return {
        f"{form.prefix}_{n}": case.inputs[n]
        for form, case in zip(forms, cases, strict=True)
        for n in present(form)
    }


def compiled(forms: list[NodeForm], folder: Path, own_rows: bool = False) -> IreeSession:
    vmfb, _ = compile_whole_model(model(forms, own_rows), IreeOptions(), lower_signatures)
    path = folder / "classes.vmfb"
    path.write_bytes(vmfb)
    return session(path, device="local-sync")


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> IreeSession:
    return compiled(FORMS, tmp_path_factory.mktemp("classes"))


def cases_of(run: int) -> list[ClassCase]:
    return [f.case(SHAPES[f.rank][run], seed=10 * run + k) for k, f in enumerate(FORMS)]


@pytest.mark.parametrize("run", range(3))
def test_every_node_matches_the_reference(classes: IreeSession, run: int) -> None:
    cases = cases_of(run)
    got = dict(zip(classes.output_names, classes.run(None, feeds_of(FORMS, cases)), strict=True))
    assert len(got) == len(FORMS) + 1  # the ONNX outputs alone, not the check results
    for form, case in zip(FORMS, cases, strict=True):
        assert_agrees(got[f"{form.prefix}_grad"], case)
    negated = -cases[0].expected()
    assert got["negated"].tobytes() == negated.tobytes()


@pytest.mark.parametrize("node", [0, 1, 3, 5, 6, 8])
def test_a_bad_target_raises_the_references_error(classes: IreeSession, node: int) -> None:
    cases = cases_of(0)
    target = cases[node].inputs["target"].copy()
    target.reshape(-1)[0] = 1_000
    target.reshape(-1)[-1] = -3
    cases[node].inputs["target"] = target
    with pytest.raises(LossGradError) as want:
        reference.evaluate(*cases[node].call)
    with pytest.raises(LossGradError) as got:
        classes.run(None, feeds_of(FORMS, cases))
    assert got.value.code == ACLNN_ERR_PARAM_INVALID
    assert str(got.value) == str(want.value)


def test_the_interface_lists_the_checks(classes: IreeSession) -> None:
    interface = classes.interface
    assert [c.op for c in interface.checks] == [f.op for f in FORMS]
    assert {c.rule for c in interface.checks} == {"target_range"}
    assert interface.extras == 2 * len(FORMS)  # a count and a dynamic C per node


def test_dynamic_sizes_that_differ_are_refused(tmp_path: Path) -> None:
    """target's rows have their own symbols, so only the size check can catch them."""
    forms = [FORMS[0], FORMS[3]]
    module = compiled(forms, tmp_path, own_rows=True)
    cases = [forms[0].case((6, 5), 1), forms[1].case((2, 4, 3, 3), 2)]
    fine = module.run(None, feeds_of(forms, cases))
    assert fine[0].tobytes() == cases[0].expected().tobytes()
    for node, rows in ((0, (7,)), (1, (2, 3, 4))):
        bad = [c for c in cases]
        bad[node] = forms[node].case(cases[node].inputs["self"].shape, 3)
        bad[node].inputs["target"] = np.zeros(rows, forms[node].target_dtype)
        with pytest.raises(BroadcastError) as raised:
            module.run(None, feeds_of(forms, bad))
        assert raised.value.code == ACLNN_ERR_PARAM_INVALID
        assert raised.value.op == forms[node].op
        assert "must be equal at run time" in str(raised.value)


@pytest.mark.parametrize("node", [0, 6])  # float32: the branches' type
def test_a_checked_node_in_an_if_branch_is_refused(node: int) -> None:
    form = dataclasses.replace(FORMS[node], prefix="a")
    names = present(form)
    branch = helper.make_graph(
        [lo.make_node(form.op, [f"a_{n}" for n in names], "a_grad", **form.attrs)],
        "then",
        [],
        [helper.make_tensor_value_info("a_grad", TensorProto.FLOAT, None)],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["a_self"], ["z"])],
        "else",
        [],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    inputs = [("cond", "bool", [])] + [
        (f"a_{n}", np.dtype(form.target_dtype if n == "target" else form.dtype),
         symbols(form, n, False))
        for n in names
    ]  # fmt: skip
    graph = lo.make_graph(
        [helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=other)],
        inputs,
        [("y", "float32", ["a_N", "a_C"])],
        name="branch",
    )
    with pytest.raises(WholeModelError, match="control-flow region"):
        compile_whole_model(lo.make_model(graph), IreeOptions(), lower_signatures)


def test_a_checked_node_in_a_loop_body_is_refused() -> None:
    """A Loop's body is a region too: the count of its CrossEntropyLossGrad node is refused."""
    form = dataclasses.replace(FORMS[6], prefix="a")
    names = present(form)
    body = helper.make_graph(
        [
            lo.make_node(form.op, [f"a_{n}" for n in names], "a_grad", **form.attrs),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a_grad", TensorProto.FLOAT, None),
        ],
    )
    inputs = [("trips", "int64", []), ("cond", "bool", [])] + [
        (f"a_{n}", np.dtype(form.target_dtype if n == "target" else form.dtype),
         symbols(form, n, False))
        for n in names
    ]  # fmt: skip
    graph = lo.make_graph(
        [helper.make_node("Loop", ["trips", "cond"], ["grads"], body=body)],
        inputs,
        [("grads", "float32", ["K", "a_N", "a_C"])],
        name="loop",
    )
    with pytest.raises(WholeModelError, match="control-flow region"):
        compile_whole_model(lo.make_model(graph), IreeOptions(), lower_signatures)


def test_the_cli_says_the_module_has_value_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "classes.onnx"
    onnx.save(model(FORMS[:2]), source)
    assert cli.main([str(source), "--target", "iree", "-o", str(tmp_path / "c.vmfb")]) == 0
    assert "value checks: 2, raised by lossgrad_compiler.runtime.iree.session" in (
        capsys.readouterr().out
    )
    module = session(tmp_path / "c.vmfb")
    cases = [f.case(SHAPES[f.rank][0], seed=k) for k, f in enumerate(FORMS[:2])]
    got = module.run(["a_grad"], feeds_of(FORMS[:2], cases))
    assert got[0].tobytes() == cases[0].expected().tobytes()
