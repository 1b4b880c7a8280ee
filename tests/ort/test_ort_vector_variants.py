"""The native kernels reach the float log's and exp's AVX-512 vector forms (cxx/vmath.h) from
their loops. A body printed for any lane type (kLanes16) runs 16 elements at a time with the
vector forms inline; any other float body relies on the vectoriser, which calls a variant only
from loops it vectorises. If a flag or a change of the printed bodies stopped either (a call
sunk into a select's branch, or copied into both arms of one by jump threading, does), every
element of that kernel would call the scalar form instead, several times slower and with the
same bits, so no numerics test would notice. So every kernel whose float body calls the
function runs it 16 lanes at a time: inline (calling neither form) or through the variant."""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict

import pytest

from lossgrad_compiler.backends.ort.build import toolchain
from tests.ort.support import builds_vector_log, kernel_structs, native_library

VARIANTS = {"log": "_ZGVeN16v_lossgrad_logf_scalar", "exp": "_ZGVeN16v_lossgrad_expf_scalar"}


@pytest.fixture(scope="module")
def calls_by_kernel() -> dict[str, set[str]]:
    """Per kernel struct (K<N>), the symbols called by the functions instantiated for it."""
    listing = subprocess.run(
        ["objdump", "-d", "-C", "--no-show-raw-insn", native_library()],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    calls: dict[str, set[str]] = defaultdict(set)
    kernel = None
    for line in listing.splitlines():
        header = re.match(r"[0-9a-f]+ <.*?lossgrad::variants::(K\d+)\b", line)
        if header:
            kernel = header.group(1)
        elif re.match(r"[0-9a-f]+ <", line):
            kernel = None
        elif kernel and "call" in line and "<" in line:
            calls[kernel].add(line.rsplit("<", 1)[1].rstrip(">"))
    return calls


def float_kernels_calling(function: str, lanes16: bool) -> list[str]:
    """The kernel structs whose body computes in float and calls lossgrad::`function`, printed
    for any lane type (`lanes16`) or not."""
    found = []
    flag = f"kLanes16 = {'true' if lanes16 else 'false'};"
    for name, body in kernel_structs():
        if "using Val = float;" in body and f"lossgrad::{function}(" in body and flag in body:
            found.append(name)
    return found


@pytest.mark.parametrize("function", sorted(VARIANTS))
def test_every_kernel_calls_the_vector_variant(
    calls_by_kernel: dict[str, set[str]], function: str
) -> None:
    inline, through_variant = (float_kernels_calling(function, lanes) for lanes in (True, False))
    assert inline, f"no float kernel printed for any lane type calls lossgrad::{function}"
    variant = VARIANTS[function]
    scalar = variant.removeprefix("_ZGVeN16v_")
    if builds_vector_log(toolchain().arch_flags):
        calling = [k for k in inline if calls_by_kernel[k] & {variant, scalar}]
        assert not calling, f"{calling} call {variant} or {scalar}: not inline"
        scalar_only = [k for k in through_variant if variant not in calls_by_kernel[k]]
        assert not scalar_only, f"{scalar_only} never call {variant}"
    else:
        assert not any(variant in c for c in calls_by_kernel.values())
