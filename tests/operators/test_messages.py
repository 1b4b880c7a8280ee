"""The rules of lossgrad_compiler/messages.py: what Python raises is the rule's line with
every slot filled, the parts the C++ is printed from are the same line, and a rule cannot
name a slot it does not type."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from lossgrad_compiler import errors, messages
from lossgrad_compiler.backends.cxx_messages import message
from lossgrad_compiler.messages import Kind, Rule, Slot

SAMPLES: dict[Kind, Any] = {
    Kind.INT: -2,
    Kind.FLOAT: 0.1,
    Kind.STR: "bogus",
    Kind.SHAPE: (7, 5),
    Kind.TEXT: "grad_output",
    Kind.REPR: "mean",
}


def _values(rule: Rule) -> dict[str, Any]:
    return {name: SAMPLES[kind] for name, kind in rule.slots.items()}


@pytest.mark.parametrize("rule", messages.RULES, ids=lambda r: r.key)
def test_the_raised_error_is_the_rules_line_filled_in(rule: Rule) -> None:
    values = _values(rule)
    error = rule("KlDivBackward", **values)
    assert isinstance(error, rule.error) and error.code == rule.code
    (line,) = rule.line({"op": "KlDivBackward", **values})
    assert str(error) == line
    assert str(error).startswith("KlDivBackward: ")
    assert str(error).endswith(f"[aclnn {rule.code} {errors.ACLNN_CODE_NAMES[rule.code]}]")


@pytest.mark.parametrize("rule", messages.RULES, ids=lambda r: r.key)
def test_an_unfilled_slot_is_a_parameter_of_the_cxx_function(rule: Rule) -> None:
    """With nothing fixed but the operator, every slot is left to the C++ (once each, in
    the order the line first has it), and the literal text between is the rule's."""
    printed = message("m", rule, Kind.TEXT, op="Op")
    names = [s.name for s in printed.slots]
    assert sorted(names) == sorted(rule.slots)
    values = {name: f"<{name}>" for name in names}
    text = "".join(values[p.name] if isinstance(p, Slot) else p for p in printed.parts)
    expected = errors.format_error(
        "Op",
        rule.argument.format(**values),
        rule.text.format(**values),
        rule.code,
    )
    assert text == expected


def test_a_rule_must_type_every_slot_it_names() -> None:
    with pytest.raises(ValueError, match="slots"):
        Rule("broken", "{input}", "rank {rank}", errors.RankError, {"input": Kind.TEXT})
    with pytest.raises(ValueError, match="'op'"):
        Rule("broken", "{op}", "x", errors.RankError, {"op": Kind.TEXT})


def test_a_missing_value_is_named() -> None:
    with pytest.raises(KeyError, match="max_rank"):
        messages.RANK("KlDivBackward", input="self", rank=9)


@pytest.mark.parametrize(
    ("kind", "value", "text"),
    [
        (Kind.INT, 7, "7"),
        (Kind.FLOAT, 1e-300, "1e-300"),
        (Kind.FLOAT, float("nan"), "nan"),
        (Kind.STR, "it's", '"it\'s"'),
        (Kind.SHAPE, (), "[]"),
        (Kind.SHAPE, (2, "N"), "[2, 'N']"),
        (Kind.TEXT, "weight", "weight"),
        (Kind.REPR, 0.5, "0.5"),
    ],
)
def test_slots_are_written_as_python_writes_them(kind: Kind, value: Any, text: str) -> None:
    assert messages.render(kind, value) == text


CXX_MESSAGES = Path(messages.__file__).parent / "backends" / "cxx_messages.py"


def test_cxx_messages_reads_the_rules_and_never_makes_spec_raise() -> None:
    """The C++ messages come from the rules: cxx_messages neither imports `re` nor calls
    spec's validation to cut a message out of its text."""
    tree = ast.parse(CXX_MESSAGES.read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert "re" not in imported
    assert not called & {"validate", "check_attributes", "check", "check_no_enlarge"}
