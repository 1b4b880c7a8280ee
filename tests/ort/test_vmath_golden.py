"""The bits of the native float log and exp (backends/ort/cxx/vmath.h) are the pinned ones,
per build flavour: fdlibm's log (x86-64, no FMA), the FMA log (x86-64-v3), the FMA log
through its AVX-512 vector variant and as the scalar function (x86-64-v4), and exp in each.
The accuracy tests allow about an ulp; these fail on any changed bit (a coefficient of exp's
polynomial changed from 0.5 to 0.50000006 changes about a thousand of the sample's results).
How the digests are made, and how to update them on purpose: tests/ort/vmath_golden.py."""

from __future__ import annotations

import subprocess

import pytest

from lossgrad_compiler.backends.ort.build import NativeUnavailableError, toolchain
from tests.helpers.hardware import skip_on_this_cpu
from tests.ort.vmath_golden import (
    FLAVOURS,
    FORMS,
    UPDATE_COMMAND,
    Flavour,
    build_harness,
    digest,
    golden,
    missing_on_this_cpu,
    pinned,
    sample,
)

VARIANTS = {"log": "_ZGVeN16v_lossgrad_logf_scalar", "exp": "_ZGVeN16v_lossgrad_expf_scalar"}


def _toolchain_or_skip() -> None:
    try:
        toolchain()
    except NativeUnavailableError as err:
        pytest.skip(f"no toolchain: {err}")


@pytest.fixture(scope="module", params=list(FLAVOURS))
def flavour(request: pytest.FixtureRequest) -> Flavour:
    _toolchain_or_skip()
    missing = missing_on_this_cpu(request.param)
    if missing:
        skip_on_this_cpu(f"-march={request.param} code (no {', '.join(missing)})")
    return Flavour.build(request.param)


def test_the_sample_is_the_pinned_one() -> None:
    x = sample()
    assert x.size == 1_049_398
    assert digest(x) == golden()["sample"]


@pytest.mark.parametrize("march", list(FLAVOURS))
def test_each_flavour_calls_the_vector_variants_where_its_form_has_them(march: str) -> None:
    """Compiled only, so that it holds on any CPU: the AVX-512 flavour's loops call the
    variants, the others' do not."""
    _toolchain_or_skip()
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(build_harness((f"-march={march}",)))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for function, variant in VARIANTS.items():
        loop = listing.split(f"<apply_{function}>:", 1)[1].split("\n\n", 1)[0]
        assert (f"<{variant}>" in loop) == (FORMS[march] == "fma+avx512"), function


def test_each_flavour_compiles_to_its_form(flavour: Flavour) -> None:
    """So that no flavour turns into another one unnoticed and pins the same code twice."""
    assert flavour.form == FORMS[flavour.march]


def test_the_bits_are_the_pinned_ones(flavour: Flavour) -> None:
    want = pinned()[flavour.march]
    got = flavour.digests()
    changed = [f for f in want if got[f] != want[f]]
    assert not changed, (
        f"the bits of vmath.h's float {' and '.join(changed)} built for -march={flavour.march} "
        f"changed over the sample of tests/ort/vmath_golden.py (sha256 {got[changed[0]]}, pinned "
        f"{want[changed[0]]}). The README promises stable results: if the change is intended, "
        f"run `{UPDATE_COMMAND}` and say in the commit why the bits changed"
    )


def test_the_build_machine_gives_the_bits_of_its_form() -> None:
    """The library's own flags (-march for this CPU, spelled out) compile to one of the pinned
    forms, with its bits."""
    _toolchain_or_skip()
    native = Flavour.build_with(toolchain().arch_flags)
    march = next(m for m, form in FORMS.items() if form == native.form)
    x = sample()
    for function in ("log", "exp"):
        assert digest(native.apply(function, x)) == pinned()[march][function], (
            f"float {function} of the library's build ({' '.join(toolchain().arch_flags)}) "
            f"differs from -march={march}, which has the same form ({native.form})"
        )
