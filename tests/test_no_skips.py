"""The suite's no-skip rule (tests/conftest.py): with LOSSGRAD_NO_SKIPS=1, as .ci/run sets it,
every way a test can skip or xfail fails instead and says why; without it, skips stay skips.
Checked by running a small suite that uses the real conftest hooks in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SAMPLE = {
    "conftest.py": "from tests.conftest import pytest_make_collect_report, "
    "pytest_runtest_makereport, pytest_terminal_summary  # noqa: F401\n",
    "test_sample.py": """
        import pytest

        def test_passes():
            pass

        def test_skips_inside():
            pytest.skip("no C++ compiler")

        @pytest.mark.skipif(True, reason="no mlir-opt installed")
        def test_skipif_mark():
            pass

        @pytest.fixture
        def toolchain():
            pytest.skip("no headers")

        def test_skips_in_fixture(toolchain):
            pass

        @pytest.mark.xfail(reason="known defect")
        def test_xfails():
            assert False

        def test_imperative_xfail():
            pytest.xfail("function path differs")
    """,
    "test_cpu.py": """
        import pytest
        from tests.helpers.hardware import skip_on_this_cpu

        def test_cpu_cannot_run():
            skip_on_this_cpu("-march=x86-64-v4 code (no __AVX512F__)")

        @pytest.fixture(scope="module")
        def level():
            skip_on_this_cpu("the x86-64-v4 library (no avx512f)")

        @pytest.mark.parametrize("n", [1, 2])
        def test_cpu_cannot_run_fixture(level, n):
            pass

        def test_a_plain_skip_that_names_the_cpu():
            pytest.skip("this CPU cannot run it")
    """,
    "test_module_skip.py": """
        import pytest
        pytest.importorskip("a_module_that_is_not_installed", reason="pip install -e '.[x]'")

        def test_never_collected():
            pass
    """,
}


def run_sample(tmp_path: Path, no_skips: str | None) -> dict[str, str]:
    """Outcome per test (or per collected module) of the sample suite, from its JUnit XML;
    what pytest printed under "<output>"."""
    for name, text in SAMPLE.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    env = {k: v for k, v in os.environ.items() if k != "LOSSGRAD_NO_SKIPS"}
    env["PYTHONPATH"] = str(REPO)
    if no_skips is not None:
        env["LOSSGRAD_NO_SKIPS"] = no_skips
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--continue-on-collection-errors",
         f"--junitxml={report}", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        name = case.get("name") or case.get("classname", "")
        detail = "".join(child.get("message", "") + (child.text or "") for child in case)
        outcomes[name] = (kinds[0] if kinds else "passed") + ": " + detail
    outcomes["<output>"] = done.stdout
    return outcomes


CPU_SKIPS = {
    "test_cpu_cannot_run": "-march=x86-64-v4 code (no __AVX512F__)",
    "test_cpu_cannot_run_fixture[1]": "the x86-64-v4 library (no avx512f)",
    "test_cpu_cannot_run_fixture[2]": "the x86-64-v4 library (no avx512f)",
}


def test_without_the_variable_skips_stay_skips(tmp_path: Path) -> None:
    outcomes = run_sample(tmp_path, None)
    outcomes.pop("<output>")
    assert outcomes.pop("test_passes").startswith("passed")
    assert outcomes, "the sample's skips were not reported"
    assert all(o.startswith("skipped") for o in outcomes.values()), outcomes


@pytest.mark.parametrize("value", ["1", "yes"])
def test_with_the_variable_every_skip_but_the_cpus_fails(tmp_path: Path, value: str) -> None:
    outcomes = run_sample(tmp_path, value)
    output = outcomes.pop("<output>")
    assert outcomes.pop("test_passes").startswith("passed")
    for name, what in CPU_SKIPS.items():
        assert outcomes.pop(name).startswith("skipped"), name
        assert f"test_cpu.py::{name}: this CPU cannot run {what}" in output, output
    assert "not run: this CPU cannot execute their code" in output, output
    names = {
        "test_a_plain_skip_that_names_the_cpu",
        "test_skips_inside",
        "test_skipif_mark",
        "test_skips_in_fixture",
        "test_xfails",
        "test_imperative_xfail",
    }
    assert names <= set(outcomes), outcomes
    assert len(outcomes) == len(names) + 1, outcomes  # + the module that skips as a whole
    for name, outcome in outcomes.items():
        assert outcome.startswith(("failure", "error")), (name, outcome)
        assert "LOSSGRAD_NO_SKIPS=1 forbids skipping" in outcome, (name, outcome)
    assert "no C++ compiler" in outcomes["test_skips_inside"]
    assert "no mlir-opt installed" in outcomes["test_skipif_mark"]
    assert "known defect" in outcomes["test_xfails"]
    assert "function path differs" in outcomes["test_imperative_xfail"]
    (module,) = set(outcomes) - names
    assert "pip install -e '.[x]'" in outcomes[module]


def test_zero_means_skips_allowed(tmp_path: Path) -> None:
    outcomes = run_sample(tmp_path, "0")
    assert outcomes["test_skips_inside"].startswith("skipped")


def test_ci_sets_the_variable() -> None:
    script = (REPO / ".ci" / "run").read_text()
    assert "export LOSSGRAD_NO_SKIPS=1" in script
    assert script.index("export LOSSGRAD_NO_SKIPS=1") < script.index("make test")


def _escape_hatches(path: Path) -> list[str]:
    """xfail calls and marks, and `except AssertionError` handlers that drop the failure's
    message (catching it to collect and report the message is fine)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and node.attr == "xfail":
            found.append(f"{where}: xfail")
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = [node.type] if not isinstance(node.type, ast.Tuple) else node.type.elts
            names = {c.id for c in caught if isinstance(c, ast.Name)}
            if names & {"AssertionError", "Exception", "BaseException"}:
                used = node.name is not None and any(
                    isinstance(n, ast.Name) and n.id == node.name
                    for stmt in node.body
                    for n in ast.walk(stmt)
                )
                if not used:
                    found.append(f"{where}: except {'/'.join(sorted(names))} drops the failure")
    return found


def test_no_test_excuses_a_failure() -> None:
    """A wrong result must fail the suite: no test expects failure (xfail) or swallows an
    assertion (a test of an assertion helper uses pytest.raises)."""
    hatches = [h for path in sorted((REPO / "tests").rglob("*.py")) for h in _escape_hatches(path)]
    assert not hatches, hatches
