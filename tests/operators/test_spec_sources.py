"""The ONNX schemas, the builders' defaults and the README's operator table all come from
spec.py: change a default there and every one of them follows."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from onnx import defs, helper

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.errors import AttributeValueError

README = Path(__file__).resolve().parents[2] / "README.md"
TABLE = re.compile(r"<!-- operator-table:begin -->\n(.*?)\n<!-- operator-table:end -->", re.S)
SL1 = spec.SMOOTH_L1_LOSS_BACKWARD.name
KL = spec.KL_DIV_BACKWARD.name


def readme_table() -> str:
    match = TABLE.search(README.read_text(encoding="utf-8"))
    assert match, "README.md has no operator-table markers"
    return match.group(1).strip()


def schema_default(op_type: str, attribute: str):
    schema = defs.get_schema(op_type, spec.OPSET_VERSION, spec.DOMAIN)
    value = helper.get_attribute_value(schema.attributes[attribute].default_value)
    return value.decode() if isinstance(value, bytes) else value


def with_default(op: spec.OperatorSpec, attribute: str, default) -> spec.OperatorSpec:
    attributes = tuple(
        dataclasses.replace(a, default=default) if a.name == attribute else a for a in op.attributes
    )
    return dataclasses.replace(op, attributes=attributes)


@pytest.fixture
def changed_spec(monkeypatch):
    """spec with SmoothL1LossBackward's beta defaulting to 0.75 and KlDivBackward's
    reduction to "sum"; the schemas are registered from the original spec again after."""
    monkeypatch.setitem(spec.OPERATORS, SL1, with_default(spec.OPERATORS[SL1], "beta", 0.75))
    monkeypatch.setitem(spec.OPERATORS, KL, with_default(spec.OPERATORS[KL], "reduction", "sum"))
    try:
        yield
    finally:
        monkeypatch.undo()
        lo.register_schemas()


def test_readme_table_is_generated_from_spec():
    assert readme_table() == spec.operator_table_markdown()


def test_everything_follows_a_changed_default(changed_spec):
    lo.register_schemas()
    assert schema_default(SL1, "beta") == 0.75
    assert schema_default(KL, "reduction") == "sum"

    node = lo.make_node(SL1, ["go", "x", "t"], "g")
    assert lo.attributes_from_node(node)["beta"] == 0.75
    assert lo.attributes_from_protos(KL, [])["reduction"] == "sum"
    node = lo.make_node(KL, ["go", "x", "t"], "g")
    assert helper.get_attribute_value(node.attribute[0]) == b"sum"

    assert "| SmoothL1LossBackward | grad_input | beta | FLOAT | 0.75 |" in (
        spec.operator_table_markdown()
    )
    assert readme_table() != spec.operator_table_markdown()


def test_registration_is_restored_after_a_change():
    """In the same process as the test above (the file run alone), the fixture must have
    put the original schemas back; ensure_schemas() does not overwrite registrations."""
    lo.ensure_schemas()
    assert schema_default(SL1, "beta") == spec.SMOOTH_L1_LOSS_BACKWARD.attribute("beta").default
    assert schema_default(KL, "reduction") == spec.Reduction.MEAN.value


def test_inference_reads_spec_at_call_time(monkeypatch):
    """A rule changed in spec (here: the reductions SmoothL1LossBackward accepts) reaches the
    registered inference function without re-registering."""
    op = spec.OPERATORS[SL1]
    reduction = op.attribute("reduction")
    narrowed = dataclasses.replace(reduction, choices=("none", "sum"))
    attributes = tuple(narrowed if a.name == "reduction" else a for a in op.attributes)
    lo.ensure_schemas()
    node = helper.make_node(SL1, ["go", "x", "t"], ["g"], domain=spec.DOMAIN, reduction="mean")
    graph = lo.make_graph(
        [node], [(n, "float32", [3]) for n in ("go", "x", "t")], [("g", "float32", [3])]
    )
    model = lo.make_model(graph)
    lo.check_model(model)
    monkeypatch.setitem(spec.OPERATORS, SL1, dataclasses.replace(op, attributes=attributes))
    with pytest.raises(AttributeValueError, match="must be one of 'none', 'sum', got 'mean'"):
        lo.check_model(model)
