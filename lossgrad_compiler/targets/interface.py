"""The Target interface: what a backend declares so that `compile_model` and
`lossgrad-compile` reach it by name.

A target declares its name, what it produces and its options (types, defaults, choices),
and implements one `compile(compilation)`: the driver has run the model through the one
pipeline (pipeline.py: loaded, checked, imported, its signatures lowered once, in the static
form, from the per-signature cache every consumer shares) and hands the result down. A target
may also offer `evaluate`, with `reference.evaluate`'s call shape. Targets register through
the entry-point group `lossgrad_compiler.targets` (registry.py), the built-in ones as any
other package would.

A target's module is imported to list its options (`--help`), so it imports its backend
only inside `compile`/`evaluate`: a target whose extra is missing stays listed and says
which extra to install (`Target.unavailable`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from onnx import ModelProto

from lossgrad_compiler.backends.build_cache import write_atomically

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from lossgrad_compiler.frontend import ImportedModel, Signature

Progress = Callable[[str, int, int], None]
"""progress(phase, done, total): phase is "import" or "rewrite"."""


class Produces(StrEnum):
    """What a target writes, which says what `-o` means for it."""

    MODEL = "model"
    """An ONNX model: -o is a file; a directory receives DIR/<input file name>."""
    MODULE = "module"
    """One binary file: -o is a file; a directory receives DIR/<input stem><suffix>."""
    DIRECTORY = "directory"
    """Files under one directory: -o is that directory."""


class TargetOptionError(ValueError):
    """An option the target does not take, or a value it does not accept."""

    def __init__(self, target: str, option: Option | str, message: str) -> None:
        self.target = target
        self.option = option
        super().__init__(message)


class TargetUnavailableError(RuntimeError):
    """A registered target whose implementation this installation lacks."""


COMMAND_FLAGS = frozenset(
    {"-h", "--help", "--version", "-o", "--output", "--target", "--fuse", "--fuse-only",
     "--fuse-reassociate", "-q", "--quiet"}
)  # fmt: skip
"""lossgrad-compile's own flags, which no target option may take (tests/targets/test_cli.py checks
them against the parser)."""


@dataclass(frozen=True)
class Option:
    """One option of a target: the keyword of `compile_model`, the command-line flag (by
    default `--` and the name with `-` for `_`), how the flag's text is parsed, the default
    and the values it may take."""

    name: str
    help: str
    default: Any = None
    type: Callable[[str], Any] = str
    choices: tuple[Any, ...] | None = None
    flag: str = ""
    metavar: str | None = None

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def check(self, target: str, value: Any) -> Any:
        """The value, or TargetOptionError naming what the target takes."""
        if self.choices is not None and value not in self.choices:
            taken = " or ".join(str(c) for c in self.choices)
            raise TargetOptionError(
                target, self, f"target '{target}' takes {self.name} {taken}, not {value!r}"
            )
        return value


@dataclass
class Compilation:
    """What the driver hands a target: the checked model (a private copy the target may
    change and return), its imported ai.lossgrad nodes, their level-2 module in the
    static form (docs/level2.md), and every option with its default filled in."""

    model: ModelProto
    imported: ImportedModel
    level2: ModuleOp
    options: dict[str, Any]
    progress: Progress | None = None

    @property
    def signatures(self) -> list[Signature]:
        return list(self.imported.signatures.values())

    def level2_of(self, signatures: Iterable[Signature]) -> ModuleOp:
        """Level 2 of further signatures (a target that imports the model its own way, as
        IREE's importer does), from the same per-signature cache."""
        # defers xDSL: a target module is imported to list its options, and needs none
        from lossgrad_compiler.pipeline import level2

        return level2(signatures)


@dataclass
class Artifact:
    """What a target made, in memory until the caller writes it.

    A MODEL target fills `model` (and `companions`: files to copy beside it, by the name
    they get there); a MODULE target `data`; a DIRECTORY target `files` (paths relative to
    the directory; `executables` among them get mode 755) and `contents` (what the files
    are, for "wrote <contents> to DIR"). `detail` is the target's part of the report's
    summary ("mode functions", "ascend910b"); `lines` follow the summary."""

    produces: Produces
    model: ModelProto | None = None
    data: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    executables: frozenset[str] = frozenset()
    contents: str = "the files"
    companions: dict[str, Path] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    """Which file a companion is, by role, for the "copied the <role> (<note>)" line."""
    detail: str = ""
    lines: list[str] = field(default_factory=list)
    hint: Callable[[dict[str, Path]], list[str]] | None = None
    """Lines to print once `companions` are copied, given where each one went."""
    extra: Any = None  # what else a target returns to Python callers (IREE: the interface)

    def write_directory(self, out_dir: Path | str) -> list[Path]:
        """Write `files` under `out_dir` (each atomically); the paths written."""
        root = Path(out_dir)
        written = []
        for relative, data in self.files.items():
            path = root / relative
            write_atomically(path, data)
            if relative in self.executables:
                path.chmod(0o755)
            written.append(path)
        root.mkdir(parents=True, exist_ok=True)
        return written


class Target:
    """A compilation target. Subclasses set the class attributes and implement `compile`;
    `evaluate(op_type, inputs, attrs=None, **options)` is optional."""

    name: ClassVar[str]
    produces: ClassVar[Produces]
    description: ClassVar[str]
    """One line for `--help`: what the target makes."""
    options: ClassVar[tuple[Option, ...]] = ()
    extra: ClassVar[str | None] = None
    """The optional dependency (pip extra of lossgrad_compiler) the backend needs."""
    suffix: ClassVar[str] = ""
    """MODULE targets: the file suffix of an output named after the input."""
    streamable: ClassVar[bool] = True
    """MODEL and MODULE targets: whether -o may be a FIFO or a character device."""
    stream_refusal: ClassVar[str] = ""
    """Why a non-streamable target refuses a FIFO."""

    def compile(self, compilation: Compilation) -> Artifact:
        raise NotImplementedError

    def clear_cache(self) -> None:
        """Forget what the target keeps per signature across compilations (if anything)."""

    def option(self, name: str) -> Option:
        for option in self.options:
            if option.name == name:
                return option
        known = ", ".join(o.name for o in self.options) or "none"
        raise TargetOptionError(
            self.name, name, f"target '{self.name}' has no option '{name}' (its options: {known})"
        )

    def resolve_options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every option of the target: the given values checked, the others defaulted."""
        for name in given:
            self.option(name)
        return {
            o.name: o.check(self.name, given[o.name]) if given.get(o.name) is not None
            else o.default
            for o in self.options
        }  # fmt: skip

    def unavailable(self, err: BaseException) -> TargetUnavailableError:
        """The one-line error for a backend that cannot be imported here."""
        hint = ""
        if self.extra:
            hint = f"; install it with: pip install 'lossgrad_compiler[{self.extra}]'"
        return TargetUnavailableError(
            f"target '{self.name}' is unavailable in this installation ({err}){hint}"
        )
