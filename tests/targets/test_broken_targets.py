"""A broken third-party target costs only itself (issue 44, item 3). Each broken package is
installed the way pip leaves one (a module and a .dist-info with entry_points.txt on
sys.path or PYTHONPATH): `lossgrad-compile --help` and `--target onnx` still work, choosing
the broken target is one line naming it and its package, a name another package already
registers is refused naming both, and compile_model raises the project's errors only."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import ClassVar

import onnx
import pytest

from lossgrad_compiler import examples
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.errors import CompileError, InvalidArgumentError
from lossgrad_compiler.targets import (
    ENTRY_POINT_GROUP,
    Artifact,
    Compilation,
    Option,
    Produces,
    Target,
    TargetUnavailableError,
    find,
    get_target,
    registered,
)
from lossgrad_compiler.targets.loading import declaration_problem, load
from tests.helpers.plugins import PLUGINS, Plugin, install, lossgrad_compile, target_package

LOAD_PROBLEMS = {
    "import raises": "cannot be loaded: boom_on_import:Boom raised RuntimeError: the plugin "
    "cannot start",
    "missing attribute": "cannot be loaded: no_such_class:Absent raised AttributeError: module "
    "'no_such_class' has no attribute 'Absent'",
    "constructor raises": "cannot be created: init_raises:Working() raised KeyError: "
    "'no configuration'",
}
COMPILE_PROBLEMS = {
    "compile returns None": ": its compile returned NoneType, not an Artifact",
    "compile raises": " failed: ZeroDivisionError: the plugin divided by zero",
}


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "m.onnx"
    onnx.save(examples.example_model(), path)
    return path


def _installed(folder: Path, monkeypatch: pytest.MonkeyPatch, *plugins: Plugin) -> None:
    for plugin in plugins:
        install(folder, plugin)
    monkeypatch.syspath_prepend(str(folder))


def _whose(plugin: Plugin) -> str:
    return f"target '{plugin.target}' of package '{plugin.distribution}'"


@pytest.mark.parametrize("kind", [*LOAD_PROBLEMS, *COMPILE_PROBLEMS])
def test_a_broken_package_costs_only_its_own_target(
    kind: str, model_file: Path, tmp_path: Path
) -> None:
    plugin = PLUGINS[kind]
    folder = tmp_path / "site"
    install(folder, plugin)
    shown = lossgrad_compile(folder, "--help")
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    help_text = " ".join(shown.stdout.split())
    assert "onnx: standard ONNX, a model" in help_text
    if kind in LOAD_PROBLEMS:
        reason = f"{_whose(plugin)} {LOAD_PROBLEMS[kind]}"
        assert f"{plugin.target}: unavailable ({reason})" in help_text
    else:
        reason = f"{_whose(plugin)}{COMPILE_PROBLEMS[kind]}"
        assert f"{plugin.target}: a target that works, a module" in help_text
    onnx_output = tmp_path / "o.onnx"
    done = lossgrad_compile(folder, str(model_file), "--target", "onnx", "-o", str(onnx_output))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    onnx.checker.check_model(onnx.load(onnx_output), full_check=True)
    out = tmp_path / "out.txt"
    failed = lossgrad_compile(folder, str(model_file), "--target", plugin.target, "-o", str(out))
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.splitlines() == [f"lossgrad-compile: error: {reason}"]
    assert not out.exists()


def test_an_option_taking_a_flag_of_the_command_costs_only_its_target(
    model_file: Path, tmp_path: Path
) -> None:
    """argparse would refuse the whole parser: every command, --help included."""
    plugin = target_package("flag_taker", "flag-taker")
    source = plugin.source.replace(
        "from lossgrad_compiler.targets import ", "from lossgrad_compiler.targets import Option, "
    ).replace('    suffix = ".txt"', '    suffix = ".txt"\n    options = (Option("output", "x"),)')
    install(tmp_path, Plugin(plugin.distribution, plugin.target, plugin.reference, source))
    shown = lossgrad_compile(tmp_path, "--help")
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    reason = (
        "target 'flag-taker' of package 'flag_taker' is broken: flag_taker:Working declares "
        "option 'output' with the flag --output, which is lossgrad-compile's own"
    )
    assert f"flag-taker: unavailable ({reason})" in " ".join(shown.stdout.split())
    output = tmp_path / "o.onnx"
    done = lossgrad_compile(tmp_path, str(model_file), "-o", str(output))
    assert done.returncode == 0 and output.is_file(), done.stderr


def test_a_package_registering_a_built_in_name_is_refused_naming_both(
    model_file: Path, tmp_path: Path
) -> None:
    plugin = PLUGINS["duplicate onnx"]
    folder = tmp_path / "site"
    install(folder, plugin)
    shown = lossgrad_compile(folder, "--help")
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    refusal = (
        "onnx: unavailable (target 'onnx' of package 'fake_onnx_target' "
        "(fake_onnx_target:Working) is refused: 'onnx' is a built-in target of package "
        "'lossgrad_compiler' (lossgrad_compiler.targets.onnx:Onnx))"
    )
    assert refusal in " ".join(shown.stdout.split())
    output = tmp_path / "o.onnx"
    done = lossgrad_compile(folder, str(model_file), "--target", "onnx", "-o", str(output))
    assert done.returncode == 0 and "target onnx, mode functions" in done.stdout, done.stderr
    onnx.checker.check_model(onnx.load(output), full_check=True)  # the built-in one's model


def test_the_built_in_target_keeps_its_name_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed(tmp_path, monkeypatch, PLUGINS["duplicate onnx"])
    assert type(get_target("onnx")).__module__ == "lossgrad_compiler.targets.onnx"
    onnx_entries = [e for e in registered() if e.name == "onnx"]
    assert [(e.distribution, e.target is None) for e in onnx_entries] == [
        ("lossgrad_compiler", False),
        ("fake_onnx_target", True),
    ]
    assert compile_model(examples.example_model(), target="onnx").report.target == "onnx"


def test_a_name_two_other_packages_register_is_refused_for_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed(
        tmp_path, monkeypatch, target_package("twin_a", "twin"), target_package("twin_b", "twin")
    )
    message = (
        "target 'twin' is refused: package 'twin_a' (twin_a:Working) and package 'twin_b' "
        "(twin_b:Working) register it; uninstall all but one"
    )
    with pytest.raises(TargetUnavailableError) as raised:
        get_target("twin")
    assert str(raised.value) == message
    with pytest.raises(TargetUnavailableError, match=r"refused: package 'twin_a'"):
        compile_model(examples.example_model(), target="twin")
    listed = [e for e in registered() if e.name == "twin"]
    assert [(e.target, e.problem) for e in listed] == [(None, message)]  # listed once


def test_the_same_package_seen_twice_is_one_registration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two folders on sys.path holding the same distribution (an old copy left behind)."""
    plugin = target_package("twice_seen", "twice")
    _installed(tmp_path / "a", monkeypatch, plugin)
    _installed(tmp_path / "b", monkeypatch, plugin)
    assert find("twice").target is not None


@pytest.mark.parametrize("kind", [*LOAD_PROBLEMS])
def test_compile_model_gives_the_load_problem_naming_the_package(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = PLUGINS[kind]
    _installed(tmp_path, monkeypatch, plugin)
    with pytest.raises(TargetUnavailableError) as raised:
        compile_model(examples.example_model(), target=plugin.target)
    assert str(raised.value) == f"{_whose(plugin)} {LOAD_PROBLEMS[kind]}"
    assert all(e.target is not None for e in registered() if e.name != plugin.target)


BAD_COMPILES = {
    "compile returns None": ("return None", COMPILE_PROBLEMS["compile returns None"]),
    "compile raises": (
        'raise ZeroDivisionError("the plugin divided by zero")',
        COMPILE_PROBLEMS["compile raises"],
    ),
    "another kind": (
        "return Artifact(Produces.DIRECTORY)",
        " declares that it produces a module, its compile returned a directory",
    ),
    "no bytes": (
        "return Artifact(Produces.MODULE)",
        ": its compile returned a module artifact without its bytes",
    ),
}


@pytest.mark.parametrize("kind", BAD_COMPILES)
def test_a_failing_compile_is_a_compile_error_naming_the_target(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, problem = BAD_COMPILES[kind]
    # a module name of its own: the process keeps each imported module
    plugin = target_package("bad_" + kind.replace(" ", "_"), "bad-compile", body)
    _installed(tmp_path, monkeypatch, plugin)
    with pytest.raises(CompileError) as raised:
        compile_model(examples.example_model(), target="bad-compile")
    assert str(raised.value) == f"{_whose(plugin)}{problem}"


def test_a_model_target_without_a_model_is_a_compile_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = target_package("no_model", "no-model", "return Artifact(Produces.MODEL)")
    plugin = Plugin(
        plugin.distribution,
        plugin.target,
        plugin.reference,
        plugin.source.replace("produces = Produces.MODULE", "produces = Produces.MODEL"),
    )
    _installed(tmp_path, monkeypatch, plugin)
    with pytest.raises(CompileError, match=r"returned a model artifact without a model$"):
        compile_model(examples.example_model(), target="no-model")


def test_the_projects_own_errors_from_a_package_pass_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A target that checks a call raises the project's typed error, aclnn code included."""
    body = 'raise InvalidArgumentError("level2-x", "model", "needs static shapes")'
    _installed(tmp_path, monkeypatch, target_package("strict_target", "strict", body))
    with pytest.raises(InvalidArgumentError, match="level2-x: model: needs static shapes"):
        compile_model(examples.example_model(), target="strict")


# --------------------------------------------------------------------------- declarations


class _Declared(Target):
    name = "declared"
    produces = Produces.MODULE
    description = "a declaration under test"

    def compile(self, compilation: Compilation) -> Artifact:
        raise AssertionError


class _Renamed(_Declared):
    name = "other"


class _NoProduces(_Declared):
    produces = "module"  # type: ignore[assignment]


class _NoDescription(_Declared):
    description = None  # type: ignore[assignment]


class _ListOptions(_Declared):
    options: ClassVar = ["banner"]


class _FlagTaken(_Declared):
    options = (Option("output", "where"),)


class _NotAFlag(_Declared):
    options = (Option("level", "how much", flag="-l"),)


class _TypeNotCallable(_Declared):
    options = (Option("level", "how much", type=3),)  # type: ignore[arg-type]


NOT_A_TARGET = object()


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (_Declared, None),
        (_Renamed, "calls itself 'other', not 'declared'"),
        (_NoProduces, "declares produces = 'module', not a Produces"),
        (_NoDescription, "declares no description (one line for --help)"),
        (_ListOptions, "declares options that are not a tuple of Option"),
        (
            _FlagTaken,
            "declares option 'output' with the flag --output, which is lossgrad-compile's own",
        ),
        (_NotAFlag, "declares option 'level' with the flag '-l', not a --long-flag"),
        (_TypeNotCallable, "declares option 'level' with a type that is not callable (3)"),
    ],
)
def test_a_declaration_help_cannot_read_is_named(declared: type[Target], problem: str | None):
    assert declaration_problem(declared(), "declared") == problem


def _entry(value: str, name: str = "declared") -> metadata.EntryPoint:
    return metadata.EntryPoint(name, value, ENTRY_POINT_GROUP)


def test_loading_names_the_package_for_every_failure() -> None:
    here = __name__
    assert isinstance(load(_entry(f"{here}:_Declared"), "pkg"), _Declared)
    failures = {
        f"{here}:_NoProduces": "target 'declared' of package 'pkg' is broken: "
        f"{here}:_NoProduces declares produces = 'module', not a Produces",
        f"{here}:NOT_A_TARGET": "target 'declared' of package 'pkg' is broken: "
        f"{here}:NOT_A_TARGET is not a lossgrad_compiler Target",
        "no_module_named_like_this:T": "target 'declared' of package 'pkg' is unavailable in "
        "this installation (ModuleNotFoundError: No module named 'no_module_named_like_this')",
    }
    for value, message in failures.items():
        with pytest.raises(TargetUnavailableError) as raised:
            load(_entry(value), "pkg")
        assert str(raised.value) == message
