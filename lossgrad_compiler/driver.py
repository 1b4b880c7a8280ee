"""compile_model: ONNX model → frontend → lower-lossgrad → a target, by signature.

The one pipeline: the model is loaded, checked and imported, its signatures are lowered
once (frontend.lowering's per-signature cache, shared by every target), and the level-2
module goes to the target chosen by name from the registry (lossgrad_compiler.targets).
Nodes that share a signature share one lowered function, so a model with 10,000 identical
nodes lowers one signature (and a second model with the same signatures lowers none)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto
from onnx.checker import ValidationError
from onnx.external_data_helper import load_external_data_for_tensor
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler import spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.frontend import ImportedModel, import_model
from lossgrad_compiler.frontend.lowering import clear_lowering_cache, lower, lower_signatures
from lossgrad_compiler.onnx.graphs import count_domain_nodes
from lossgrad_compiler.onnx.structure import structural_problem
from lossgrad_compiler.onnx.tensors import external_tensors
from lossgrad_compiler.targets import (
    Artifact,
    Compilation,
    Produces,
    Registered,
    Target,
    TargetOptionError,
    TargetUnavailableError,
    UnknownTargetError,
    find,
    registered,
)
from lossgrad_compiler.targets.loading import one_line
from lossgrad_compiler.targets.registry import OWN_DISTRIBUTION

Progress = Callable[[str, int, int], None]
"""progress(phase, done, total): phase is "import" or "rewrite"."""


class CompileError(ValueError):
    """A model or request the compiler cannot take (not ONNX, unknown target or option)."""


@dataclass
class CompileReport:
    """What a compilation did: for the CLI's summary and for tests."""

    target: str
    options: dict[str, Any]
    nodes_per_operator: dict[str, int]
    signatures: list[str] = field(default_factory=list)
    compiled: list[str] = field(default_factory=list)  # signature ids lowered by this call
    cached: list[str] = field(default_factory=list)  # signature ids found in the cache
    seconds: float = 0.0
    detail: str = ""  # the target's part of the summary: ", mode functions", " (ascend910b)"

    @property
    def nodes(self) -> int:
        return sum(self.nodes_per_operator.values())

    @property
    def mode(self) -> str | None:
        return self.options.get("mode")

    def summary(self) -> str:
        per_op = ", ".join(f"{name} {count}" for name, count in self.nodes_per_operator.items())
        return (
            f"{self.nodes} ai.lossgrad nodes ({per_op}); {len(self.signatures)} distinct "
            f"signatures: {len(self.compiled)} compiled, {len(self.cached)} from the cache; "
            f"target {self.target}{self.detail}; {self.seconds:.3f} s"
        )


@dataclass
class CompileResult:
    """The target's artifact and the report. `model` is the compiled model of a target that
    produces one (onnx, ort)."""

    artifact: Artifact
    report: CompileReport

    @property
    def model(self) -> ModelProto:
        if self.artifact.model is None:
            raise CompileError(f"target '{self.report.target}' produces no ONNX model")
        return self.artifact.model


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
    progress: Progress | None = None,
    **options: Any,
) -> CompileResult:
    """Compile every ai.lossgrad node of `model` (left unmodified) for `target`, any name the
    registry knows (lossgrad_compiler.targets.target_names(): onnx, ort, ascendc, iree,
    ascendnpu-ir and those other packages register), with the target's `options` (onnx:
    `mode` "functions" or "inline"; ascendc and ascendnpu-ir: `soc`; iree: `backend`,
    `arch`). Invalid nodes and an ai.lossgrad opset import outside 1..spec.OPSET_VERSION
    raise LossGradError (naming the node); a file that is not ONNX, or not valid ONNX, an
    unknown target or option, and a target of another package that fails or returns no
    artifact raise CompileError; a target that cannot be loaded raises
    TargetUnavailableError (the one-line reason, naming its package)."""
    try:
        entry = find(target)
        if entry.target is None:
            raise TargetUnavailableError(entry.problem)
        chosen = entry.target
        values = chosen.resolve_options(options)
    except (UnknownTargetError, TargetOptionError) as err:
        raise CompileError(str(err)) from None
    start = time.perf_counter()
    working = load_model(model)
    check_structure(working)
    imported = _import(working, progress)
    lowered = lower(imported.signatures.values(), chosen.form)
    compilation = Compilation(working, imported, lowered.module, chosen.form, values, progress)
    artifact = _compiled(chosen, entry, compilation)
    report = CompileReport(
        target=target,
        options=values,
        nodes_per_operator=imported.nodes_per_operator(),
        signatures=list(imported.signatures),
        compiled=lowered.compiled,
        cached=lowered.cached,
        seconds=time.perf_counter() - start,
        detail=artifact.detail,
    )
    return CompileResult(artifact, report)


def _compiled(target: Target, entry: Registered, compilation: Compilation) -> Artifact:
    """The target's artifact, checked. Another package's target runs its own code: what it
    raises, other than the project's errors, becomes one CompileError naming the target and
    its package (the built-in targets raise the project's typed errors as they are)."""
    whose = f"target '{entry.name}'"
    if entry.distribution != OWN_DISTRIBUTION:
        whose += f" of package '{entry.distribution}'"
        try:
            artifact = target.compile(compilation)
        except (LossGradError, CompileError, TargetUnavailableError):
            raise
        except Exception as err:  # a package's compile may raise anything
            raise CompileError(f"{whose} failed: {one_line(err)}") from err
    else:
        artifact = target.compile(compilation)
    if not isinstance(artifact, Artifact):
        raise CompileError(
            f"{whose}: its compile returned {type(artifact).__name__}, not an Artifact"
        )
    if artifact.produces is not target.produces:
        raise CompileError(
            f"{whose} declares that it produces a {target.produces.value}, "
            f"its compile returned a {artifact.produces.value}"
        )
    if target.produces is Produces.MODEL and not isinstance(artifact.model, ModelProto):
        raise CompileError(f"{whose}: its compile returned a model artifact without a model")
    if target.produces is Produces.MODULE and not isinstance(artifact.data, bytes):
        raise CompileError(f"{whose}: its compile returned a module artifact without its bytes")
    return artifact


def _import(model: ModelProto, progress: Progress | None) -> ImportedModel:
    if progress is None:
        return import_model(model)
    total = count_domain_nodes(model, spec.DOMAIN)
    progress("import", 0, total)
    return import_model(model, lambda done: progress("import", done, total))


def import_checked(model: ModelProto | bytes | str | Path) -> ImportedModel:
    """The frontend only: the model's checked nodes and their signatures."""
    working = load_model(model)
    check_structure(working)
    return import_model(working)


def lower_model(model: ModelProto | bytes | str | Path) -> tuple[ImportedModel, ModuleOp]:
    """The frontend and lower-lossgrad only: the level 2 every target starts from."""
    imported = import_checked(model)
    return imported, lower_signatures(imported.signatures.values())


def clear_cache() -> None:
    """Forget every lowered and translated signature (for tests and benchmarks of cold
    compiles)."""
    clear_lowering_cache()
    for entry in registered():
        if entry.target is not None:
            entry.target.clear_cache()
