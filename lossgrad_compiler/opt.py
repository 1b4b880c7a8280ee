"""`lossgrad-opt`: xdsl-opt with the project's dialects, passes and targets.

Everything upstream xdsl-opt offers (`-p canonicalize,cse`, `--split-input-file`,
`--verify-diagnostics`, `-t mlir`, ...) works unchanged. The project's constructs come from
the one table in lossgrad_compiler/universe.py. When the package is installed, xdsl-opt's
own `xdsl.universe` discovery has already registered them; registering is then skipped
(a second dialect registration would raise AlreadyRegisteredConstructException).

Differences from xdsl-opt, for a command-line user:

* a user error (unreadable or non-UTF-8 input, a parse or verifier error, a spec violation
  with its aclnn code, an unknown pass, IR nested too deeply) is one line on stderr,
  `lossgrad-opt: error: FILE:LINE:COL: MESSAGE`, with exit status 1; `--debug` shows the
  Python traceback instead;
* the input is read completely before the output is opened, and `-o FILE` is written
  atomically (lossgrad_compiler/output_files.py), so `-o` may name the input; `-o -` is
  standard output.

    lossgrad-opt model.mlir -p lower-lossgrad,canonicalize,cse
    python -m lossgrad_compiler.opt model.mlir -p lower-lossgrad
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NoReturn, cast

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.utils.lexer import Input, Span
from xdsl.xdsl_opt_main import xDSLOptMain

from lossgrad_compiler import __version__
from lossgrad_compiler.dialects import EAGER_DIALECTS
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.output_files import OutputError, OutputFile, destination
from lossgrad_compiler.universe import DIALECTS, OPT_OUTPUTS, PASSES, factories

PROG = "lossgrad-opt"


class OptError(Exception):
    """A user error, reported as one line: `str()` is `[LOCATION: ]MESSAGE`."""


class LocatingParser(Parser):
    """xDSL's parser, remembering where each operation starts (for error messages)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.op_starts: dict[Operation, int] = {}

    def parse_operation(self) -> Operation:
        start = self.pos
        op = super().parse_operation()
        self.op_starts[op] = start
        return op


class LossgradOptMain(xDSLOptMain):
    """xDSLOptMain plus the lossgrad_compiler registration table, one-line user errors and
    safe output files."""

    version_format = f"lossgrad-opt {__version__} (xdsl {{xdsl_version}})"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._parsed: list[tuple[dict[Operation, int], Input, int]] = []
        self._chunk_offset = 0
        self._module: ModuleOp | None = None
        self._output: OutputFile | None = None
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------------ registration

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        registered = set(self.ctx.registered_dialect_names)
        for name, factory in factories(DIALECTS).items():
            if name not in registered:
                self.ctx.register_dialect(name, factory)
        for name in EAGER_DIALECTS:
            self.ctx.load_registered_dialect(name)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in factories(PASSES).items():
            self.available_passes.setdefault(name, factory)

    def register_all_targets(self) -> None:
        """`-t ascendc` and any later output: registered from universe.OPT_OUTPUTS."""
        super().register_all_targets()
        for name, factory in factories(OPT_OUTPUTS).items():
            self.available_targets.setdefault(name, factory)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--debug",
            default=False,
            action="store_true",
            help="show the Python traceback of an error instead of its one-line message",
        )

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["mlir"] = self._parse_mlir

    # ------------------------------------------------------------------ the steps

    def setup_pipeline(self) -> None:
        try:
            super().setup_pipeline()
        except ArgSpecParseError as err:
            self._fail(f"pass pipeline: {_spec_error(err)}", err)
        except (ValueError, LossGradError) as err:
            self._fail(f"pass pipeline: {err}", err)

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        """The whole input, read before the output is opened (`-o` may name the input)."""
        try:
            stream, extension = super().get_input_stream()
            with stream:
                data = stream.read()
        except OSError as err:
            self._fail(f"{self.get_input_name()}: cannot read: {err.strerror or err}", err)
        return io.BytesIO(data), extension

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        try:
            return super().prepare_input()
        except ValueError as err:  # the one error upstream raises here: the file extension
            self._fail(f"{self.get_input_name()}: {err} (choose a frontend with -f)", err)

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        self._chunk_offset = start_offset
        return super().parse_chunk(chunk, file_extension, start_offset)

    def prepare_output(self) -> IO[str]:
        name = self.args.output_file
        if name is None or name == "-":
            return sys.stdout
        try:
            where = destination(Path(name), streamable=True)
            self._output = OutputFile(where, text=True)
        except OutputError as err:
            self._fail(str(err), err)
        return cast(IO[str], _DeferredClose(self._output.file))

    def apply_passes(self, prog: ModuleOp) -> None:
        self._module = prog
        super().apply_passes(prog)

    def run(self) -> None:
        """Upstream's run; its user errors become one OptError, and the output file is put
        in place only when everything succeeded."""
        try:
            super().run()
        except ParseError as err:  # upstream has set the chunk's line offset
            self._fail(f"{err.span.get_location()}: {err.msg}", err)
        except (DiagnosticException, LossGradError) as err:
            self._fail(f"{self._location_of(err)}{_first_line(err)}", err)
        except RecursionError as err:
            self._fail(f"{self.get_input_name()}: the IR is nested too deeply", err)
        except BaseException:
            if self._output is not None:
                self._output.discard()
            raise
        if self._output is not None:
            try:
                self._output.commit()
            except OutputError as err:
                self._fail(str(err), err)

    # ------------------------------------------------------------------ helpers

    def _parse_mlir(self, stream: IO[bytes]) -> ModuleOp:
        """The MLIR frontend, with positions for non-UTF-8 input and deep nesting."""
        data = stream.read()
        name = self.get_input_name()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            span = Span(err.start, err.end, Input(data, name))
            byte = data[err.start]
            raise ParseError(span, f"not UTF-8 text (byte 0x{byte:02x})") from err
        parser = LocatingParser(self.ctx, text, name)
        try:
            module = parser.parse_module(not self.args.no_implicit_module)
        except RecursionError as err:
            position = parser.pos
            span = Span(position, position, parser.lexer.input)
            raise ParseError(span, "operations are nested too deeply to parse") from err
        self._parsed.append((parser.op_starts, parser.lexer.input, self._chunk_offset))
        return module

    def _location_of(self, err: BaseException) -> str:
        """`FILE:LINE:COL: ` of the operation that fails to verify with this error, or
        `FILE: ` when no parsed operation does (the error then came from a pass)."""
        if self._module is not None:
            message = str(err)
            for op in self._module.walk():
                try:
                    op.verify(verify_nested_ops=False)
                except Exception as failure:  # any verifier failure can be the one reported
                    span = self._source_span(op)
                    if str(failure) == message and span is not None:
                        return f"{_op_name_location(span)}: "
        return f"{self.get_input_name()}: "

    def _source_span(self, op: Operation) -> Span | None:
        """Where the parser found `op` (None for an operation a pass created)."""
        for starts, source, line_offset in self._parsed:
            if op in starts:
                return Span(starts[op], starts[op], source, line_offset)
        return None

    def _fail(self, message: str, cause: BaseException) -> NoReturn:
        """Stop with `message`; with --debug, with the original exception and traceback."""
        if self._output is not None:
            self._output.discard()
        if getattr(getattr(self, "args", None), "debug", False):
            raise cause
        raise OptError(message) from cause


class _DeferredClose:
    """The output file as upstream's run() sees it: its close() (run's `finally`) leaves the
    file to LossgradOptMain.run, which commits or discards it."""

    def __init__(self, file: IO[str]) -> None:
        self._file = file

    def write(self, text: str) -> int:
        return self._file.write(text)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        """Nothing: LossgradOptMain.run commits or discards the file."""


_RESULTS = re.compile(r"(?:%[^\s,=:]+(?::\d+)?\s*,\s*)*%[^\s,=:]+(?::\d+)?\s*=\s*")


def _op_name_location(span: Span) -> str:
    """The location of an operation's name (after its results), as MLIR reports it."""
    content = span.input.content
    assert isinstance(content, str)
    results = _RESULTS.match(content, span.start)
    start = results.end() if results else span.start
    return str(dataclasses.replace(span, start=start, end=start).get_location())


def _first_line(err: BaseException) -> str:
    """An exception's message without the IR dump xDSL attaches to some."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def _spec_error(err: ArgSpecParseError) -> str:
    """`COLUMN N: MESSAGE` from xDSL's multi-line pass-pipeline error."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    where = next((m for line in lines if (m := re.fullmatch(r"pass-pipeline:1:(\d+)", line))), None)
    message = lines[-1] if lines else "invalid pass pipeline"
    return f"column {where.group(1)}: {message}" if where else message


def main(args: Sequence[str] | None = None) -> int:
    """Entry point of the `lossgrad-opt` console script; the exit status.

    The cyclic GC is switched off for this short-lived process: IR is one big graph of
    cycles that stays alive until exit, and collecting it repeatedly made large modules
    superlinear."""
    gc.disable()
    try:
        LossgradOptMain(description="lossgrad_compiler modular optimizer driver", args=args).run()
    except OptError as err:
        print(f"{PROG}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
