"""A mean's divisor counted through a Cast (issue 44, item 1): the Cast is looked through only
where it keeps every value the count can take (lossgrad_compiler/fusion/count_casts.py).

With x of shape [300, 3], a graph that casts the shape vector to int8 divides by 44*3 = 132
(300 wraps to 44); fused with reduction mean, the node divided by 900. Each of the five
operators whose forms take the divisor apart from grad_output is built as the exporter writes
it (tests/fusion/family_graphs.py) and checked against the fusion contract."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from lossgrad_compiler import fuse
from lossgrad_compiler.fusion.count_casts import LARGEST_SIZE, cast_loses
from lossgrad_compiler.onnx import run_reference
from tests.fusion import family_graphs
from tests.fusion.contract import Subject, check_fusion

LOSSES = sorted(family_graphs.OPS)
# the operators whose exported form fuses with reduction mean (PyTorch's form of
# SoftMarginLossBackward is recognised and left: it cancels where the kernel does not)
MEAN_FORMS = ("mse", "huber", "bce", "bce_logits", "l1")

# (shape, Cast of the shape vector, how the count is taken): the count changes, or may
# change for some size a dynamic dimension takes
LOSSY = [
    ((300, 3), TensorProto.INT8, "prod"),  # 300 wraps to 44
    ((300, 3), TensorProto.INT8, "exporter"),
    ((300, 3), TensorProto.UINT8, "prod"),  # 300 wraps to 44
    ((2049, 3), TensorProto.FLOAT16, "prod"),  # 2049 rounds to 2048
    ((4097, 3), TensorProto.BFLOAT16, "exporter"),  # 4097 rounds to 4096
    (("N", 3), TensorProto.FLOAT16, "prod"),  # N may be 2049
    (("N", 3), TensorProto.INT32, "exporter"),  # N may be 2^31
    (("N", 3), TensorProto.DOUBLE, "prod"),  # N may be 2^53 + 1
]
# the count is the same after the Cast: a reduction mean
KEPT = [
    ((300, 3), None, "prod"),
    ((300, 3), TensorProto.FLOAT16, "prod"),  # 300 and 3 are float16 numbers
    ((300, 3), TensorProto.FLOAT16, "exporter"),
    ((300, 3), TensorProto.INT16, "prod"),  # narrowing, but 300 fits
    ((300, 3), TensorProto.UINT16, "exporter"),
    ((2048, 3), TensorProto.FLOAT16, "prod"),
    ((300, 3), TensorProto.BFLOAT16, "prod"),  # 300 = 75 * 4: 7 bits of significand
    (("N", 3), TensorProto.INT64, "prod"),
    (("N", 3), TensorProto.UINT64, "exporter"),  # holds every int64 size
]


def _case_id(case: tuple[object, ...]) -> str:
    shape, cast, by = case
    to = "none" if cast is None else TensorProto.DataType.Name(cast).lower()  # type: ignore[arg-type]
    return f"{'x'.join(map(str, shape))}-{to}-{by}"  # type: ignore[call-overload]


def _means(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    """The model's `op_type` nodes with reduction mean."""
    found = []
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == op_type and attrs.get("reduction") == b"mean":
            found.append(node)
    return found


def _check_contract(
    loss: str, model: onnx.ModelProto, fused: onnx.ModelProto, shape: tuple[int, ...]
) -> None:
    subject = Subject(
        model,
        family_graphs.OPS[loss],
        family_graphs.attributes(loss),
        {"grad_output": None, "self": "x", "target": "t"},
        np.float32,
    )
    problems = check_fusion(
        subject, fused, family_graphs.feeds(loss, shape), runtimes=["reference"],
        original_in_ort=False,
    )  # fmt: skip
    assert not problems, "\n".join([*fuse(model)[1].lines(), *problems])


def _static(shape: tuple[int | str, ...]) -> tuple[int, ...]:
    return tuple(5 if isinstance(d, str) else d for d in shape)


@pytest.mark.parametrize("case", LOSSY, ids=_case_id)
@pytest.mark.parametrize("loss", LOSSES)
def test_a_count_a_cast_changes_is_no_mean(loss: str, case: tuple) -> None:  # type: ignore[type-arg]
    """No node divides by n where the graph divides by the count after the Cast: the graph
    is left (with the Cast in the reason), fused with reduction none, or fused with
    reduction sum and its division kept; either way the fused model computes what the
    original does."""
    shape, cast, by = case
    model = family_graphs.build(loss, shape, cast, by)
    fused, report = fuse(model)
    assert not _means(fused, family_graphs.OPS[loss]), report.lines()
    if loss == "mse":  # left: nothing else computes ((x - t)*F) with F = 2/count
        name = TensorProto.DataType.Name(cast).lower()
        assert any(f"Cast to {name}" in line for line in report.lines()[1:]), report.lines()
    _check_contract(loss, model, fused, _static(shape))


@pytest.mark.parametrize("loss", LOSSES)
def test_int8_count_of_300_by_3_gives_the_original(loss: str) -> None:
    """The issue's graph: the fused model's values are the original's, bit for bit."""
    model = family_graphs.build(loss, (300, 3), TensorProto.INT8)
    fused, _ = fuse(model)
    feeds = family_graphs.feeds(loss, (300, 3))
    original = run_reference(model, feeds)["y"]
    assert np.array_equal(run_reference(fused, feeds)["y"], original, equal_nan=True)


@pytest.mark.parametrize("case", KEPT, ids=_case_id)
@pytest.mark.parametrize("loss", LOSSES)
def test_a_count_a_cast_keeps_is_a_mean(loss: str, case: tuple) -> None:  # type: ignore[type-arg]
    """Widening Casts, and narrowing ones that provably keep the static sizes, are looked
    through: the graph fuses as it does without the Cast, into one node with reduction mean
    wherever the operator's form is the exporter's."""
    shape, cast, by = case
    model = family_graphs.build(loss, shape, cast, by)
    fused, report = fuse(model)
    baseline = fuse(family_graphs.build(loss, shape, None, by))[0]
    assert _lossgrad_nodes(fused) == _lossgrad_nodes(baseline), report.lines()
    if loss in MEAN_FORMS:
        assert len(_means(fused, family_graphs.OPS[loss])) == 1, report.lines()
        assert not [n for n in fused.graph.node if n.op_type in ("Div", "Sub")], report.lines()
    _check_contract(loss, model, fused, _static(shape))


def _lossgrad_nodes(model: onnx.ModelProto) -> list[tuple[str, list[tuple[str, object]]]]:
    return [
        (n.op_type, sorted((a.name, onnx.helper.get_attribute_value(a)) for a in n.attribute))
        for n in model.graph.node
        if n.domain == "ai.lossgrad"
    ]


@pytest.mark.parametrize(
    ("to", "sizes", "kept"),
    [
        (TensorProto.INT8, [(127, ())], True),
        (TensorProto.INT8, [(128, ())], False),
        (TensorProto.UINT8, [(255, ()), (0, ())], True),
        (TensorProto.UINT8, [(256, ())], False),
        (TensorProto.INT32, [(2**31 - 1, ())], True),
        (TensorProto.INT32, [(2**31, ())], False),
        (TensorProto.INT32, [(1, ("N",))], False),
        (TensorProto.UINT32, [(1, ("N",))], False),
        (TensorProto.INT64, [(1, ("N",)), (LARGEST_SIZE, ())], True),
        (TensorProto.UINT64, [(1, ("N",))], True),
        (TensorProto.FLOAT16, [(2048, ()), (2050, ()), (65504, ())], True),
        (TensorProto.FLOAT16, [(2049, ())], False),
        (TensorProto.FLOAT16, [(65505, ())], False),
        (TensorProto.FLOAT16, [(1, ("N",))], False),
        (TensorProto.BFLOAT16, [(256, ()), (258, ())], True),
        (TensorProto.BFLOAT16, [(257, ())], False),
        (TensorProto.FLOAT, [(2**24, ()), (2**24 + 2, ())], True),
        (TensorProto.FLOAT, [(2**24 + 1, ())], False),
        (TensorProto.DOUBLE, [(2**53, ())], True),
        (TensorProto.DOUBLE, [(2**53 + 1, ())], False),
        (TensorProto.DOUBLE, [(1, ("N",))], False),  # 2^53 + 1 is an int64 size
        (TensorProto.BOOL, [(1, ())], False),
        (TensorProto.STRING, [(1, ())], False),
        (None, [(1, ())], False),
    ],
)
def test_which_casts_keep_a_count(to: int | None, sizes: list, kept: bool) -> None:  # type: ignore[type-arg]
    assert (cast_loses(to, sizes) == "") is kept


def test_the_report_names_the_size_a_cast_changes() -> None:
    model = family_graphs.build("mse", (300, 3), TensorProto.INT8)
    lines = fuse(model)[1].lines()
    assert any("does not hold the size 300 exactly (it becomes 44)" in line for line in lines)
    model = family_graphs.build("mse", ("N", 3), TensorProto.FLOAT16)
    lines = fuse(model)[1].lines()
    assert any("dynamic size N" in line for line in lines), lines
