"""lossgrad-compile: compile the ai.lossgrad nodes of an ONNX model.

    lossgrad-compile IN.onnx -o OUT.onnx [--target onnx|ort] [--mode functions|inline]
    lossgrad-compile IN.onnx -o DIR --target ascendc [--soc ascend910b]

Errors are one line on stderr ("lossgrad-compile: error: ...", naming the node, the rule and
the aclnn code) with exit status 1; usage errors exit with 2. The input file is only read."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import onnx

PROG = "lossgrad-compile"
PROGRESS_MIN_NODES = 1000  # below this a compile takes well under a second: no bar


class Unavailable(Exception):
    """A target whose implementation is not part of this installation."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Compile the ai.lossgrad nodes (KlDivBackward, KlDivTargetBackward, "
        "SmoothL1LossBackward) of an ONNX model.",
    )
    parser.add_argument("input", type=Path, help="the ONNX model to compile (only read)")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="output model (a directory for ascendc)"
    )
    parser.add_argument(
        "--target",
        choices=("onnx", "ort", "ascendc"),
        default="onnx",
        help="onnx: standard ONNX; ort: the functions model plus the native kernel library "
        "beside it; ascendc: a CANN custom-operator project (default: onnx)",
    )
    parser.add_argument(
        "--mode",
        choices=("functions", "inline"),
        default="functions",
        help="functions: keep the nodes, add one model-local function per signature; "
        "inline: replace each node by standard nodes (default: functions)",
    )
    parser.add_argument("--soc", default="ascend910b", help="Ascend SoC for --target ascendc")
    parser.add_argument("-q", "--quiet", action="store_true", help="print no report")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
    if args.target == "ascendc":
        return _compile_ascendc(args.input, args.output, args.soc)
    if _same_file(args.input, args.output):
        raise ValueError(f"the output '{args.output}' would overwrite the input")
    from lossgrad_compiler.driver import compile_model

    if args.target == "ort":
        if args.mode != "functions":
            raise ValueError("--target ort writes the functions model; drop --mode inline")
        library, prepare = _ort_runtime()
    bar = ProgressBar(sys.stderr) if sys.stderr.isatty() else None
    try:
        result = compile_model(args.input, target=args.target, mode=args.mode, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    model = prepare(result.model) if args.target == "ort" else result.model
    save_model(model, args.output)
    lines = [result.report.summary(), f"wrote {args.output}"]
    if args.target == "ort":
        copied = args.output.parent / library.name
        if not _same_file(library, copied):
            shutil.copyfile(library, copied)
        lines += [
            f"copied the kernel library to {copied}",
            "load it with: so = onnxruntime.SessionOptions(); "
            f"so.register_custom_ops_library('{copied}')",
        ]
    return lines


def _ort_runtime() -> tuple[Path, Callable[[onnx.ModelProto], onnx.ModelProto]]:
    """The built kernel library and the runtime's model preparation (which checks every node
    and gives it its function, the fallback where the library is not registered)."""
    try:
        from lossgrad_compiler.runtime.ort import library_path, prepare_model
    except ImportError as err:
        raise Unavailable(f"target 'ort' is unavailable in this installation ({err})") from None
    return Path(library_path()), prepare_model


def _compile_ascendc(source: Path, out_dir: Path, soc: str) -> list[str]:
    try:
        from lossgrad_compiler.backends.ascendc import emit_project
    except ImportError as err:
        raise Unavailable(f"target 'ascendc' is unavailable in this installation ({err})") from None
    from lossgrad_compiler.driver import lower_model

    start = time.perf_counter()
    imported, module = lower_model(source)
    emit_project(module, out_dir, soc=soc)
    seconds = time.perf_counter() - start
    per_op = ", ".join(f"{k} {v}" for k, v in imported.nodes_per_operator().items())
    return [
        f"{len(imported.sites)} ai.lossgrad nodes ({per_op}); {len(imported.signatures)} "
        f"distinct signatures; target ascendc ({soc}); {seconds:.3f} s",
        f"wrote the project to {out_dir}",
    ]


def save_model(model: onnx.ModelProto, path: Path) -> None:
    """Write atomically: a failed write leaves no half-written model behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(model.SerializeToString())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


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
