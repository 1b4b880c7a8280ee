"""compile_model: ONNX model → the pipeline → a target, by signature.

The model goes through the one pipeline (pipeline.py: loaded, checked, imported, its
signatures lowered once, in the static form, from the per-signature cache every consumer
shares), and the level-2 module goes to the target chosen by name from the
registry (lossgrad_compiler.targets).
Nodes that share a signature share one lowered function, so a model with 10,000 identical
nodes lowers one signature (and a second model with the same signatures lowers none)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from onnx import ModelProto

from lossgrad_compiler import spec
from lossgrad_compiler.errors import CompileError, LossGradError
from lossgrad_compiler.frontend import ImportedModel
from lossgrad_compiler.onnx.graphs import count_domain_nodes
from lossgrad_compiler.pipeline import (
    ModelSource,
    clear_level2_cache,
    imported_model,
    load_model,
    lowered,
)
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


def compile_model(
    model: ModelSource,
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
    imported = _import(working, progress)
    level2 = lowered(imported.signatures.values())
    compilation = Compilation(working, imported, level2.module, values, progress)
    artifact = _compiled(chosen, entry, compilation)
    report = CompileReport(
        target=target,
        options=values,
        nodes_per_operator=imported.nodes_per_operator(),
        signatures=list(imported.signatures),
        compiled=level2.compiled,
        cached=level2.cached,
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
        return imported_model(model)
    total = count_domain_nodes(model, spec.DOMAIN)
    progress("import", 0, total)
    return imported_model(model, lambda done: progress("import", done, total))


def clear_cache() -> None:
    """Forget every lowered and translated signature (for tests and benchmarks of cold
    compiles)."""
    clear_level2_cache()
    for entry in registered():
        if entry.target is not None:
            entry.target.clear_cache()
