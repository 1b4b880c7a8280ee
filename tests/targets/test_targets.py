"""The Target registry and the one pipeline: the five built-in targets register through the
entry-point group like any other package's, compile_model reaches each of them with its
options, the driver lowers each signature once for all of them, no backend runs the
lowering, and facts are resolved once (divisor_rule has one caller)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import onnx
import pytest
from xdsl.dialects.builtin import StringAttr

from lossgrad_compiler import cli, examples, spec
from lossgrad_compiler.driver import clear_cache, compile_model
from lossgrad_compiler.errors import CompileError
from lossgrad_compiler.frontend import lowering
from lossgrad_compiler.targets import Produces, get_target, registered
from lossgrad_compiler.targets.registry import ENTRY_POINT_GROUP, OWN_DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = {"onnx", "ort", "ascendc", "iree", "ascendnpu-ir"}

NODES = len(examples.example_model().graph.node)  # one signature each


def own() -> list:
    return [e for e in registered() if e.distribution == OWN_DISTRIBUTION]


def test_the_built_in_targets_register_through_the_entry_point_group() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = config["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert set(declared) == BUILT_IN
    assert {e.name: e.reference for e in own()} == declared
    assert all(e.target is not None for e in own())


def test_docs_cli_lists_every_built_in_target_and_its_options() -> None:
    assert cli.targets_table_markdown(own()) in (ROOT / "docs" / "cli.md").read_text()


@pytest.mark.parametrize(
    ("target", "options", "produces"),
    [
        ("onnx", {"mode": "inline"}, Produces.MODEL),
        ("ort", {}, Produces.MODEL),
        ("ascendc", {"soc": "ascend910b3"}, Produces.DIRECTORY),
        ("iree", {"backend": "llvm-cpu", "arch": "x86-64-v3"}, Produces.MODULE),
        ("ascendnpu-ir", {"soc": "ascend910b"}, Produces.DIRECTORY),
    ],
)
def test_compile_model_reaches_every_target(target: str, options: dict, produces: Produces):
    result = compile_model(examples.example_model(), target=target, **options)
    artifact = result.artifact
    assert artifact.produces is produces is get_target(target).produces
    assert result.report.target == target and len(result.report.signatures) == NODES
    assert {k: result.report.options[k] for k in options} == options
    if produces is Produces.MODEL:
        onnx.checker.check_model(result.model, full_check=True)
    elif produces is Produces.MODULE:
        assert artifact.data[:2] == b"PK" and b"module.fb" in artifact.data[:64]  # a vmfb
    else:
        ids = {path.split("/")[0] for path in artifact.files if "/" in path}
        assert ids == set(result.report.signatures)
    if target == "ort":
        (library,) = artifact.companions.values()
        assert library.is_file() and library.suffix == ".so"


def test_unknown_targets_and_options_are_compile_errors() -> None:
    model = examples.example_model()
    with pytest.raises(CompileError, match=r"unknown target 'gpu' \(known targets: .*onnx"):
        compile_model(model, target="gpu")
    with pytest.raises(CompileError, match=r"target 'onnx' has no option 'soc' \(its options"):
        compile_model(model, target="onnx", soc="ascend910b")
    with pytest.raises(CompileError, match=r"target 'ort' takes mode functions, not 'inline'"):
        compile_model(model, target="ort", mode="inline")
    with pytest.raises(CompileError, match="produces no ONNX model"):
        _ = compile_model(model, target="ascendc").model


def test_the_driver_lowers_each_signature_once_for_every_target(monkeypatch) -> None:
    """Two targets, one lowering: the second finds every signature in the shared cache."""
    runs: list[int] = []
    original = lowering.LowerLossgradPass.apply

    def counted(self, ctx, module):
        runs.append(len(list(module.ops)))
        return original(self, ctx, module)

    monkeypatch.setattr(lowering.LowerLossgradPass, "apply", counted)
    clear_cache()
    first = compile_model(examples.example_model(), target="onnx")
    second = compile_model(examples.example_model(), target="ascendc")
    assert runs == [NODES]
    assert first.report.compiled == first.report.signatures and first.report.cached == []
    assert second.report.compiled == [] and second.report.cached == first.report.signatures


def test_a_target_gets_a_copy_of_the_cached_level_2() -> None:
    """A backend may rewrite the module it is given (HFusion, Ascend C do): the cache keeps
    the lowered functions as they were."""
    imported = examples.example_model()
    from lossgrad_compiler.frontend import import_model

    signatures = list(import_model(imported).signatures.values())
    before = str(lowering.lower_signatures(signatures))
    given = lowering.lower_signatures(signatures)
    for function in given.ops:
        function.sym_name = StringAttr("rewritten")  # type: ignore[attr-defined]
        function.body.block.erase_op(function.body.block.first_op, safe_erase=False)  # type: ignore[attr-defined]
    assert str(lowering.lower_signatures(signatures)) == before


def test_a_missing_extra_is_one_line_naming_it_and_the_target_stays_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "lossgrad_compiler.backends.iree", None)
    source = tmp_path / "m.onnx"
    onnx.save(examples.example_model(), source)
    assert cli.main([str(source), "--target", "iree", "-o", str(tmp_path / "m.vmfb")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "target 'iree' is unavailable" in line
    assert "pip install 'lossgrad_compiler[iree]'" in line
    assert "iree" in [e.name for e in registered()]
    assert not (tmp_path / "m.vmfb").exists()


# --------------------------------------------------------------------------- one pipeline


def _python_files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]


def test_no_backend_runs_the_lowering() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{k}"
        for p in _python_files("lossgrad_compiler/backends")
        for k, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"lower_signatures|LowerLossgradPass", line)
    ]
    assert found == []


def test_divisor_rule_has_one_caller() -> None:
    """spec.validate resolves the divisor; every layer reads CheckedCall.divisor or the
    level-2 attribute lossgrad.divisor."""
    calls = []
    for path in _python_files("lossgrad_compiler", "passes", "dialects"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name == "divisor_rule":
                    calls.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(calls) == 1 and calls[0].startswith("lossgrad_compiler/spec.py")


def test_the_lowered_function_carries_the_validated_divisor() -> None:
    from lossgrad_compiler import level2
    from lossgrad_compiler.frontend import import_model

    imported = import_model(examples.example_model())
    module = lowering.lower_signatures(imported.signatures.values())
    checked = {s.signature.id: s for s in imported.sites}
    for function in level2.signature_functions(module):
        site = checked[function.name]
        want = spec.divisor_rule(
            site.signature.attributes["reduction"],
            len(site.signature.patterns[1]),
            site.signature.op,
        )
        assert level2.read_divisor(function.function) is want
        computed = (spec.Divisor.TOTAL_WEIGHT, spec.Divisor.KEPT_WEIGHT)
        scaled = None if want in computed else want  # an input or a reduction, not a scale
        assert (function.scale.divisor if function.scale else None) is scaled


# --------------------------------------------------------------------------- ONNX backend


RULE_MODULES = ("alignment", "bookkeeping", "generic", "rules", "size_check")


@pytest.mark.parametrize("name", RULE_MODULES)
def test_onnx_rule_modules_do_not_import_the_translator(name: str) -> None:
    """Not even under TYPE_CHECKING: they take the Translation protocol (state.py)."""
    text = (ROOT / "lossgrad_compiler" / "backends" / "onnx" / f"{name}.py").read_text()
    imported = {
        node.module
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    assert "lossgrad_compiler.backends.onnx.translator" not in imported
    assert "lossgrad_compiler.backends.onnx.state" in imported
    assert "translator" not in text


def test_the_translator_has_every_member_of_the_protocol() -> None:
    from lossgrad_compiler.backends.onnx.sink import NodeSink
    from lossgrad_compiler.backends.onnx.state import Translation
    from lossgrad_compiler.backends.onnx.translator import Translator

    members = {n for n in vars(Translation) if not n.startswith("_")} | set(
        Translation.__annotations__
    )
    translator = Translator(NodeSink(""))
    assert members and all(hasattr(translator, m) for m in members)
    assert isinstance(translator.nested(), Translator)
