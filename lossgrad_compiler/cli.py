"""lossgrad-compile: compile the ai.lossgrad nodes of an ONNX model.

    lossgrad-compile IN.onnx -o OUT.onnx [--target onnx|ort] [--mode functions|inline]
    lossgrad-compile IN.onnx -o DIR --target ascendc [--soc ascend910b]
    lossgrad-compile IN.onnx -o DIR --target ascendnpu-ir [--soc ascend910b]
    lossgrad-compile IN.onnx -o OUT.vmfb --target iree [--iree-backend llvm-cpu|cuda|rocm|vulkan]
    lossgrad-compile IN.onnx -o OUT.onnx --fuse-only

--fuse first replaces the standard-ONNX subgraphs that compute one of the three gradients
(as exporters write them) by ai.lossgrad nodes (lossgrad_compiler.fuse), then compiles;
--fuse-only (--target onnx) writes the fused model and compiles nothing. --fuse-reassociate
also fuses the forms that group operations otherwise than the operators (docs/fusion.md).

Errors are one line on stderr ("lossgrad-compile: error: ...", naming the node, the rule and
the aclnn code) with exit status 1; usage errors (an option the target does not use) exit
with 2. The input file and its external data are only read.

`-o` (see output_files.py): a regular file is replaced atomically; a symbolic link is
followed; an existing directory or a path ending in '/' receives DIR/<input file name>, as
with `cp`; a FIFO or character device receives the model's bytes (--target onnx only); a
model with external data gets it beside the output as <output name>.data (model_files.py)."""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import onnx

from lossgrad_compiler.model_files import data_destination, external_files, write_model
from lossgrad_compiler.onnx.tensors import external_tensors
from lossgrad_compiler.output_files import (
    OutputError,
    OutputFile,
    destination,
    file_kind,
    write_bytes,
)

PROG = "lossgrad-compile"
DEFAULT_SOC = "ascend910b"
PROGRESS_MIN_NODES = 1000  # below this a compile takes well under a second: no bar
ASCEND_TARGETS = ("ascendc", "ascendnpu-ir")  # they write directories and take --soc


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
        "-o",
        "--output",
        required=True,
        help="output model; an existing directory or a path ending in '/' receives "
        "DIR/<input file name>; a FIFO or device receives the model's bytes (--target onnx); "
        "a project directory for --target ascendc",
    )
    parser.add_argument(
        "--target",
        choices=("onnx", "ort", "ascendc", "iree", "ascendnpu-ir"),
        default="onnx",
        help="onnx: standard ONNX; ort: the functions model plus the native kernel library "
        "beside it; ascendc: a CANN custom-operator project; iree: the whole model as one "
        "IREE module (.vmfb); ascendnpu-ir: per signature, the HFusion form, its HIVM IR "
        "from AscendNPU IR's bishengir-opt and the bishengir-compile command (default: onnx)",
    )
    parser.add_argument(
        "--mode",
        choices=("functions", "inline"),
        help="functions: keep the nodes, add one model-local function per signature; "
        "inline: replace each node by standard nodes (default: functions; onnx and ort only)",
    )
    parser.add_argument(
        "--soc", help=f"Ascend SoC for --target ascendc and ascendnpu-ir (default: {DEFAULT_SOC})"
    )
    parser.add_argument(
        "--iree-backend",
        choices=("llvm-cpu", "cuda", "rocm", "hip", "vulkan"),
        help="what the IREE module runs on (default: llvm-cpu; hip is rocm)",
    )
    parser.add_argument(
        "--iree-arch",
        help="the CPU for llvm-cpu (default: host, this machine's; e.g. x86-64-v3 for modules "
        "to ship) or the GPU architecture (defaults: sm_80, gfx942, rdna3)",
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
        "than the operators (results may differ near overflow and for infinite inputs; "
        "docs/fusion.md)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print no report")
    return parser


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; options that do not apply to the target are usage errors (exit 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.output:
        parser.error("-o needs a path")
    if args.target in ASCEND_TARGETS and args.mode is not None:
        parser.error(f"--mode applies to --target onnx and ort, not to {args.target}")
    if args.target == "ort" and args.mode == "inline":
        parser.error("--target ort writes the functions model; drop --mode inline")
    if args.target not in ASCEND_TARGETS and args.soc is not None:
        parser.error(f"--soc applies to --target ascendc and ascendnpu-ir, not to {args.target}")
    if args.target == "iree" and args.mode is not None:
        parser.error("--mode applies to --target onnx and ort, not to iree")
    for option in ("iree_backend", "iree_arch"):
        if args.target != "iree" and getattr(args, option) is not None:
            flag = "--" + option.replace("_", "-")
            parser.error(f"{flag} applies to --target iree only, not to {args.target}")
    if args.fuse_only and args.target != "onnx":
        parser.error(
            f"--fuse-only writes an ONNX model; it does not apply to --target {args.target}"
        )
    if args.fuse_only and args.mode is not None:
        parser.error("--fuse-only compiles nothing; drop --mode")
    if args.fuse_reassociate and not (args.fuse or args.fuse_only):
        parser.error("--fuse-reassociate applies to --fuse and --fuse-only")
    args.mode = args.mode or "functions"
    args.soc = args.soc or DEFAULT_SOC
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
    if args.target == "ascendc":
        return _compile_ascendc(args, project_directory(args.output, args.target))
    if args.target == "ascendnpu-ir":
        return _compile_ascendnpu_ir(args, project_directory(args.output, args.target))
    if args.target == "iree":
        return _compile_iree(args)
    # defers xDSL and the compiler: `--help` and usage errors answer without them
    from lossgrad_compiler.driver import compile_model, load_model

    if args.target == "ort":
        library, prepare = _ort_runtime()
    where = destination(
        model_output_path(args.output, args.input),
        streamable=args.target == "onnx",
        refusal="--target ort also writes the kernel library beside the model; give a file path",
    )
    source = load_model(args.input, external_data=False)  # written beside the output
    protected = {args.input, *external_files(source, args.input.parent)}
    _refuse_overwriting(where.path, protected)
    if not where.stream and external_tensors(source):
        _refuse_overwriting(data_destination(where).path, protected)
    if args.target == "ort":
        copied = where.path.parent / library.name
        if where.path.name == library.name or _same_file(where.path, library):
            raise ValueError(
                f"the output '{where.path}' is the kernel library's own file name "
                "(it is copied beside the model); choose another name for the model"
            )
        _refuse_overwriting(copied, protected)
    source, lines = _fused(source, args)
    if args.fuse_only:
        data = write_model(source, where, args.input.parent, make_parents=True)
        lines.append(f"wrote {where.path}")
        if data is not None:
            lines.append(f"wrote its external data to {data.path}")
        return lines
    bar = ProgressBar(sys.stderr) if sys.stderr.isatty() else None
    try:
        result = compile_model(source, target=args.target, mode=args.mode, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    model = prepare(result.model) if args.target == "ort" else result.model
    data = write_model(model, where, args.input.parent, make_parents=True)
    lines += [result.report.summary(), f"wrote {where.path}"]
    if data is not None:
        lines.append(f"wrote its external data to {data.path}")
    if args.target == "ort":
        if not _same_file(library, copied):
            copy_file(library, copied)
        lines += [
            f"copied the kernel library to {copied}",
            "load it with: so = onnxruntime.SessionOptions(); "
            f"so.register_custom_ops_library('{copied}')",
        ]
    return lines


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


def project_directory(output: str, target: str = "ascendc") -> Path:
    """`-o` for --target ascendc and ascendnpu-ir: a directory (a link to one is followed), or
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


def _ort_runtime() -> tuple[Path, Callable[[onnx.ModelProto], onnx.ModelProto]]:
    """The built kernel library and the runtime's model preparation (which checks every node
    and gives it its function, the fallback where the library is not registered)."""
    try:  # defers onnxruntime and the kernel build, which only `--target ort` needs
        from lossgrad_compiler.runtime.ort import library_path, prepare_model
    except ImportError as err:
        raise Unavailable(f"target 'ort' is unavailable in this installation ({err})") from None
    return Path(library_path()), prepare_model


def _compile_ascendc(args: argparse.Namespace, out_dir: Path) -> list[str]:
    try:  # defers the Ascend C backend, which only `--target ascendc` needs
        from lossgrad_compiler.backends.ascendc import emit_project
    except ImportError as err:
        raise Unavailable(f"target 'ascendc' is unavailable in this installation ({err})") from None
    # defers xDSL and the compiler: `--help` and usage errors answer without them
    from lossgrad_compiler.driver import load_model, lower_model

    soc = args.soc
    source, lines = _fused(load_model(args.input), args)
    start = time.perf_counter()
    imported, module = lower_model(source)
    emit_project(module, out_dir, soc=soc)
    seconds = time.perf_counter() - start
    per_op = ", ".join(f"{k} {v}" for k, v in imported.nodes_per_operator().items())
    return [
        *lines,
        f"{len(imported.sites)} ai.lossgrad nodes ({per_op}); {len(imported.signatures)} "
        f"distinct signatures; target ascendc ({soc}); {seconds:.3f} s",
        f"wrote the project to {out_dir}",
    ]


def _compile_ascendnpu_ir(args: argparse.Namespace, out_dir: Path) -> list[str]:
    try:  # defers the AscendNPU IR backend, which only `--target ascendnpu-ir` needs
        from lossgrad_compiler.backends.ascendnpu_ir import AscendNpuIrTarget, tool, write_outputs
    except ImportError as err:
        raise Unavailable(
            f"target 'ascendnpu-ir' is unavailable in this installation ({err})"
        ) from None
    # defers xDSL and the compiler: `--help` and usage errors answer without them
    from lossgrad_compiler.driver import import_checked, load_model

    target = AscendNpuIrTarget(args.soc)
    tool("bishengir-opt")  # before any work: one line naming the extra if it is missing
    source, lines = _fused(load_model(args.input), args)
    start = time.perf_counter()
    imported = import_checked(source)
    summaries = write_outputs(imported.signatures.values(), out_dir, target)
    seconds = time.perf_counter() - start
    per_op = ", ".join(f"{k} {v}" for k, v in imported.nodes_per_operator().items())
    kernels = sum(len(s["kernels"]) for s in summaries)
    vector_ops = sum(k["vector_op_count"] for s in summaries for k in s["kernels"])
    return [
        *lines,
        f"{len(imported.sites)} ai.lossgrad nodes ({per_op}); {len(imported.signatures)} "
        f"distinct signatures; target ascendnpu-ir ({args.soc}, {target.device}, block dim "
        f"{target.block_dim}); {seconds:.3f} s",
        f"bishengir-opt outlined {kernels} device kernels with {vector_ops} HIVM vector ops",
        f"wrote the HFusion form, HIVM IR, bishengir-compile command and summary of each "
        f"signature to {out_dir}",
    ]


def _compile_iree(args: argparse.Namespace) -> list[str]:
    try:  # defers IREE's compiler, which only `--target iree` needs
        from lossgrad_compiler.backends.iree import IreeTarget, compile_whole_model
    except ImportError as err:
        raise Unavailable(f"target 'iree' is unavailable in this installation ({err})") from None
    # defers xDSL and the compiler: `--help` and usage errors answer without them
    from lossgrad_compiler.driver import load_model

    backend = args.iree_backend or "llvm-cpu"
    if backend == "llvm-cpu":
        target = IreeTarget(backend, cpu=args.iree_arch or "host")
    else:
        target = IreeTarget(backend, gpu=args.iree_arch)
    path = Path(args.output)
    if args.output.endswith(("/", os.sep)) or path.is_dir():
        path = path / (args.input.stem + ".vmfb")
    where = destination(path, streamable=True)
    _refuse_overwriting(where.path, {args.input})
    source, lines = _fused(load_model(args.input), args)
    start = time.perf_counter()
    vmfb, compiled = compile_whole_model(source, target)
    seconds = time.perf_counter() - start
    write_bytes(where, vmfb, make_parents=True)
    imported = compiled.imported
    per_op = ", ".join(f"{k} {v}" for k, v in imported.nodes_per_operator().items())
    return [
        *lines,
        f"{len(imported.sites)} ai.lossgrad nodes ({per_op}); {len(imported.signatures)} "
        f"distinct signatures; target iree ({target.backend}); {seconds:.3f} s",
        f"wrote {where.path} ({len(vmfb)} bytes)",
        f"function: {compiled.interface.text()}",
    ]


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
