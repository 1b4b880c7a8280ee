"""The generated kernel library is navigable: each kernel struct and parameter function says
which operator, element types, attribute class and broadcast patterns it serves, and the
labels agree with the dispatch that calls it; identical case lines are folded; counts,
operand indices and masks have names."""

from __future__ import annotations

import re

import pytest

from lossgrad_compiler import spec
from lossgrad_compiler.targets.ort_library import kernel_library_source

LABEL = re.compile(r"^// (K\d+) serves \(.*\)\n((?://   .*\n)+)struct \1 \{", re.MULTILINE)
USE = re.compile(r"^//   (\w+), (\w+) -> (\w+), (.*): (.*)$")
COMPUTE = re.compile(
    r"^OrtStatus\* compute_(\w+?)_(\w+?)_(\w+)\(.*?\n(.*?)^}\n", re.MULTILINE | re.DOTALL
)
CASE = re.compile(r"^    case variant_key\((\d+), ([\w |]+)\):  // (.*)$")
RETURN = re.compile(r"^      return run_variant<variants::(K\d+)>")


@pytest.fixture(scope="module")
def source() -> str:
    return kernel_library_source()


def labels(source: str) -> dict[str, set[tuple[str, str, str, str]]]:
    found: dict[str, set[tuple[str, str, str, str]]] = {}
    for kernel, lines in LABEL.findall(source):
        for line in lines.splitlines():
            match = USE.match(line)
            assert match, line
            op, compute, result, classes, _patterns = match.groups()
            found.setdefault(kernel, set()).add((op, compute, result, classes))
    return found


def dispatched(source: str) -> dict[str, set[tuple[str, str, str, str]]]:
    """What each kernel is called for, read from the compute functions' switch."""
    found: dict[str, set[tuple[str, str, str, str]]] = {}
    for op, compute, result, body in COMPUTE.findall(source):
        pending: list[str] = []
        for line in body.splitlines():
            case = CASE.match(line)
            if case:
                pending.append(case.group(3))
                continue
            call = RETURN.match(line)
            if call:
                for classes in pending:
                    found.setdefault(call.group(1), set()).add((op, compute, result, classes))
                pending = []
    return found


def test_every_kernel_struct_is_labelled(source: str) -> None:
    structs = re.findall(r"^struct (K\d+) \{", source, re.MULTILINE)
    found = labels(source)
    assert structs and set(found) == set(structs)
    for uses in found.values():
        assert {op for op, *_ in uses} <= set(spec.OPERATORS)


def test_labels_say_what_the_dispatch_calls_each_kernel_for(source: str) -> None:
    assert labels(source) == dispatched(source)


def test_identical_case_lines_are_folded(source: str) -> None:
    for *_, body in COMPUTE.findall(source):
        if "run_variant" not in body:  # compute_<op>_to_<type>: picks the compute type only
            assert re.fullmatch(
                r"(?s)\s*(const Promotion promotion.*)?"
                r"\s*return .*compute_\w+\(kernel, ctx\);\s*",
                body,
            )
            continue
        returns = [line for line in body.splitlines() if RETURN.match(line)]
        assert returns and len(returns) == len(set(returns))


def test_counts_and_operands_have_names(source: str) -> None:
    glue = source[source.index("}  // namespace variants") :]
    assert not re.search(r"broadcast_numel\(\d|\.dim\(\d|in\[\d+\]\.dims;|Input in\[\d", glue)
    assert not re.search(r"switch \(attribute_class \* \d", glue)
    for k, name in enumerate(spec.INPUT_NAMES):
        constant = "k" + "".join(w.capitalize() for w in name.split("_"))
        assert f"constexpr int {constant} = {k};" in source


NEST_LABEL = re.compile(r"^// (nest_\w+) serves (.*)\ninline OrtStatus\* \1\(", re.MULTILINE)


def test_every_loop_nest_is_labelled_and_called_by_its_operator(source: str) -> None:
    """The classification operators' variants (one per float type, target type, reduction,
    weight given, self rank, and form of each float attribute: "= minimum", "> minimum") say
    what they serve, and exactly their operator's compute function calls each."""
    nests = dict(NEST_LABEL.findall(source))
    defined = re.findall(r"^inline OrtStatus\* (nest_\w+)\(", source, re.MULTILINE)
    assert defined and set(defined) == set(nests)
    per_op = {op: 0 for op in spec.CLASS_OPERATORS}
    for name, label in nests.items():
        op = label.split(",")[0]
        assert op in spec.CLASS_OPERATORS, label
        per_op[op] += 1
        body = source[source.index(f"OrtStatus* compute_{op}(") :]
        body = body[: body.index("\n}\n")]
        assert f"{{ LOSSGRAD_TRY({name}(c, counts)); ran = true; }}" in body, name
    for op, count in per_op.items():
        rows = len(spec.FLOAT_TYPES) * len(spec.INDEX_TYPES) * 3 * 2
        floats = [a for a in spec.CLASS_OPERATORS[op].attributes if a.kind is spec.AttrKind.FLOAT]
        forms = 2 ** len(floats)
        assert count == rows * len(spec.CLASS_OPERATORS[op].class_ranks) * forms, op
