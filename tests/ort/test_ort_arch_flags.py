"""The -march flags the native library is built with: -march=native spelled out. The CPU's
name alone can lose instruction sets (g++ 12 names an AVX-512 Zen 4 "znver3", whose
-march has no AVX-512), so the spelled-out flags must switch on exactly what native does."""

from __future__ import annotations

import shutil

import pytest

from lossgrad_compiler.backends.ort import build


@pytest.fixture(scope="module")
def compiler() -> tuple[str, ...]:
    try:
        return build.find_compiler()
    except build.NativeUnavailableError as err:
        pytest.skip(f"no C++ compiler: {err}")


def test_spelled_out_flags_switch_on_what_native_does(
    compiler: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(build.ENV_MARCH, raising=False)
    flags = build.arch_flags(compiler)
    assert flags and flags[0].startswith("-march=") and flags[0] != "-march=native"
    native = build.target_switches(build.target_help(compiler, "native"))
    spelled = build.target_switches(build.target_help(compiler, flags[0].removeprefix("-march=")))
    for flag in flags[1:]:
        name = flag.removeprefix("-mno-") if flag.startswith("-mno-") else flag[2:]
        spelled[name] = not flag.startswith("-mno-")
    assert spelled == native


def test_the_override_is_used_as_given(
    compiler: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(build.ENV_MARCH, "x86-64-v2")
    assert build.arch_flags(compiler) == ("-march=x86-64-v2",)
    monkeypatch.setenv(build.ENV_MARCH, " ")
    assert build.arch_flags(compiler) == ()


def test_no_flags_when_the_compiler_cannot_say(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(build.ENV_MARCH, raising=False)
    assert shutil.which("false")
    assert build.arch_flags(("false",)) == ()
