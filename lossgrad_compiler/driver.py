"""compile_model: ONNX model → frontend → lower-lossgrad → ONNX backend, by signature.

Nodes that share a signature share one compiled body, and compiled bodies are cached in the
process, so a model with 10,000 identical nodes compiles one signature (and a second model
with the same signatures compiles none)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto
from onnx.checker import ValidationError
from onnx.external_data_helper import load_external_data_for_tensor
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler import spec
from lossgrad_compiler.backends.onnx.functions import apply_functions
from lossgrad_compiler.backends.onnx.inline import apply_inline
from lossgrad_compiler.backends.onnx.translator import TranslatedFunction, translate_function
from lossgrad_compiler.frontend import ImportedModel, Signature, import_model, lower_signatures
from lossgrad_compiler.onnx.graphs import count_domain_nodes
from lossgrad_compiler.onnx.structure import structural_problem
from lossgrad_compiler.onnx.tensors import external_tensors

TARGETS = ("onnx", "ort")
MODES = ("functions", "inline")

Progress = Callable[[str, int, int], None]
"""progress(phase, done, total): phase is "import" or "rewrite"."""

_COMPILED: dict[str, TranslatedFunction] = {}


class CompileError(ValueError):
    """A model or request the compiler cannot take (not ONNX, unknown target or mode)."""


@dataclass
class CompileReport:
    """What a compilation did: for the CLI's summary and for tests."""

    target: str
    mode: str
    nodes_per_operator: dict[str, int]
    signatures: list[str] = field(default_factory=list)
    compiled: list[str] = field(default_factory=list)  # signature ids compiled by this call
    cached: list[str] = field(default_factory=list)  # signature ids found in the cache
    seconds: float = 0.0

    @property
    def nodes(self) -> int:
        return sum(self.nodes_per_operator.values())

    def summary(self) -> str:
        per_op = ", ".join(f"{name} {count}" for name, count in self.nodes_per_operator.items())
        return (
            f"{self.nodes} ai.lossgrad nodes ({per_op}); {len(self.signatures)} distinct "
            f"signatures: {len(self.compiled)} compiled, {len(self.cached)} from the cache; "
            f"target {self.target}, mode {self.mode}; {self.seconds:.3f} s"
        )


@dataclass
class CompileResult:
    model: ModelProto
    report: CompileReport


def load_model(
    source: ModelProto | bytes | str | Path, *, external_data: bool = True
) -> ModelProto:
    """A private copy of a model given as a ModelProto, serialized bytes or a file path.

    A model read from a path gets its external data loaded from the model's folder, as
    `onnx.load` does, so the compiled model can be saved anywhere; onnx's reader refuses a
    location outside that folder. `external_data=False` keeps the references (the CLI
    writes the data beside its output itself)."""
    if isinstance(source, ModelProto):
        model = ModelProto()
        model.CopyFrom(source)
        return model
    path = None
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as err:
            raise CompileError(f"cannot read '{path}': {err.strerror or err}") from None
        where = f"'{path}'"
    else:
        data, where = bytes(source), "the input"
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as err:
        raise CompileError(f"{where} is not an ONNX model ({type(err).__name__})") from None
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise CompileError(f"{where} is not an ONNX model (no IR version or no graph)")
    if path is not None and external_data:
        _load_external_data(model, path)
    return model


def _load_external_data(model: ModelProto, path: Path) -> None:
    for tensor in external_tensors(model):
        try:
            load_external_data_for_tensor(tensor, str(path.parent))
        except (ValidationError, ValueError, OSError) as err:
            text = " ".join(str(err).split())
            raise CompileError(
                f"'{path}': external data of tensor '{tensor.name}': {text}"
            ) from None


def check_structure(model: ModelProto) -> None:
    """Raise CompileError if the model is not structurally valid ONNX (a cycle, a name
    produced twice, an undefined input, ...): the frontend and backends assume it is."""
    problem = structural_problem(model)
    if problem is not None:
        raise CompileError(f"the model is not valid ONNX: {problem}")


def compile_model(
    model: ModelProto | bytes | str | Path,
    target: str = "onnx",
    mode: str = "functions",
    progress: Progress | None = None,
) -> CompileResult:
    """Compile every ai.lossgrad node of `model` (left unmodified) to standard ONNX.

    `target` "onnx" (or "ort", whose model is the same `functions` model that the native
    kernel library accelerates); `mode` "functions" keeps the nodes and adds one model-local
    function per signature, "inline" replaces each node by its standard nodes. Invalid nodes
    and an ai.lossgrad opset import of another version than 1 raise LossGradError (naming
    the node); a file that is not ONNX, or not valid ONNX, raises CompileError."""
    if target not in TARGETS:
        raise CompileError(f"unknown target '{target}' (compile_model knows {', '.join(TARGETS)})")
    if mode not in MODES:
        raise CompileError(f"unknown mode '{mode}' (one of {', '.join(MODES)})")
    if target == "ort" and mode != "functions":
        raise CompileError("target 'ort' needs mode 'functions' (the kernels replace the nodes)")
    start = time.perf_counter()
    working = load_model(model)
    check_structure(working)
    imported = _import(working, progress)
    bodies, compiled, cached = compile_signatures(imported.signatures.values())
    if mode == "functions":
        apply_functions(imported, bodies)
    else:
        total = len(imported.sites)
        report = (lambda done: progress("rewrite", done, total)) if progress else None
        apply_inline(imported, bodies, progress=report)
        if progress is not None:
            progress("rewrite", total, total)
    report = CompileReport(
        target=target,
        mode=mode,
        nodes_per_operator=imported.nodes_per_operator(),
        signatures=list(imported.signatures),
        compiled=compiled,
        cached=cached,
        seconds=time.perf_counter() - start,
    )
    return CompileResult(working, report)


def _import(model: ModelProto, progress: Progress | None) -> ImportedModel:
    if progress is None:
        return import_model(model)
    total = count_domain_nodes(model, spec.DOMAIN)
    progress("import", 0, total)
    return import_model(model, lambda done: progress("import", done, total))


def compile_signatures(
    signatures: Iterable[Signature],
) -> tuple[dict[str, TranslatedFunction], list[str], list[str]]:
    """The ONNX body of each signature (from the cache, or lowered and translated now), the
    ids compiled now and the ids taken from the cache."""
    signatures = list(signatures)
    missing = [s for s in signatures if s.id not in _COMPILED]
    cached = [s.id for s in signatures if s.id in _COMPILED]
    if missing:
        for function in lower_signatures(missing).body.block.ops:
            assert isinstance(function, func.FuncOp)
            signature = next(s for s in missing if s.id == function.sym_name.data)
            _COMPILED[signature.id] = translate_function(function)
    return {s.id: _COMPILED[s.id] for s in signatures}, [s.id for s in missing], cached


def import_checked(model: ModelProto | bytes | str | Path) -> ImportedModel:
    """The frontend only: the model's checked nodes and their signatures."""
    working = load_model(model)
    check_structure(working)
    return import_model(working)


def lower_model(model: ModelProto | bytes | str | Path) -> tuple[ImportedModel, ModuleOp]:
    """The frontend and lower-lossgrad only: the ascendc target starts from here."""
    imported = import_checked(model)
    return imported, lower_signatures(imported.signatures.values())


def clear_cache() -> None:
    """Forget every compiled signature (for tests and benchmarks of cold compiles)."""
    _COMPILED.clear()
