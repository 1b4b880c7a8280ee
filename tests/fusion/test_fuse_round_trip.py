"""Inline mode, then fusion, gives back the nodes that were compiled.

For every signature class of the shared case matrix (each op × reduction × log_target/beta
× broadcast pattern × grad_output shape, in each element type and in mixed types), a
one-node model is compiled to standard ONNX in inline mode and fused again. The fused
graph must be exactly one ai.lossgrad node equal to the original: op, attributes, inputs
and output. Two things the inline graph cannot carry are compared by meaning:

* reductions with the same scale for the call's shapes are the same function (none and
  sum always; batchmean of a 0-d self; mean and batchmean when both divide by the same n);
* KlDivBackward never reads self: where the inline graph does not even take self's shape,
  the fused node gets another value (or a 0-d constant) of self's type and shape."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.fusion import fuse
from lossgrad_compiler.fusion.family_forms import ALL_FORMS
from lossgrad_compiler.fusion.graph import GraphIndex
from tests.helpers.cases import DTYPES, Case, mixed_dtype_combinations, standard_cases
from tests.helpers.divisors import reduction_scale
from tests.helpers.strategies import calls

FUSED = sorted({form.op_type for form in ALL_FORMS if form.written_by == "inline"})
"""The operators whose inline form fusion reads back: the first three and L1LossBackward;
the other operators of the loss family fuse from PyTorch's forms (their inline graphs
spell selects and counts as this project's ONNX backend does, not as the exporter)."""


def _cases() -> list[Case]:
    cases = []
    for op_type in FUSED:
        for dtype in DTYPES:
            cases += standard_cases(op_type, dtype)
        for k, triple in enumerate(mixed_dtype_combinations()):
            cases += standard_cases(op_type, triple)[k::7]
    return cases


CASES = _cases()


def _model(case: Case, symbolic: bool = False) -> onnx.ModelProto:
    """The case's node over graph inputs; `symbolic` names the leading dimension of B "N" in
    every input that has it at full size (a dynamic batch)."""
    b = np.broadcast_shapes(*(case.inputs[n].shape for n in spec.INPUT_NAMES))
    inputs = []
    for n in spec.INPUT_NAMES:
        dims: list[int | str] = list(case.inputs[n].shape)
        if symbolic and len(dims) == len(b) and dims and dims[0] == b[0] and b[0] > 1:
            dims[0] = "N"
        inputs.append((n, case.inputs[n].dtype, dims))
    node = lo.make_node(case.op_type, list(spec.INPUT_NAMES), "y", name="node", **case.attrs)
    return lo.make_model(lo.make_graph([node], inputs, ["y"], name="g"))


def _attributes(node: onnx.NodeProto) -> dict[str, Any]:
    out = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    out["reduction"] = out["reduction"].decode()
    return out


def _scale(case: Case, reduction: str) -> float:
    shapes = {n: case.inputs[n].shape for n in spec.INPUT_NAMES}
    b = np.broadcast_shapes(shapes["self"], shapes["target"])
    return reduction_scale(reduction, shapes["self"], b)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_inline_then_fuse_gives_back_the_node(case: Case) -> None:
    check_round_trip(case, symbolic=False)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=calls(ops=FUSED), symbolic=st.booleans())
def test_round_trip_of_drawn_calls(case: Case, symbolic: bool) -> None:
    """Drawn shapes, broadcasts, element types (mixed) and attributes, static or with a
    dynamic batch."""
    check_round_trip(case, symbolic)


def check_round_trip(case: Case, symbolic: bool) -> None:
    original = _model(case, symbolic)
    inline = compile_model(original, target="onnx", mode="inline").model
    assert all(n.domain != spec.DOMAIN for n in inline.graph.node)
    fused, report = fuse(inline)
    assert [n.op_type for n in fused.graph.node] == [case.op_type], report.lines()
    node, want = fused.graph.node[0], original.graph.node[0]
    assert node.domain == spec.DOMAIN
    assert (node.input[0], node.input[2], node.output[0]) == ("grad_output", "target", "y")
    got_attrs, want_attrs = _attributes(node), _attributes(want)
    got_reduction, want_reduction = got_attrs.pop("reduction"), want_attrs.pop("reduction")
    assert got_attrs == want_attrs
    assert _scale(case, got_reduction) == _scale(case, want_reduction) or (
        np.isnan(_scale(case, got_reduction)) and np.isnan(_scale(case, want_reduction))
    )
    reads_self = any("self" in n.input for n in inline.graph.node)
    if reads_self or case.op_type != "KlDivBackward":
        assert node.input[1] == "self"
    else:
        index = GraphIndex(fused)
        assert index.type_of(node.input[1]) == index.type_of("self")
    assert len(report.fused) == 1 and "inline" in report.fused[0].form
    onnx.checker.check_model(fused, full_check=True)
