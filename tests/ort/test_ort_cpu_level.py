"""The choice of a prebuilt kernel library from a CPU's features (issue 44, items 5 and 9):
`level_for` maps made-up feature sets, every level included, to a level, so a wrong mapping
shows on any machine, not only on one whose CPU hits it; $LOSSGRAD_ORT_MARCH naming a level
the CPU cannot run is refused unless $LOSSGRAD_ORT_MARCH_FORCE=1; a missing library file is
the project's message, never ORT's "cannot open shared object file". No compiler needed:
the prebuilt folder here holds stand-in files with a real manifest."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lossgrad_compiler.backends.build_cache import write_manifest
from lossgrad_compiler.backends.ort import prebuilt
from lossgrad_compiler.backends.ort.build import ENV_MARCH, NativeUnavailableError
from lossgrad_compiler.backends.ort.prebuilt import FEATURES, LEVELS, level_for

V2, V3, V4, BF16 = FEATURES
EVERY_LEVEL = {
    "x86-64-v2": {V2},
    "x86-64-v3": {V2, V3},
    "x86-64-v4": {V2, V3, V4},
    "x86-64-v4-avx512bf16": {V2, V3, V4, BF16},
}


@pytest.mark.parametrize(
    ("features", "level"),
    [
        (set(), None),
        *((features, level) for level, features in EVERY_LEVEL.items()),
        ({BF16}, None),  # AVX512-BF16 alone is no level
        ({V2, BF16}, "x86-64-v2"),
        ({V2, V3, BF16}, "x86-64-v3"),  # BF16 without AVX-512: v3, not the BF16 library
        ({V2, V4}, "x86-64-v2"),  # each level needs the ones below it
        ({V3, V4, BF16}, None),
    ],
)
def test_the_level_of_a_feature_set(features: set[str], level: str | None) -> None:
    assert level_for(frozenset(features)) == level


def test_every_level_is_some_feature_set_s_choice() -> None:
    assert [level_for(frozenset(f)) for f in EVERY_LEVEL.values()] == list(LEVELS)


def test_the_probe_asks_each_feature_for_its_bit() -> None:
    asked = re.findall(
        r'__builtin_cpu_supports\("([^"]+)"\)\) found \|= 1u << (\d)', (prebuilt.PROBE_SOURCE)
    )
    assert [(name, int(bit)) for name, bit in asked] == [(n, i) for i, n in enumerate(FEATURES)]
    assert prebuilt.features_of(0b1011) == {V2, V3, BF16}
    assert prebuilt.features_of(0) == frozenset()


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A prebuilt folder of stand-in files (never loaded) with a manifest, as a wheel ships."""
    folder = tmp_path / "prebuilt"
    folder.mkdir()
    names = [prebuilt.library_name(level) for level in LEVELS] + [prebuilt.PROBE_NAME]
    for name in names:
        (folder / name).write_bytes(name.encode())
    write_manifest(folder / prebuilt.MANIFEST, {n: folder / n for n in names})
    monkeypatch.delenv(ENV_MARCH, raising=False)
    monkeypatch.delenv(prebuilt.ENV_FORCE, raising=False)
    return folder


def _on_cpu(monkeypatch: pytest.MonkeyPatch, features: set[str]) -> None:
    monkeypatch.setattr(prebuilt, "cpu_features", lambda directory: frozenset(features))


@pytest.mark.parametrize("level", LEVELS)
def test_the_library_of_the_cpu_s_level(
    level: str, installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _on_cpu(monkeypatch, EVERY_LEVEL[level])
    assert prebuilt.prebuilt_library(installed) == installed / prebuilt.library_name(level)


def test_a_cpu_below_v2_has_none(installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _on_cpu(monkeypatch, {BF16})
    with pytest.raises(NativeUnavailableError, match=r"this CPU lacks x86-64-v2"):
        prebuilt.prebuilt_library(installed)


@pytest.mark.parametrize("cpu", LEVELS)
@pytest.mark.parametrize("named", LEVELS)
def test_an_override_names_a_level_the_cpu_runs(
    cpu: str, named: str, installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _on_cpu(monkeypatch, EVERY_LEVEL[cpu])
    monkeypatch.setenv(ENV_MARCH, named)
    if LEVELS.index(named) <= LEVELS.index(cpu):
        assert prebuilt.prebuilt_library(installed).name == prebuilt.library_name(named)
        return
    missing = ", ".join(sorted(EVERY_LEVEL[named] - EVERY_LEVEL[cpu]))
    with pytest.raises(NativeUnavailableError) as raised:
        prebuilt.prebuilt_library(installed)
    assert str(raised.value) == (
        f"${ENV_MARCH}={named} names a level this CPU cannot run (it lacks {missing}; its "
        f"level is {cpu}), whose library would stop the process with an illegal "
        f"instruction; unset ${ENV_MARCH} to use this CPU's level, or set "
        "$LOSSGRAD_ORT_MARCH_FORCE=1 to load it anyway"
    )


def test_the_issue_s_case_and_the_force_flag(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A v4 CPU without AVX512-BF16 asked for the BF16 library: refused (also with the flag
    at 0); with LOSSGRAD_ORT_MARCH_FORCE=1 the library is returned, the CPU unasked."""
    _on_cpu(monkeypatch, EVERY_LEVEL["x86-64-v4"])
    monkeypatch.setenv(ENV_MARCH, "x86-64-v4-avx512bf16")
    for flag in (None, "0", ""):
        if flag is not None:
            monkeypatch.setenv(prebuilt.ENV_FORCE, flag)
        with pytest.raises(NativeUnavailableError, match=r"it lacks avx512bf16; its level is"):
            prebuilt.prebuilt_library(installed)
    monkeypatch.setenv(prebuilt.ENV_FORCE, "1")
    monkeypatch.setattr(prebuilt, "cpu_features", None)  # not called when forced
    forced = prebuilt.prebuilt_library(installed)
    assert forced.name == "liblossgrad_ort-prebuilt-x86-64-v4-avx512bf16.so"


def test_a_level_missing_from_the_installation_is_the_project_s_message(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A set built for fewer levels (build_prebuilt's `levels`) has a whole manifest and no
    file for the others."""
    (installed / prebuilt.library_name("x86-64-v4")).unlink()
    kept = [p for p in installed.iterdir() if p.name != prebuilt.MANIFEST]
    write_manifest(installed / prebuilt.MANIFEST, {p.name: p for p in kept})
    _on_cpu(monkeypatch, EVERY_LEVEL["x86-64-v4"])
    with pytest.raises(NativeUnavailableError) as raised:
        prebuilt.prebuilt_library(installed)
    assert str(raised.value) == (
        "the prebuilt kernel library for x86-64-v4 (liblossgrad_ort-prebuilt-x86-64-v4.so) "
        f"is missing from {installed}; reinstall lossgrad_compiler"
    )


def test_a_library_removed_after_it_was_found_is_the_project_s_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lossgrad_compiler.runtime.ort import session_options

    gone = tmp_path / "liblossgrad_ort-native-0.so"
    with pytest.raises(NativeUnavailableError) as raised:
        session_options(str(gone))
    assert str(raised.value) == (
        f"the native ORT kernel library {gone} (built here for this machine's CPU) is "
        "missing: it was removed after this process found it; start a new process to build "
        "or find it again"
    )
