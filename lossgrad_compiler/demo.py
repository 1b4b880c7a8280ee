"""lossgrad-demo: build the example model, check it, infer its shapes and run it on every
backend of the project, comparing each output with the numpy reference run node by node.

Backends are entries of BACKENDS: a name and a `prepare(model, out) -> runner` function
(compile once, run for several batch sizes; `out` is where a backend may write what it
compiled). A runner may also offer `details() -> lines`, printed after the tables (the
Ascend C project and its tiling). A backend that cannot run on this machine says why through
`unavailable()` and is reported as skipped, in one line naming the extra to install and what
it would have shown. The rows of every backend come from the model's nodes, so a node added
to the example appears everywhere. The exit code is 1 when any output differs from the
reference by more than its tolerance, or when any step fails."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TypeProto

from lossgrad_compiler import __version__, examples, reference, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.demo_table import format_table, number
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.onnx.type_protos import shape_of

if TYPE_CHECKING:
    from lossgrad_compiler.runtime.iree import IreeSession

Feeds = Mapping[str, np.ndarray]
Runner = Callable[[Feeds], Mapping[str, np.ndarray]]

BATCH_SIZES = (1, 5, 32)
DEFAULT_OUT = Path("build") / "lossgrad-demo"

# Relative tolerance per result element type, scaled by the largest |reference| value of the
# output: a few units in the last place of the type, for backends that compute in another
# order than the reference.
RTOL: dict[str, float] = {"float64": 1e-12, "float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}

# The modules each optional extra (pyproject.toml) provides, to tell a missing extra from
# another reason a backend cannot run.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "iree": ("iree.compiler", "iree.runtime"),
    "ascend": ("ascendnpuir", "llvmlite"),
    "torch": ("torch", "onnxscript"),
}


def _available() -> str | None:
    return None


@dataclass(frozen=True)
class Backend:
    """One way to run a model; `unavailable()` returns the reason it cannot run here, or
    None. `extra` is the pip extra it needs, `shows` what its rows show (for the skip line)."""

    name: str
    what: str
    prepare: Callable[[ModelProto, Path], Runner]
    unavailable: Callable[[], str | None] = field(default=_available)
    extra: str | None = None
    shows: str = "the model's outputs checked against the reference"


@dataclass
class Tally:
    """One line of the closing summary: a backend's outputs, and how many were right."""

    name: str
    against: str = "the reference"
    checked: int = 0
    right: int = 0
    skipped: str | None = None
    failed_steps: int = 0

    @property
    def ok(self) -> bool:
        return self.failed_steps == 0 and self.right == self.checked

    def text(self) -> str:
        if self.skipped is not None:
            return self.skipped
        verdict = "ok" if self.ok else "FAILED"
        steps = f", {self.failed_steps} step(s) failed" if self.failed_steps else ""
        return (
            f"{self.checked} outputs checked against {self.against}, {self.right} right"
            f"{steps}: {verdict}"
        )


def missing_extra(extra: str | None) -> bool:
    """Whether a module of the pip extra `extra` cannot be imported here."""
    for name in EXTRA_MODULES.get(extra or "", ()):
        try:
            if importlib.util.find_spec(name) is None:
                return True
        except (ImportError, ValueError):  # a missing parent package, or a blocked module
            return True
    return False


def skip_text(reason: str, extra: str | None, shows: str) -> str:
    """The one line of a backend that cannot run: the extra to install (or the reason) and
    what the user would have seen."""
    if missing_extra(extra):
        return (
            f"skipped: needs the extra '{extra}' (pip install 'lossgrad_compiler[{extra}]'); "
            f"it would have shown {shows}"
        )
    return f"skipped: {reason}; it would have shown {shows}"


# --------------------------------------------------------------------------- backends


def _prepare_onnx_reference(model: ModelProto, out: Path) -> Runner:
    return lambda feeds: lo.run_reference(model, feeds)


def _named_outputs(model: ModelProto, values: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    return {out.name: v for out, v in zip(model.graph.output, values, strict=True)}


def _prepare_standard_onnx(mode: str, threads: int) -> Callable[[ModelProto, Path], Runner]:
    """Compile once to standard ONNX (`mode`), then run in stock onnxruntime."""

    def prepare(model: ModelProto, out: Path) -> Runner:
        # defers xDSL and onnxruntime until a backend runs (`--help` needs neither)
        from lossgrad_compiler.driver import compile_model
        from lossgrad_compiler.runtime.ort_io import make_session, run_session

        session = make_session(compile_model(model, target="onnx", mode=mode).model, threads)
        return lambda feeds: _named_outputs(model, run_session(session, feeds))

    return prepare


def _prepare_native(threads: int) -> Callable[[ModelProto, Path], Runner]:
    """The native kernel library in onnxruntime: every node, mixed element types included."""

    def prepare(model: ModelProto, out: Path) -> Runner:
        # defers onnxruntime and the kernel build until the native backend runs
        from lossgrad_compiler.evaluation import ort as native
        from lossgrad_compiler.runtime.ort_io import run_session

        session = native.session(model, intra_op_num_threads=threads, inter_op_num_threads=1)
        return lambda feeds: _named_outputs(model, run_session(session, feeds))

    return prepare


def _native_unavailable() -> str | None:
    # defers onnxruntime and the kernel build until the native backend is asked for
    from lossgrad_compiler.backends.ort.build import NativeUnavailableError
    from lossgrad_compiler.targets.ort_library import library_path

    try:
        library_path()
    except NativeUnavailableError as err:
        return str(err)
    return None


def _prepare_ascendc(model: ModelProto, out: Path) -> Runner:
    """The model's CANN projects written under `out`/ascendc, their kernels run node by node
    in the CPU emulator (demo_ascendc.py)."""
    # defers xDSL and the emulation until the Ascend C backend runs
    from lossgrad_compiler.demo_ascendc import AscendcDemo

    return AscendcDemo(model, out / "ascendc")


def _ascendc_unavailable() -> str | None:
    # defers the Ascend C backend until it is asked for
    from lossgrad_compiler.backends.ascendc.build import compiler
    from lossgrad_compiler.errors import UnsupportedByBackendError

    try:
        compiler()
    except UnsupportedByBackendError as err:
        return str(err)
    return None


def _prepare_iree(model: ModelProto, out: Path) -> Runner:
    """The whole model as one IREE module for this CPU (lossgrad-compile --target iree)."""
    iree = _iree_session(model)
    return lambda feeds: dict(zip(iree.output_names, iree.run(None, feeds), strict=True))


def _iree_session(model: ModelProto) -> IreeSession:
    # defers IREE, xDSL and the compiler until the IREE backend runs
    from lossgrad_compiler.driver import compile_model
    from lossgrad_compiler.runtime.iree import session

    vmfb = compile_model(model, target="iree").artifact.data or b""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{model.graph.name}.vmfb"
        path.write_bytes(vmfb)
        return session(path)  # maps the file, which stays readable once unlinked


def _iree_unavailable() -> str | None:
    # defers IREE until the IREE backend is asked for
    from lossgrad_compiler.backends.iree.options import IreeUnavailableError, iree_module

    try:
        iree_module("iree.compiler.extras.onnx_importer")
        iree_module("iree.runtime")
    except IreeUnavailableError as err:
        return str(err)
    return None


def _prepare_ascendnpu_ir(model: ModelProto, out: Path) -> Runner:
    """Each node's kernel as AscendNPU IR schedules it (the ascendnpu-ir target's
    `evaluate`), run on this CPU by the compiler's own CPU-runner lowering."""
    # defers the target registry's entry points until the backend runs
    from lossgrad_compiler.targets import get_target

    target = get_target("ascendnpu-ir")

    def run(feeds: Feeds) -> dict[str, np.ndarray]:
        values: dict[str, np.ndarray] = dict(feeds)
        for node in model.graph.node:
            inputs = {n: values[v] for n, v in _node_inputs(node).items()}
            attrs = lo.attributes_from_node(node)
            values[node.output[0]] = target.evaluate(node.op_type, inputs, attrs)
        return {out.name: values[out.name] for out in model.graph.output}

    return run


def _ascendnpu_ir_unavailable() -> str | None:
    # defers AscendNPU IR and llvmlite until the backend is asked for
    from lossgrad_compiler.backends.ascendnpu_ir.cpu_runner import llvmlite_binding, mlir_translate
    from lossgrad_compiler.backends.ascendnpu_ir.toolchain import (
        AscendNpuIrUnavailableError,
        tool,
    )

    try:
        tool("bishengir-opt")
        mlir_translate()
        llvmlite_binding()
    except AscendNpuIrUnavailableError as err:
        return str(err)
    return None


BACKENDS: list[Backend] = [
    Backend(
        "onnx-reference",
        "onnx ReferenceEvaluator + ai.lossgrad kernels",
        _prepare_onnx_reference,
    ),
    Backend(
        "onnx-functions",
        "lossgrad-compile --mode functions, onnxruntime, 2 threads",
        _prepare_standard_onnx("functions", threads=2),
    ),
    Backend(
        "onnx-inline",
        "lossgrad-compile --mode inline, onnxruntime, 1 thread",
        _prepare_standard_onnx("inline", threads=1),
    ),
    Backend(
        "ort-native",
        "native kernel library (every node, mixed element types included), 2 threads",
        _prepare_native(threads=2),
        _native_unavailable,
        shows="the model run by the native ONNX Runtime kernel library",
    ),
    Backend(
        "ascendc",
        "lossgrad-compile --target ascendc: each node's CANN project, its kernels run in the "
        "CPU emulator",
        _prepare_ascendc,
        _ascendc_unavailable,
        shows="each node's Ascend C project, its tiling and its kernels run in the CPU emulator",
    ),
    Backend(
        "iree",
        "lossgrad-compile --target iree: the model as one IREE module, llvm-cpu, local-task",
        _prepare_iree,
        _iree_unavailable,
        extra="iree",
        shows="the model compiled to one IREE module for this CPU and run",
    ),
    Backend(
        "ascendnpu-ir",
        "lossgrad-compile --target ascendnpu-ir: each node's kernel as AscendNPU IR schedules "
        "it, run by the compiler's CPU runner",
        _prepare_ascendnpu_ir,
        _ascendnpu_ir_unavailable,
        extra="ascend",
        shows="each node's kernel as AscendNPU IR (bishengir) schedules it, run on this CPU",
    ),
]


@dataclass(frozen=True)
class OutputCheck:
    """One output of one node, run by one backend, compared with the reference."""

    backend: str
    batch: int
    node: str
    op: str
    attributes: str
    output: str
    max_diff: float
    tolerance: float
    ok: bool
    note: str = ""


# --------------------------------------------------------------------------- the reference


def _node_inputs(node: NodeProto) -> dict[str, str]:
    """The value names of an ai.lossgrad node's inputs, by spec input name; an optional input
    with an empty name (ONNX: absent) is left out."""
    names = spec.operator(node.op_type).input_names
    return {n: v for n, v in zip(names, node.input, strict=False) if v}


def reference_outputs(model: ModelProto, feeds: Feeds) -> dict[str, np.ndarray]:
    """Every node's output from lossgrad_compiler.reference.evaluate, node by node."""
    values: dict[str, np.ndarray] = dict(feeds)
    for node in model.graph.node:
        if node.domain != spec.DOMAIN:
            raise ValueError(f"node '{node.name}' ({node.op_type}) is not an ai.lossgrad node")
        inputs = {name: values.get(v) for name, v in _node_inputs(node).items()}
        values[node.output[0]] = reference.evaluate(
            node.op_type, inputs, lo.attributes_from_node(node)
        )
    return values


def compare(got: np.ndarray | None, want: np.ndarray) -> tuple[float, float, bool, str]:
    """(max |got - want|, tolerance, within tolerance, note on a type or shape mismatch)."""
    rtol = RTOL[spec.float_type(want.dtype).name]
    want64 = want.astype(np.float64)
    finite = np.abs(want64[np.isfinite(want64)])
    tolerance = rtol * (float(finite.max()) if finite.size and finite.max() > 0 else 1.0)
    if got is None:
        return float("nan"), tolerance, False, "missing output"
    got = np.asarray(got)
    if got.shape != want.shape or got.dtype != want.dtype:
        note = f"got {_tensor_text(got.dtype, got.shape)}"
        return float("nan"), tolerance, False, note
    got64 = got.astype(np.float64)
    same_nan = np.isnan(got64) == np.isnan(want64)
    with np.errstate(invalid="ignore"):
        diff = np.where(np.isnan(want64), 0.0, np.abs(got64 - want64))
        diff = np.where(got64 == want64, 0.0, diff)  # equal infinities
    max_diff = float(diff.max()) if diff.size else 0.0
    ok = bool(same_nan.all()) and max_diff <= tolerance
    return max_diff, tolerance, ok, "" if same_nan.all() else "NaN positions differ"


# --------------------------------------------------------------------------- the steps


@dataclass
class BackendRun:
    """What one backend contributed: step rows, per-output checks, details, its tally."""

    steps: list[list[str]]
    checks: list[OutputCheck]
    details: list[str]
    tally: Tally


def run_backend(
    backend: Backend, model: ModelProto, batches: Sequence[int], out: Path
) -> BackendRun:
    """Step rows and per-output checks of one backend over the batch sizes."""
    tally = Tally(backend.name)
    try:
        reason = backend.unavailable()
    except Exception as err:  # a broken availability probe is a skip with its reason
        reason = _error_text(err)
    if reason is not None:
        outputs = len(model.graph.node) * len(batches)
        shows = f"{backend.shows}: {outputs} outputs checked against the reference"
        tally.skipped = skip_text(reason, backend.extra, shows)
        return BackendRun([["run", backend.name, tally.skipped]], [], [], tally)
    try:
        runner = backend.prepare(model, out)
    except Exception as err:  # reported as a failed step, not a traceback
        tally.failed_steps += 1
        return BackendRun(
            [["prepare", backend.name, f"FAILED: {_error_text(err)}"]],
            [_failed(backend.name, 0, f"prepare failed: {err}")],
            [],
            tally,
        )
    steps, checks = [], []
    for batch in batches:
        feeds = examples.example_feeds(batch, seed=batch)
        want = reference_outputs(model, feeds)
        try:
            got = runner(feeds)
        except Exception as err:
            steps.append([f"run N={batch}", backend.name, f"FAILED: {_error_text(err)}"])
            checks.append(_failed(backend.name, batch, f"run failed: {err}"))
            tally.failed_steps += 1
            continue
        batch_checks = [_check(backend.name, batch, node, got, want) for node in model.graph.node]
        worst = max((c.max_diff for c in batch_checks), default=0.0)
        verdict = "ok" if all(c.ok for c in batch_checks) else "FAILED"
        steps.append(
            [
                f"run N={batch}",
                f"{backend.name}: {backend.what}",
                f"{len(batch_checks)} outputs, max |diff| {number(worst)}: {verdict}",
            ]
        )
        checks.extend(batch_checks)
        tally.checked += len(batch_checks)
        tally.right += sum(c.ok for c in batch_checks)
    details = getattr(runner, "details", None)
    return BackendRun(steps, checks, details() if callable(details) else [], tally)


def _attribute_text(value: object) -> str:
    """A FLOAT attribute as the float32 the model holds, shortest (0.1, not 0.10000000149...)."""
    return str(np.float32(value)) if isinstance(value, float) else str(value)


def _check(backend: str, batch: int, node, got, want) -> OutputCheck:
    out = node.output[0]
    expected = want[out]
    max_diff, tolerance, ok, note = compare(got.get(out), expected)
    attrs = lo.attributes_from_node(node)
    return OutputCheck(
        backend=backend,
        batch=batch,
        node=node.name,
        op=node.op_type,
        attributes=" ".join(f"{k}={_attribute_text(v)}" for k, v in attrs.items()),
        output=f"{out}: {_tensor_text(expected.dtype, expected.shape)}",
        max_diff=max_diff,
        tolerance=tolerance,
        ok=ok,
        note=note,
    )


def _failed(backend: str, batch: int, note: str) -> OutputCheck:
    nan = float("nan")
    return OutputCheck(backend, batch, "-", "-", "-", "-", nan, nan, False, note)


def _compared_rows(
    what: str, batch: int, got: Sequence[np.ndarray], want: Sequence[np.ndarray], tally: Tally
) -> list[str]:
    """One run row of a step checked output by output, counted into `tally`."""
    results = [compare(g, w) for g, w in zip(got, want, strict=True)]
    right = sum(r[2] for r in results)
    tally.checked += len(results)
    tally.right += right
    verdict = "ok" if right == len(results) else "FAILED"
    worst = max((r[0] for r in results), default=0.0)
    result = f"{len(results)} outputs, max |diff| {number(worst)}: {verdict}"
    return [f"run N={batch}", what, result]


def training_step_rows(batches: Sequence[int]) -> tuple[list[list[str]], Tally]:
    """The example's nodes with standard nodes around them, as one IREE module, against the
    same model inlined to standard ONNX in onnxruntime."""
    what = "iree whole model (standard nodes around the ai.lossgrad ones) vs onnxruntime, inline"
    tally = Tally("iree training step", against="onnxruntime")
    model = examples.training_step_model()
    reason = _iree_unavailable()
    if reason is not None:
        shows = (
            f"the training-step model ({len(model.graph.node)} nodes, standard ONNX around "
            f"the ai.lossgrad ones) as one IREE module: {len(model.graph.output) * len(batches)} "
            "outputs checked against onnxruntime"
        )
        tally.skipped = skip_text(reason, "iree", shows)
        return [["run", what, tally.skipped]], tally
    # defers xDSL, the compiler and onnxruntime until this step runs
    from lossgrad_compiler.driver import compile_model
    from lossgrad_compiler.runtime.ort_io import make_session, run_session

    try:
        iree = _iree_session(model)
        ort = make_session(compile_model(model, target="onnx", mode="inline").model, 1)
    except Exception as err:  # reported as a failed step, not a traceback
        tally.failed_steps += 1
        return [["prepare", what, f"FAILED: {_error_text(err)}"]], tally
    rows = []
    for batch in batches:
        feeds = examples.training_step_feeds(batch, seed=batch)
        try:
            got = iree.run(None, feeds)
            want = run_session(ort, feeds)
        except Exception as err:  # reported as a failed step, not a traceback
            rows.append([f"run N={batch}", what, f"FAILED: {_error_text(err)}"])
            tally.failed_steps += 1
            continue
        rows.append(_compared_rows(what, batch, got, want, tally))
    return rows, tally


def pytorch_step_rows(batches: Sequence[int]) -> tuple[list[list[str]], Tally]:
    """A PyTorch training step exported with PyTorch's own exporter, fused into ai.lossgrad
    nodes and run with the native kernels, against torch.autograd."""
    what = "PyTorch step (F.kl_div + F.smooth_l1_loss) exported, fused, native vs autograd"
    tally = Tally("pytorch export + fuse", against="torch.autograd")
    try:  # defers torch, an optional extra
        from lossgrad_compiler.torch import export_training_step
        from lossgrad_compiler.torch.examples import (
            DYNAMIC_SHAPES,
            INPUT_NAMES,
            distillation_inputs,
            distillation_step,
        )
    except ImportError as err:
        shows = (
            "a PyTorch training step exported by torch.onnx, its decomposed gradients fused "
            f"into ai.lossgrad nodes and run by the native kernels: {2 * len(batches)} outputs "
            "checked against torch.autograd"
        )
        tally.skipped = skip_text(f"PyTorch cannot be imported ({err})", "torch", shows)
        return [["run", what, tally.skipped]], tally
    # defers onnxruntime and the kernel library until this step runs
    from lossgrad_compiler.evaluation.ort import session
    from lossgrad_compiler.runtime.ort_io import run_session

    try:
        example = distillation_inputs(4)
        model, report = export_training_step(
            distillation_step, example, dynamic_shapes=DYNAMIC_SHAPES
        )
        runner = session(model)
    except Exception as err:  # reported as a failed step, not a traceback
        tally.failed_steps += 1
        return [["export", what, f"FAILED: {_error_text(err)}"]], tally
    ops = sorted(n.op_type for n in model.graph.node if n.domain == spec.DOMAIN)
    rows = [["export", what, f"{report.summary()}; ai.lossgrad nodes: {', '.join(ops) or '-'}"]]
    if len(ops) != 2:
        tally.failed_steps += 1
    for batch in batches:
        inputs = distillation_inputs(batch, seed=batch)
        feeds = {n: t.numpy() for n, t in zip(INPUT_NAMES, inputs, strict=True)}
        try:
            got = run_session(runner, feeds)
        except Exception as err:  # reported as a failed step, not a traceback
            rows.append([f"run N={batch}", what, f"FAILED: {_error_text(err)}"])
            tally.failed_steps += 1
            continue
        want = [g.detach().numpy() for g in distillation_step(*inputs)]
        rows.append(_compared_rows(what, batch, got, want, tally))
    return rows, tally


def rejection_row(model: ModelProto) -> list[str]:
    """Show validation at work: the model with an invalid reduction must be rejected."""
    bad = ModelProto()
    bad.CopyFrom(model)
    node = bad.graph.node[0]
    for attr in node.attribute:
        if attr.name == "reduction":
            attr.s = b"avg"
    what = f"check with {node.name}.reduction = 'avg'"
    try:
        lo.check_model(bad)
    except LossGradError as err:
        return ["reject", what, f"rejected: {err}"]
    return ["reject", what, "FAILED: accepted an invalid model"]


def _error_text(err: Exception) -> str:
    return str(err) if isinstance(err, LossGradError) else f"{type(err).__name__}: {err}"


def inferred_output_rows(model: ModelProto) -> list[str]:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    return [f"{o.name}: {_type_text(o.type)}" for o in inferred.graph.output]


# --------------------------------------------------------------------------- printing


def _type_text(type_proto: TypeProto) -> str:
    elem = spec.float_type(type_proto.tensor_type.elem_type)
    shape = shape_of(type_proto)
    dims = "?" if shape is None else ",".join("?" if d is None else str(d) for d in shape)
    return f"{elem.name if elem else type_proto.tensor_type.elem_type}[{dims}]"


def _tensor_text(dtype: np.dtype, shape: Sequence[int]) -> str:
    return f"{np.dtype(dtype).name}[{','.join(str(d) for d in shape)}]"


def _check_rows(checks: Sequence[OutputCheck]) -> list[list[str]]:
    return [
        [
            c.backend,
            str(c.batch),
            c.node,
            c.op,
            c.attributes,
            c.output,
            number(c.max_diff),
            number(c.tolerance),
            ("ok" if c.ok else "FAILED") + (f" ({c.note})" if c.note else ""),
        ]
        for c in checks
    ]


def summary_lines(tallies: Sequence[Tally]) -> list[str]:
    """One line per backend and step, then the verdict."""
    width = max(len(t.name) for t in tallies) + 1
    lines = ["summary: one line per backend, the outputs it checked and how many were right"]
    lines += [f"  {(t.name + ':').ljust(width)}  {t.text()}" for t in tallies]
    return lines


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lossgrad-demo",
        description="Build the example model (ai.lossgrad nodes, symbolic batch N), "
        "check it, infer its shapes, show that an invalid node is rejected, and run it on "
        "every backend for batch sizes "
        f"{', '.join(map(str, BATCH_SIZES))}, comparing each output with the numpy reference: "
        "standard ONNX, the native ONNX Runtime kernels, the Ascend C projects in the CPU "
        "emulator (with their tiling), IREE and AscendNPU IR (with their extras), and a "
        "PyTorch export fused back into ai.lossgrad nodes (with the extra torch).",
        epilog="Exit status: 0 when every output is within tolerance, 1 otherwise.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"where compiled artifacts are written (the Ascend C projects go to DIR/ascendc; "
        f"default: {DEFAULT_OUT})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 when every output is within tolerance, else 1."""
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    print("lossgrad-demo: loss gradients of a small training step (symbolic batch N)\n")
    steps: list[list[str]] = []
    model = examples.example_model()
    ops = ", ".join(f"{n.name} ({n.op_type})" for n in model.graph.node)
    steps.append(["build", "example model (lossgrad_compiler.examples)", ops])
    try:
        lo.check_model(model)
        steps.append(["check", "spec validation + onnx.checker full_check", "ok"])
        shapes = inferred_output_rows(model)
    except Exception as err:
        steps.append(["check", "spec validation + onnx.checker full_check", f"FAILED: {err}"])
        print(format_table(["step", "what", "result"], steps))
        return 1
    for i, text in enumerate(shapes):
        steps.append(["infer" if i == 0 else "", "onnx shape inference" if i == 0 else "", text])
    steps.append(rejection_row(model))
    rejected = steps[-1][2].startswith("rejected")
    checks: list[OutputCheck] = []
    details: list[list[str]] = []
    tallies: list[Tally] = []
    for backend in BACKENDS:
        run = run_backend(backend, model, BATCH_SIZES, args.out)
        steps.extend(run.steps)
        checks.extend(run.checks)
        tallies.append(run.tally)
        if run.details:
            details.append(run.details)
    for extra_step in (training_step_rows, pytorch_step_rows):
        rows, tally = extra_step(BATCH_SIZES)
        steps.extend(rows)
        tallies.append(tally)
    print(format_table(["step", "what", "result"], steps))
    for lines in details:
        print()
        print("\n".join(lines))
    print()
    headers = ["backend", "N", "node", "op", "attributes", "output", "max |diff|", "tol", "result"]
    print(format_table(headers, _check_rows(checks)))
    print()
    print("\n".join(summary_lines(tallies)))
    print()
    return _verdict(rejected, checks, tallies, time.perf_counter() - start)


def _verdict(rejected: bool, checks: Sequence[OutputCheck], tallies: Sequence[Tally],
             seconds: float) -> int:  # fmt: skip
    """The closing line and the exit status."""
    ran = [t for t in tallies if t.skipped is None]
    checked = sum(t.checked for t in ran)
    right = sum(t.right for t in ran)
    if not rejected:
        print("FAILED: an invalid model was accepted")
        return 1
    if not checks or not all(t.ok for t in ran):
        failed = [t.name for t in ran if not t.ok]
        print(f"FAILED: {checked - right} of {checked} outputs wrong; failed: "
              f"{', '.join(failed) or 'no backend ran'}")  # fmt: skip
        return 1
    print(
        f"all {checked} outputs right ({len(ran)} backends and steps run, "
        f"{len(tallies) - len(ran)} skipped) in {seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
