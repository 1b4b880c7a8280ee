"""lossgrad-demo: build the example model, check it, infer its shapes and run it on every
available backend, comparing each output with the numpy reference run node by node.

Backends are entries of BACKENDS: a name and a `prepare(model) -> runner` function (compile
once, run for several batch sizes). Later stages append their backends there; a backend
that cannot run on this machine says why through `unavailable()` and is reported as
skipped. The exit code is 1 when any output differs from the reference by more than its
tolerance, or when any step fails."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import ModelProto, TypeProto

from lossgrad_compiler import __version__, examples, reference, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.onnx.type_protos import shape_of

if TYPE_CHECKING:
    from lossgrad_compiler.runtime.iree import IreeSession

Feeds = Mapping[str, np.ndarray]
Runner = Callable[[Feeds], Mapping[str, np.ndarray]]

BATCH_SIZES = (1, 5, 32)

# Relative tolerance per result element type, scaled by the largest |reference| value of the
# output: a few units in the last place of the type, for backends that compute in another
# order than the reference.
RTOL: dict[str, float] = {"float64": 1e-12, "float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}


def _available() -> str | None:
    return None


@dataclass(frozen=True)
class Backend:
    """One way to run a model; `unavailable()` returns the reason it cannot run here, or None."""

    name: str
    what: str
    prepare: Callable[[ModelProto], Runner]
    unavailable: Callable[[], str | None] = field(default=_available)


def _prepare_onnx_reference(model: ModelProto) -> Runner:
    return lambda feeds: lo.run_reference(model, feeds)


def _named_outputs(model: ModelProto, values: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    return {out.name: v for out, v in zip(model.graph.output, values, strict=True)}


def _prepare_standard_onnx(mode: str, threads: int) -> Callable[[ModelProto], Runner]:
    """Compile once to standard ONNX (`mode`), then run in stock onnxruntime."""

    def prepare(model: ModelProto) -> Runner:
        # defers xDSL and onnxruntime until a backend runs (`--help` needs neither)
        from lossgrad_compiler.driver import compile_model
        from lossgrad_compiler.runtime.ort_io import make_session, run_session

        session = make_session(compile_model(model, target="onnx", mode=mode).model, threads)
        return lambda feeds: _named_outputs(model, run_session(session, feeds))

    return prepare


def _prepare_native(threads: int) -> Callable[[ModelProto], Runner]:
    """The native kernel library in onnxruntime: every node, mixed element types included."""

    def prepare(model: ModelProto) -> Runner:
        # defers onnxruntime and the kernel build until the native backend runs
        from lossgrad_compiler.runtime import ort as native
        from lossgrad_compiler.runtime.ort_io import run_session

        session = native.session(model, intra_op_num_threads=threads, inter_op_num_threads=1)
        return lambda feeds: _named_outputs(model, run_session(session, feeds))

    return prepare


def _native_unavailable() -> str | None:
    # defers onnxruntime and the kernel build until the native backend is asked for
    from lossgrad_compiler.backends.ort.build import NativeUnavailableError
    from lossgrad_compiler.runtime import ort as native

    try:
        native.library_path()
    except NativeUnavailableError as err:
        return str(err)
    return None


def _prepare_iree(model: ModelProto) -> Runner:
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
    from lossgrad_compiler.backends.iree.targets import IreeUnavailableError, iree_module

    try:
        iree_module("iree.compiler.extras.onnx_importer")
        iree_module("iree.runtime")
    except IreeUnavailableError as err:
        return str(err)
    return None


def _prepare_ascendnpu_ir(model: ModelProto) -> Runner:
    """Each node's kernel as AscendNPU IR schedules it (lossgrad-compile --target
    ascendnpu-ir), run on this CPU by the compiler's own CPU-runner lowering."""
    # defers AscendNPU IR, xDSL and the compiler until the backend runs
    from lossgrad_compiler.runtime import ascendnpu_ir

    def run(feeds: Feeds) -> dict[str, np.ndarray]:
        values: dict[str, np.ndarray] = dict(feeds)
        for node in model.graph.node:
            inputs = {n: values[v] for n, v in zip(spec.INPUT_NAMES, node.input, strict=True)}
            attrs = lo.attributes_from_node(node)
            values[node.output[0]] = ascendnpu_ir.evaluate(node.op_type, inputs, attrs)
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
    ),
    Backend(
        "iree",
        "lossgrad-compile --target iree: the model as one IREE module, llvm-cpu, local-task",
        _prepare_iree,
        _iree_unavailable,
    ),
    Backend(
        "ascendnpu-ir",
        "lossgrad-compile --target ascendnpu-ir: each node's kernel as AscendNPU IR schedules "
        "it, run by the compiler's CPU runner",
        _prepare_ascendnpu_ir,
        _ascendnpu_ir_unavailable,
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


def reference_outputs(model: ModelProto, feeds: Feeds) -> dict[str, np.ndarray]:
    """Every node's output from lossgrad_compiler.reference.evaluate, node by node."""
    values: dict[str, np.ndarray] = dict(feeds)
    for node in model.graph.node:
        if node.domain != spec.DOMAIN:
            raise ValueError(f"node '{node.name}' ({node.op_type}) is not an ai.lossgrad node")
        inputs = {
            name: values.get(v) for name, v in zip(spec.INPUT_NAMES, node.input, strict=False)
        }
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


def run_backend(
    backend: Backend, model: ModelProto, batches: Sequence[int]
) -> tuple[list[list[str]], list[OutputCheck]]:
    """Step rows and per-output checks of one backend over the batch sizes."""
    try:
        reason = backend.unavailable()
    except Exception as err:  # a broken availability probe is a skip with its reason
        reason = _error_text(err)
    if reason is not None:
        return [["run", backend.name, f"skipped: {reason}"]], []
    try:
        runner = backend.prepare(model)
    except Exception as err:  # reported as a failed step, not a traceback
        return [["prepare", backend.name, f"FAILED: {_error_text(err)}"]], [
            _failed(backend.name, 0, f"prepare failed: {err}")
        ]
    steps, checks = [], []
    for batch in batches:
        feeds = examples.example_feeds(batch, seed=batch)
        want = reference_outputs(model, feeds)
        try:
            got = runner(feeds)
        except Exception as err:
            steps.append([f"run N={batch}", backend.name, f"FAILED: {_error_text(err)}"])
            checks.append(_failed(backend.name, batch, f"run failed: {err}"))
            continue
        batch_checks = [_check(backend.name, batch, node, got, want) for node in model.graph.node]
        worst = max((c.max_diff for c in batch_checks), default=0.0)
        verdict = "ok" if all(c.ok for c in batch_checks) else "FAILED"
        steps.append(
            [
                f"run N={batch}",
                f"{backend.name}: {backend.what}",
                f"{len(batch_checks)} outputs, max |diff| {_num(worst)}: {verdict}",
            ]
        )
        checks.extend(batch_checks)
    return steps, checks


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
        attributes=" ".join(f"{k}={v}" for k, v in attrs.items()),
        output=f"{out}: {_tensor_text(expected.dtype, expected.shape)}",
        max_diff=max_diff,
        tolerance=tolerance,
        ok=ok,
        note=note,
    )


def _failed(backend: str, batch: int, note: str) -> OutputCheck:
    nan = float("nan")
    return OutputCheck(backend, batch, "-", "-", "-", "-", nan, nan, False, note)


def training_step_rows(batches: Sequence[int]) -> tuple[list[list[str]], bool]:
    """The example's nodes with standard nodes around them, as one IREE module, against the
    same model inlined to standard ONNX in onnxruntime; (rows, every output matched)."""
    what = "iree whole model (standard nodes around the three) vs onnxruntime, inline"
    reason = _iree_unavailable()
    if reason is not None:
        return [["run", what, f"skipped: {reason}"]], True
    # defers xDSL, the compiler and onnxruntime until this step runs
    from lossgrad_compiler.driver import compile_model
    from lossgrad_compiler.runtime.ort_io import make_session, run_session

    model = examples.training_step_model()
    try:
        iree = _iree_session(model)
        ort = make_session(compile_model(model, target="onnx", mode="inline").model, 1)
    except Exception as err:  # reported as a failed step, not a traceback
        return [["prepare", what, f"FAILED: {_error_text(err)}"]], False
    rows, all_ok = [], True
    for batch in batches:
        feeds = examples.training_step_feeds(batch, seed=batch)
        try:
            got = iree.run(None, feeds)
            want = run_session(ort, feeds)
        except Exception as err:  # reported as a failed step, not a traceback
            rows.append([f"run N={batch}", what, f"FAILED: {_error_text(err)}"])
            all_ok = False
            continue
        results = [compare(g, w) for g, w in zip(got, want, strict=True)]
        ok = all(r[2] for r in results)
        all_ok = all_ok and ok
        worst = max(r[0] for r in results)
        verdict = "ok" if ok else "FAILED"
        rows.append(
            [f"run N={batch}", what, f"{len(results)} outputs, max |diff| {_num(worst)}: {verdict}"]
        )
    return rows, all_ok


def pytorch_step_rows(batches: Sequence[int]) -> tuple[list[list[str]], bool]:
    """A PyTorch training step exported with PyTorch's own exporter, fused into ai.lossgrad
    nodes and run with the native kernels, against torch.autograd; (rows, all matched)."""
    what = "PyTorch step (F.kl_div + F.smooth_l1_loss) exported, fused, native vs autograd"
    try:  # defers torch, an optional extra
        from lossgrad_compiler.torch import export_training_step
        from lossgrad_compiler.torch.examples import (
            DYNAMIC_SHAPES,
            INPUT_NAMES,
            distillation_inputs,
            distillation_step,
        )
    except ImportError:
        needs = "skipped: needs PyTorch: pip install 'lossgrad_compiler[torch]'"
        return [["run", what, needs]], True
    # defers onnxruntime and the kernel library until this step runs
    from lossgrad_compiler.runtime.ort import session
    from lossgrad_compiler.runtime.ort_io import run_session

    try:
        example = distillation_inputs(4)
        model, report = export_training_step(
            distillation_step, example, dynamic_shapes=DYNAMIC_SHAPES
        )
        runner = session(model)
    except Exception as err:  # reported as a failed step, not a traceback
        return [["export", what, f"FAILED: {_error_text(err)}"]], False
    ops = sorted(n.op_type for n in model.graph.node if n.domain == spec.DOMAIN)
    rows = [["export", what, f"{report.summary()}: {', '.join(ops) or 'no ai.lossgrad node'}"]]
    all_ok = len(ops) == 2
    for batch in batches:
        inputs = distillation_inputs(batch, seed=batch)
        feeds = {n: t.numpy() for n, t in zip(INPUT_NAMES, inputs, strict=True)}
        try:
            got = run_session(runner, feeds)
        except Exception as err:  # reported as a failed step, not a traceback
            rows.append([f"run N={batch}", what, f"FAILED: {_error_text(err)}"])
            all_ok = False
            continue
        want = [g.detach().numpy() for g in distillation_step(*inputs)]
        results = [compare(g, w) for g, w in zip(got, want, strict=True)]
        ok = all(r[2] for r in results)
        all_ok = all_ok and ok
        worst = max(r[0] for r in results)
        verdict = "ok" if ok else "FAILED"
        rows.append(
            [f"run N={batch}", what, f"{len(results)} outputs, max |diff| {_num(worst)}: {verdict}"]
        )
    return rows, all_ok


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


def _num(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [
        "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [headers, ["-" * w for w in widths], *rows]
    ]
    return "\n".join(lines)


def _check_rows(checks: Sequence[OutputCheck]) -> list[list[str]]:
    return [
        [
            c.backend,
            str(c.batch),
            c.node,
            c.op,
            c.attributes,
            c.output,
            _num(c.max_diff),
            _num(c.tolerance),
            ("ok" if c.ok else "FAILED") + (f" ({c.note})" if c.note else ""),
        ]
        for c in checks
    ]


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lossgrad-demo",
        description="Build the example model (three ai.lossgrad nodes, symbolic batch N), "
        "check it, infer its shapes, show that an invalid node is rejected, and run it on "
        "every available backend for batch sizes "
        f"{', '.join(map(str, BATCH_SIZES))}, comparing each output with the numpy reference.",
        epilog="Exit status: 0 when every output is within tolerance, 1 otherwise.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 when every output is within tolerance, else 1."""
    build_parser().parse_args(argv)  # no options besides --help and --version
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
    for backend in BACKENDS:
        backend_steps, backend_checks = run_backend(backend, model, BATCH_SIZES)
        steps.extend(backend_steps)
        checks.extend(backend_checks)
    training_steps, training_ok = training_step_rows(BATCH_SIZES)
    steps.extend(training_steps)
    pytorch_steps, pytorch_ok = pytorch_step_rows(BATCH_SIZES)
    steps.extend(pytorch_steps)
    print(format_table(["step", "what", "result"], steps))
    print()
    headers = ["backend", "N", "node", "op", "attributes", "output", "max |diff|", "tol", "result"]
    print(format_table(headers, _check_rows(checks)))
    failed = [c for c in checks if not c.ok]
    print()
    if not rejected:
        print("FAILED: an invalid model was accepted")
        return 1
    if failed or not checks:
        print(f"FAILED: {len(failed)} of {len(checks)} outputs differ from the reference")
        return 1
    if not training_ok:
        print("FAILED: the IREE training-step module differs from onnxruntime")
        return 1
    if not pytorch_ok:
        print("FAILED: the fused PyTorch step differs from torch.autograd")
        return 1
    print(f"all {len(checks)} outputs match the reference within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
