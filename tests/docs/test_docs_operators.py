"""docs/operators.md states the contract in words; its tables are generated from spec.py
and errors.py here, and must agree with them (as the README's operator table does)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from lossgrad_compiler import errors, spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "operators.md"

ERROR_ROWS: list[tuple[str, type[errors.LossGradError]]] = [
    ("a required input is missing", errors.MissingInputError),
    (
        "an element type outside the four float types (a target of a classification operator "
        "outside int64 and int32), or a classification operator's float input whose type is "
        "not self's",
        errors.ElementTypeError,
    ),
    ("a rank above 8", errors.RankError),
    (
        "shapes that do not broadcast, or an input that would enlarge B where it must fit "
        "into it (grad_output of the KL operators and the binary cross entropies, target, "
        "weight, pos_weight)",
        errors.BroadcastError,
    ),
    (
        "a classification operator's shapes outside the classes rule: self's rank, target "
        "not self without its class dimension, weight not [C], grad_output not target's "
        "shape (reduction none) or not one element, total_weight not one element",
        errors.ClassShapeError,
    ),
    (
        "a target outside [0, C) that is not ignore_index, on every path that runs with the "
        "values (standard ONNX cannot: its graphs give such an element a zero gradient)",
        errors.TargetValueError,
    ),
    (
        "an attribute of the wrong type, an unknown attribute, a reduction the operator does "
        "not take, beta < 0, delta <= 0, or a NaN beta or delta",
        errors.AttributeValueError,
    ),
    (
        "a valid call that a backend cannot run (Ascend C and float64: its vector units have "
        "no fp64 arithmetic)",
        errors.UnsupportedByBackendError,
    ),
]


def _rows(header: str, rows: list[list[str]]) -> str:
    columns = header.count("|") - 1
    lines = [header, "| " + " | ".join(["---"] * columns) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def result_table() -> str:
    rows = []
    for op in spec.OPERATORS.values():
        if op.has_classes:
            shape = "the shape of self"
            element = "the element type of self (every float input has it)"
        elif op.differentiates and op.sums_result:
            shape = f"the shape of {op.differentiates} (B summed back to it)"
            element = f"the element type of {op.differentiates}"
        elif op.differentiates:
            shape = f"the shape of {op.differentiates} (which is B)"
            element = f"the element type of {op.differentiates}"
        else:
            shape = f"broadcast({', '.join(spec.INPUT_NAMES)})"
            element = "the promoted input type"
        rows.append([op.name, shape, element])
    return _rows("| operator | result shape | result element type |", rows)


def input_table() -> str:
    rows = []
    for op in spec.OPERATORS.values():
        names = ", ".join(f"[{i.name}]" if i.optional else i.name for i in op.inputs)
        rows.append([op.name, str(op.since_version), names, f"`{op.aclnn}`"])
    return _rows("| operator | since version | inputs ([optional]) | aclnn |", rows)


def type_table() -> str:
    rows = [[t.name, str(t.onnx), t.mlir, spec.compute_type(t).name] for t in spec.FLOAT_TYPES]
    return _rows("| element type | ONNX TensorProto | MLIR | computed in |", rows)


def reduction_table() -> str:
    def n(reduction: spec.Reduction, self_rank: int, op: spec.OperatorSpec | None = None) -> str:
        divisor = spec.divisor_rule(reduction, self_rank, op)
        return "—" if divisor is None else divisor.value

    nll = spec.NLL_LOSS_BACKWARD
    ce = spec.CROSS_ENTROPY_LOSS_GRAD

    ops = list(spec.OPERATORS.values())
    header = (
        "| reduction | aclnn code | "
        + " | ".join(op.name for op in ops)
        + " | n when self has rank ≥ 1 | n when self is 0-d | n of the NLL operators"
        + " | n of CrossEntropyLossGrad |"
    )
    rows = [
        [r.value, str(r.aclnn_code)]
        + ["yes" if r in op.reductions else "no" for op in ops]
        + [n(r, 1), n(r, 0)]
        + [n(r, 2, op) if r in op.reductions else "—" for op in (nll, ce)]
        for r in spec.Reduction
    ]
    return _rows(header, rows)


def error_table() -> str:
    rows = [
        [condition, cls.__name__, f"{cls.code} {errors.ACLNN_CODE_NAMES[cls.code]}"]
        for condition, cls in ERROR_ROWS
    ]
    return _rows("| condition | error class | aclnn code |", rows)


TABLES = {
    "input-table": input_table,
    "operator-table": spec.operator_table_markdown,
    "result-table": result_table,
    "type-table": type_table,
    "reduction-table": reduction_table,
    "error-table": error_table,
}


def doc_table(name: str) -> str:
    pattern = re.compile(rf"<!-- {name}:begin -->\n(.*?)\n<!-- {name}:end -->", re.S)
    match = pattern.search(DOC.read_text(encoding="utf-8"))
    assert match, f"docs/operators.md has no {name} markers"
    return match.group(1).strip()


@pytest.mark.parametrize("name", TABLES)
def test_table_agrees_with_spec(name: str) -> None:
    assert doc_table(name) == TABLES[name]()


def test_every_error_class_has_a_row() -> None:
    """A new error class needs a row in the doc."""
    classes = {
        cls
        for cls in vars(errors).values()
        if isinstance(cls, type)
        and issubclass(cls, errors.LossGradError)
        and cls not in (errors.LossGradError, errors.InvalidArgumentError)
    }
    assert classes == {cls for _, cls in ERROR_ROWS}


def test_a_changed_spec_shows_in_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: give SmoothL1LossBackward batchmean, and the reduction table
    no longer matches."""
    op = spec.OPERATORS["SmoothL1LossBackward"]
    reduction = dataclasses.replace(
        op.attribute("reduction"), choices=tuple(r.value for r in spec.Reduction)
    )
    others = tuple(a for a in op.attributes if a.name != "reduction")
    changed = dataclasses.replace(op, attributes=(reduction, *others))
    monkeypatch.setitem(spec.OPERATORS, op.name, changed)
    assert doc_table("reduction-table") != reduction_table()
