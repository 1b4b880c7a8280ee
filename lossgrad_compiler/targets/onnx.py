"""`--target onnx`: standard ONNX, the ai.lossgrad nodes kept with one model-local function
per signature (`mode` functions) or replaced by standard nodes (`mode` inline)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lossgrad_compiler.targets.interface import Artifact, Compilation, Option, Produces, Target

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from lossgrad_compiler.backends.onnx import TranslatedFunction

MODE = Option(
    "mode",
    "functions: keep the nodes, add one model-local function per signature; inline: replace "
    "each node by standard nodes",
    default="functions",
    choices=("functions", "inline"),
)

_TRANSLATED: dict[str, TranslatedFunction] = {}


def translated(level2: ModuleOp) -> dict[str, TranslatedFunction]:
    """The ONNX body of every function of `level2`, by signature id (translated once per
    process: the ONNX translation of a level-2 function depends on nothing else)."""
    # defers the ONNX backend (and xDSL): listing the targets needs neither
    from lossgrad_compiler.backends.onnx import translate_function

    bodies = {}
    for function in level2.ops:
        name = function.sym_name.data  # type: ignore[attr-defined]
        if name not in _TRANSLATED:
            _TRANSLATED[name] = translate_function(function)  # type: ignore[arg-type]
        bodies[name] = _TRANSLATED[name]
    return bodies


def clear_cache() -> None:
    _TRANSLATED.clear()


def unchecked_lines(compilation: Compilation) -> list[str]:
    """One report line per check of the values a signature's standard-ONNX graph leaves out
    (backends/onnx/checks.py): what the model computes instead of raising. Not for the ort
    target, whose kernels make the checks."""
    from lossgrad_compiler.backends.onnx.checks import unchecked_line  # deferred, as below

    bodies = translated(compilation.level2)
    nodes: dict[str, int] = {}
    for site in compilation.imported.sites:
        nodes[site.signature.id] = nodes.get(site.signature.id, 0) + 1
    return [
        unchecked_line(signature.op_type, sid, nodes.get(sid, 0), rule)
        for sid, signature in compilation.imported.signatures.items()
        for rule in bodies[sid].unchecked
    ]


def onnx_model(compilation: Compilation, mode: str) -> Artifact:
    """The compiled model, in `mode`, as the onnx and ort targets write it."""
    # defers the ONNX backend (and xDSL): listing the targets needs neither
    from lossgrad_compiler.backends.onnx import apply_functions, apply_inline

    bodies = translated(compilation.level2)
    imported = compilation.imported
    if mode == "functions":
        apply_functions(imported, bodies)
    else:
        progress = compilation.progress
        total = len(imported.sites)
        report = (lambda done: progress("rewrite", done, total)) if progress else None
        apply_inline(imported, bodies, progress=report)
        if progress is not None:
            progress("rewrite", total, total)
    return Artifact(Produces.MODEL, model=imported.model, detail=f", mode {mode}")


class Onnx(Target):
    name = "onnx"
    produces = Produces.MODEL
    description = "standard ONNX"
    options = (MODE,)

    def compile(self, compilation: Compilation) -> Artifact:
        artifact = onnx_model(compilation, compilation.options["mode"])
        artifact.lines.extend(unchecked_lines(compilation))
        return artifact

    def clear_cache(self) -> None:
        clear_cache()
