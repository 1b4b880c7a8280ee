"""lossgrad-compile: compile the ai.lossgrad nodes of an ONNX model.

    lossgrad-compile IN.onnx -o OUT [--target NAME] [the target's options]
    lossgrad-compile IN.onnx -o OUT.onnx --fuse-only

The targets, their options (flags, choices, defaults) and the help text come from the target
registry (lossgrad_compiler.targets: the entry-point group `lossgrad_compiler.targets`), so a
target another package registers is reached like the built-in ones (docs/cli.md). What `-o`
means follows what the target produces: a model or a module file, or a directory.

--fuse first replaces the standard-ONNX subgraphs that compute one of the three gradients
(as exporters write them) by ai.lossgrad nodes (lossgrad_compiler.fuse), then compiles;
--fuse-only (--target onnx) writes the fused model and compiles nothing. --fuse-reassociate
also fuses the forms that group operations otherwise than the operators (docs/fusion.md).

Errors are one line on stderr ("lossgrad-compile: error: ...", naming the node, the rule and
the aclnn code) with exit status 1; usage errors (an option the target does not use) exit
with 2. The input file and its external data are only read.

`-o` (see output_files.py): a regular file is replaced atomically; a symbolic link is
followed; an existing directory or a path ending in '/' receives DIR/<input file name>, as
with `cp`; a FIFO or character device receives the bytes (where the target allows it); a
model with external data gets it beside the output as <output name>.data (model_files.py)."""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import onnx

from lossgrad_compiler import __version__, spec
from lossgrad_compiler.model_files import data_destination, external_files, write_model
from lossgrad_compiler.onnx.tensors import external_tensors
from lossgrad_compiler.output_files import (
    OutputError,
    OutputFile,
    destination,
    file_kind,
    write_bytes,
)
from lossgrad_compiler.targets import (
    ENTRY_POINT_GROUP,
    Option,
    Produces,
    Registered,
    Target,
    get_target,
    registered,
)

PROG = "lossgrad-compile"
DEFAULT_TARGET = "onnx"
PROGRESS_MIN_NODES = 1000  # below this a compile takes well under a second: no bar


@dataclass(frozen=True)
class CliOption:
    """One target option flag, shared by every target that declares it (by flag)."""

    flag: str
    dest: str
    declared: dict[str, Option]  # target name -> its declaration

    @property
    def first(self) -> Option:
        return next(iter(self.declared.values()))

    def help(self) -> str:
        names = list(self.declared)
        defaults = {str(o.default) for o in self.declared.values() if o.default not in (None, "")}
        default = f"; default: {defaults.pop()}" if len(defaults) == 1 else ""
        return f"{self.first.help} (--target {_listed(names)}{default})"


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def target_options(entries: Sequence[Registered]) -> dict[str, CliOption]:
    """Every option flag of every registered target, by flag."""
    found: dict[str, CliOption] = {}
    for entry in entries:
        if entry.target is None:
            continue
        for option in entry.target.options:
            flag = option.cli_flag
            dest = "option_" + flag.lstrip("-").replace("-", "_")
            found.setdefault(flag, CliOption(flag, dest, {})).declared[entry.name] = option
    return found


def build_parser(entries: Sequence[Registered] | None = None) -> argparse.ArgumentParser:
    """The parser; its --target choices, the target options and the help come from the
    target registry (lossgrad_compiler.targets)."""
    entries = registered() if entries is None else entries
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Compile the ai.lossgrad nodes ("
        + ", ".join(spec.OPERATORS)
        + ") of an ONNX model.",
        epilog="targets: "
        + "; ".join(f"{e.name}: {_description(e)}" for e in entries)
        + ". Third-party packages add targets through the entry-point group "
        f"'{ENTRY_POINT_GROUP}'.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("input", type=Path, help="the ONNX model to compile (only read)")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        help="where the target writes: a model or module file (an existing directory or a "
        "path ending in '/' receives DIR/<input file name>; a FIFO or device receives the "
        "bytes where the target allows it), or a directory for targets that write one",
    )
    parser.add_argument(
        "--target",
        choices=list(dict.fromkeys(e.name for e in entries)),
        default=DEFAULT_TARGET,
        help=f"what to compile for (default: {DEFAULT_TARGET}); see 'targets' below",
    )
    for option in target_options(entries).values():
        first = option.first
        choices = [c for o in option.declared.values() for c in (o.choices or ())]
        parser.add_argument(
            option.flag,
            dest=option.dest,
            type=first.type,
            choices=list(dict.fromkeys(choices)) or None,
            metavar=first.metavar or (None if first.choices else first.name.upper()),
            help=option.help(),
        )
    parser.add_argument(
        "--fuse",
        action="store_true",
        help="first fuse decomposed loss gradients (as exporters write them) into ai.lossgrad "
        "nodes, then compile; the report says what was fused and what was left, and why",
    )
    parser.add_argument(
        "--fuse-only",
        action="store_true",
        help="fuse and write the fused model, compile nothing (--target onnx only)",
    )
    parser.add_argument(
        "--fuse-reassociate",
        action="store_true",
        help="with --fuse or --fuse-only: also fuse the forms that group operations otherwise "
        "than the operators (results may then differ near overflow and for infinite "
        "inputs; off by default)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print no report")
    return parser


def targets_table_markdown(entries: Sequence[Registered] | None = None) -> str:
    """The table of docs/cli.md: every registered target, what it writes and its options
    (a test compares the page with this text)."""
    entries = registered() if entries is None else entries
    lines = [
        "| target | writes | options (default; values) | needs the extra |",
        "| --- | --- | --- | --- |",
    ]
    for entry in entries:
        if entry.target is None:
            lines.append(f"| {entry.name} | unavailable: {entry.problem} | | |")
            continue
        target = entry.target
        options = "; ".join(_option_text(o) for o in target.options) or "none"
        extra = f"`{target.extra}`" if target.extra else "—"
        lines.append(
            f"| {entry.name} | a {target.produces.value}: {target.description} | {options} "
            f"| {extra} |"
        )
    return "\n".join(lines)


def _option_text(option: Option) -> str:
    default = "none" if option.default is None else str(option.default)
    values = f"; {', '.join(map(str, option.choices))}" if option.choices else ""
    return f"`{option.cli_flag}` ({default}{values})"


def _description(entry: Registered) -> str:
    if entry.target is None:
        return f"unavailable ({entry.problem})"
    extra = f" (needs the extra '{entry.target.extra}')" if entry.target.extra else ""
    return f"{entry.target.description}, a {entry.target.produces.value}{extra}"


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; options that do not apply to the target are usage errors (exit 2).
    `args.options` holds the target options given, by the target's option names."""
    entries = registered()
    parser = build_parser(entries)
    args = parser.parse_args(argv)
    if not args.output:
        parser.error("-o needs a path")
    args.options = {}
    for option in target_options(entries).values():
        value = getattr(args, option.dest)
        if value is None:
            continue
        declared = option.declared.get(args.target)
        if declared is None:
            parser.error(
                f"{option.flag} applies to --target {_listed(list(option.declared))}, "
                f"not to {args.target}"
            )
        if declared.choices is not None and value not in declared.choices:
            taken = " or ".join(f"{option.flag} {c}" for c in declared.choices)
            parser.error(f"--target {args.target} takes {taken}; drop {option.flag} {value}")
        args.options[declared.name] = value
    args.mode = args.options.get("mode")
    if args.fuse_only and args.target != "onnx":
        parser.error(
            f"--fuse-only writes an ONNX model; it does not apply to --target {args.target}"
        )
    if args.fuse_only and args.mode is not None:
        parser.error("--fuse-only compiles nothing; drop --mode")
    if args.fuse_reassociate and not (args.fuse or args.fuse_only):
        parser.error("--fuse-reassociate applies to --fuse and --fuse-only")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        lines = run(args)
    except Exception as err:  # every failure is one line for the user, never a traceback
        print(f"{PROG}: error: {_one_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    if not args.quiet:
        for line in lines:
            print(line)
    return 0


def run(args: argparse.Namespace) -> list[str]:
    """Do the work; the report's lines. Raises on any failure."""
    target = get_target(args.target)
    # defers xDSL and the compiler: `--help` and usage errors answer without them
    from lossgrad_compiler.driver import compile_model
    from lossgrad_compiler.pipeline import load_model

    if target.produces is Produces.DIRECTORY:
        out_dir = project_directory(args.output, args.target)
        source, lines = _fused(load_model(args.input), args)
        result = _compile(compile_model, source, args)
        result.artifact.write_directory(out_dir)
        return [
            *lines,
            result.report.summary(),
            *result.artifact.lines,
            f"wrote {result.artifact.contents} to {out_dir}",
        ]
    if target.produces is Produces.MODULE:
        path = Path(args.output)
        if args.output.endswith(("/", os.sep)) or path.is_dir():
            path = path / (args.input.stem + target.suffix)
        where = destination(path, streamable=target.streamable, refusal=target.stream_refusal)
        _refuse_overwriting(where.path, {args.input})
        source, lines = _fused(load_model(args.input), args)
        result = _compile(compile_model, source, args)
        data = result.artifact.data or b""
        write_bytes(where, data, make_parents=True)
        return [
            *lines,
            result.report.summary(),
            f"wrote {where.path} ({len(data)} bytes)",
            *result.artifact.lines,
        ]
    return _run_model_target(args, target, compile_model, load_model)


def _compile(compile_model: Callable[..., Any], source: onnx.ModelProto, args: argparse.Namespace):
    bar = ProgressBar(sys.stderr) if sys.stderr.isatty() else None
    try:
        return compile_model(source, target=args.target, progress=bar, **args.options)
    finally:
        if bar is not None:
            bar.close()


def _run_model_target(
    args: argparse.Namespace,
    target: Target,
    compile_model: Callable[..., Any],
    load_model: Callable[..., onnx.ModelProto],
) -> list[str]:
    """A target that writes an ONNX model (and maybe files beside it)."""
    where = destination(
        model_output_path(args.output, args.input),
        streamable=target.streamable,
        refusal=target.stream_refusal,
    )
    source = load_model(args.input, external_data=False)  # written beside the output
    protected = {args.input, *external_files(source, args.input.parent)}
    _refuse_overwriting(where.path, protected)
    if not where.stream and external_tensors(source):
        _refuse_overwriting(data_destination(where).path, protected)
    source, lines = _fused(source, args)
    if args.fuse_only:
        data = write_model(source, where, args.input.parent, make_parents=True)
        lines.append(f"wrote {where.path}")
        if data is not None:
            lines.append(f"wrote its external data to {data.path}")
        return lines
    result = _compile(compile_model, source, args)
    artifact = result.artifact
    copies = {role: where.path.parent / path.name for role, path in artifact.companions.items()}
    for role, path in artifact.companions.items():
        if where.path.name == path.name or _same_file(where.path, path):
            raise ValueError(
                f"the output '{where.path}' is the {role}'s own file name (it is copied "
                "beside the model); choose another name for the model"
            )
        _refuse_overwriting(copies[role], protected)
    data = write_model(artifact.model, where, args.input.parent, make_parents=True)
    lines += [result.report.summary(), f"wrote {where.path}"]
    if data is not None:
        lines.append(f"wrote its external data to {data.path}")
    for role, path in artifact.companions.items():
        if not _same_file(path, copies[role]):
            copy_file(path, copies[role])
        note = f" ({artifact.notes[role]})" if role in artifact.notes else ""
        lines.append(f"copied the {role}{note} to {copies[role]}")
    if artifact.hint is not None:
        lines += artifact.hint(copies)
    return [*lines, *artifact.lines]


def _fused(model: onnx.ModelProto, args: argparse.Namespace) -> tuple[onnx.ModelProto, list[str]]:
    """The model after --fuse / --fuse-only, and the fusion report's lines."""
    if not (args.fuse or args.fuse_only):
        return model, []
    from lossgrad_compiler.fusion import fuse  # deferred like the compiler: only --fuse needs it

    fused, report = fuse(model, reassociate=args.fuse_reassociate)
    return fused, report.lines()


def model_output_path(output: str, source: Path) -> Path:
    """`-o` for a single-file target: an existing directory, or a path ending in a slash,
    receives the model under the input's file name (as `cp` does)."""
    path = Path(output)
    if output.endswith(("/", os.sep)) or path.is_dir():
        return path / source.name
    return path


def project_directory(output: str, target: str) -> Path:
    """`-o` for a target that writes a directory: a directory (a link to one is followed), or
    a new path."""
    path = Path(output)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            raise OutputError(
                f"'{path}' is a dangling symbolic link; --target {target} writes a project "
                "directory"
            ) from None
        return path
    except OSError as err:
        raise OutputError(f"cannot write '{path}': {err.strerror or err}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise OutputError(
            f"'{path}' is a {file_kind(info.st_mode)}; --target {target} writes a project directory"
        )
    return path


def _refuse_overwriting(path: Path, protected: set[Path]) -> None:
    for kept in protected:
        if _same_file(kept, path):
            raise ValueError(f"the output '{path}' would overwrite the input '{kept}'")


def copy_file(source: Path, target: Path) -> None:
    """Copy atomically: a process that has the old copy loaded keeps a whole file."""
    where = destination(target, streamable=False, refusal="the kernel library needs a file")
    with source.open("rb") as data, OutputFile(where, make_parents=True) as output:
        shutil.copyfileobj(data, output.file)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__


class ProgressBar:
    """A one-line progress bar on a terminal, shown only for compiles of many nodes."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self.shown = False
        self._last = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        if total < PROGRESS_MIN_NODES:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        fraction = min(1.0, done / total)
        filled = int(fraction * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{phase:>7} [{bar}] {min(done, total)}/{total} nodes")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


if __name__ == "__main__":
    sys.exit(main())
