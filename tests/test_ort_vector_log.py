"""The native kernels reach the float log's AVX-512 vector variant (cxx/vmath.h) from their
loops. The vectoriser calls the variant only from loops it vectorises; if a flag or a change
of the printed bodies stopped that (a call sunk into a select's branch does), every element
of KlDivTargetBackward would call the scalar form instead, several times slower and with the
same bits, so no numerics test would notice."""

from __future__ import annotations

import subprocess

from lossgrad_compiler.backends.ort.build import toolchain
from tests.ort_native_support import builds_vector_log, native_library

VARIANT = "_ZGVeN16v_lossgrad_logf_scalar"


def test_kernels_call_the_log_vector_variant() -> None:
    path = native_library()
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True, check=True
    ).stdout
    calls = sum(1 for line in listing.splitlines() if "call" in line and f"<{VARIANT}>" in line)
    if builds_vector_log(toolchain().arch_flags):
        assert calls > 0, f"no loop of {path} calls {VARIANT}"
    else:
        assert calls == 0
