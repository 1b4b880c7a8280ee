"""The one kind of skip that CI allows: a test whose code this CPU cannot execute (the
x86-64-v4 libraries on a machine without AVX-512). CI machines differ in their CPUs and no
package installs an instruction set, so LOSSGRAD_NO_SKIPS (tests/conftest.py) lets exactly
this skip stand, and lists it at the end of the run; a missing tool still fails. Compiling
for such a CPU needs no hardware: the builds and the compile-only checks run everywhere."""

from __future__ import annotations

from typing import NoReturn

import pytest

PREFIX = "this CPU cannot run"


class CpuCannotRun(pytest.skip.Exception):  # type: ignore[misc, name-defined]
    """Raised by skip_on_this_cpu: recognised by its type, not by its message."""


def skip_on_this_cpu(what: str) -> NoReturn:
    """Skip: "this CPU cannot run `what`" (say what it lacks, too)."""
    __tracebackhide__ = True
    raise CpuCannotRun(f"{PREFIX} {what}")
