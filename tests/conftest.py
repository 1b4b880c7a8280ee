"""Suite-wide pytest configuration.

The hypothesis profile every property test runs under: tests choose their own
`max_examples`; the profile only removes the per-example deadline (the first example of a
test pays for imports and kernel builds, which is not a failure). Select another profile with
HYPOTHESIS_PROFILE (e.g. `ci`: derandomized, reproducible).

No skips in CI: a test may skip locally when something it needs is not installed (it says
what to install), but with LOSSGRAD_NO_SKIPS=1 (set by .ci/run, which installs every tool
the suite uses) a skip or an xfail is reported as a failure, so a missing compiler, missing
headers or a missing mlir-opt cannot pass CI unnoticed. The one exception is a test whose code
this CPU cannot execute (tests/helpers/hardware.py): no install gives a CPU AVX-512, so that
skip stands and the run's summary lists it."""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers.hardware import PREFIX, CpuCannotRun

settings.register_profile(
    "lossgrad",
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("ci", parent=settings.get_profile("lossgrad"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "lossgrad"))

NO_SKIPS = "LOSSGRAD_NO_SKIPS"


def skips_forbidden() -> bool:
    return os.environ.get(NO_SKIPS, "") not in ("", "0")


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    if getattr(report, "wasxfail", None) is not None:
        return f"xfail: {report.wasxfail}"
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: why")
        return f"{longrepr[2]} ({longrepr[0]}:{longrepr[1]})"
    return str(longrepr)


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn a skipped (or xfailed) report into a failure that says why it skipped."""
    if not (skips_forbidden() and report.skipped):
        return
    reason = _skip_reason(report)
    if hasattr(report, "wasxfail"):
        del report.wasxfail
    report.outcome = "failed"
    report.longrepr = f"{NO_SKIPS}=1 forbids skipping, and this skipped: {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.excinfo is None or not call.excinfo.errisinstance(CpuCannotRun):
        _fail_skip(report)
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the tests this CPU could not run, so that a green run says what it left out
    (under xdist the controller gets plain skipped reports: it knows them by their message)."""
    reasons = ((r.nodeid, _skip_reason(r)) for r in terminalreporter.stats.get("skipped", []))
    lines = [f"{node}: {why[why.index(PREFIX) :]}" for node, why in reasons if PREFIX in why]
    if lines:
        terminalreporter.section("not run: this CPU cannot execute their code")
        for line in lines:
            terminalreporter.line(line)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _fail_skip(report)
    return report
