"""Phase 2, on the device: every case of the bundle run by the IREE runtime, checked against
reference.py (tolerance of the CPU tests) and timed beside PyTorch's backward and a copy.

Benchmark inputs are drawn from their seed here and the reference is evaluated here; the
digests prepare recorded say whether both machines drew the same inputs and got the same
reference bits. The example calls bring their inputs and results. Writes table.md,
results.json and log.txt under the output folder."""

from __future__ import annotations

import datetime
import platform
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import iree.runtime as rt
import numpy as np

from benchmarks.device_check import bundle, cases, table, timing
from benchmarks.device_check.check import mismatch
from lossgrad_compiler import reference


class Log:
    """Lines to stdout and to log.txt, flushed as they come."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w")

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


def case_arrays(
    case: bundle.CaseEntry, order: list[str], folder: Path, log: Log
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The case's inputs in call order and the result it must give: an example's carried
    result, or reference.py's here for a benchmark case (its inputs drawn here). A digest
    that differs from prepare's is logged: other inputs drawn, or other reference bits."""
    if case.kind == "example":
        arrays = bundle.load_arrays(folder / case.data)
        inputs, carried = {n: arrays[n] for n in order}, arrays["expected"]
    else:
        drawn = cases.drawn_case(case).inputs()
        inputs, carried = {n: drawn[n] for n in order}, None
    if cases.digest(inputs) != case.inputs_sha256:
        log(f"  note: inputs differ from prepare's (numpy {np.__version__} drew others)")
    here = reference.evaluate(case.op, inputs, case.attrs)
    if cases.digest({"result": here}) != case.expected_sha256:
        log("  note: reference.py gives other bits here than on the preparing machine")
    return inputs, here if carried is None else carried


class Baselines:
    """PyTorch on the kernel's device; `module` is None where PyTorch or the device is
    missing (the run goes on without baselines)."""

    def __init__(self, backend: str, log: Log) -> None:
        self.module: Any = None
        try:  # deferred: without PyTorch the run goes on, with no baselines
            import torch

            from benchmarks.device_check import baselines
        except ImportError as err:
            log(f"PyTorch baselines: none ({err})")
            return
        if backend == "cuda" and not torch.cuda.is_available():
            log("PyTorch baselines: none (torch sees no CUDA device)")
            return
        self.module = baselines
        self.device = torch.device("cuda" if backend == "cuda" else "cpu")
        self.sync = baselines.synchronizer(self.device)
        name = torch.cuda.get_device_name(self.device) if backend == "cuda" else "CPU"
        self.description = f"torch {torch.__version__} on {self.device} ({name})"
        log(f"PyTorch baselines: {self.description}")


class IreeModules:
    """The IREE device, a context per module of the bundle, and their exported functions by
    (module, name)."""

    def __init__(self, manifest: bundle.Manifest, folder: Path, log: Log) -> None:
        self.config = rt.Config(manifest.iree_driver)
        self.contexts = []
        self.functions: dict[tuple[str, str], Callable[..., Any]] = {}
        for key, entry in manifest.modules.items():
            context = rt.SystemContext(config=self.config)
            vm_module = rt.VmModule.mmap(self.config.vm_instance, str(folder / entry.file))
            context.add_vm_module(vm_module)
            self.contexts.append(context)
            for name in entry.functions:
                self.functions[(key, name)] = context.modules.module[name]
        version = metadata.version("iree-base-runtime")
        log(f"IREE runtime {version}, device {manifest.iree_driver}")


def nothing() -> None:
    """No device to wait for."""


def failed_checks(counts: list[np.ndarray]) -> str | None:
    """What the value checks a function returns after its gradient found (a classification
    function's count of targets outside [0, C) that are not ignore_index); None when every
    count is 0."""
    found = [int(c.sum()) for c in counts]
    if not any(found):
        return None
    return f"value checks failed: counts {found} (targets outside [0, C)), expected 0"


def run_case(
    case: bundle.CaseEntry,
    manifest: bundle.Manifest,
    folder: Path,
    device: Any,
    function: Callable[..., Any],
    torch_side: Baselines,
    turn_s: float,
    log: Log,
) -> table.Row:
    order = manifest.modules[case.module].functions[case.function]
    row = table.Row(case.name, case.function, "error")
    inputs, expected = case_arrays(case, order, folder, log)
    args = [rt.asdevicearray(device, inputs[n]) for n in order]
    results = function(*args)
    gradient, *counts = results if isinstance(results, (tuple, list)) else [results]
    got = np.asarray(gradient.to_host()).astype(expected.dtype, copy=False)
    found = mismatch(got, expected, case.op, inputs, case.attrs)
    row.check = found or failed_checks([np.asarray(c.to_host()) for c in counts]) or "ok"
    row.nbytes = sum(inputs[n].nbytes for n in case.reads) + expected.nbytes
    runners: dict[str, Callable[[], object]] = {"iree": lambda: function(*args)}
    sync = nothing  # an IREE call returns when its work is done
    if torch_side.module is not None:
        sync = torch_side.sync
        runners["copy"] = torch_side.module.copy_runner(row.nbytes, torch_side.device)
        if case.kind == "benchmark":
            try:
                runners["torch"] = torch_side.module.backward_runner(
                    case.op, inputs, case.attrs, torch_side.device
                )
            except (RuntimeError, NotImplementedError) as err:
                row.notes.append(f"PyTorch: {str(err).splitlines()[0]}")
    times = timing.median_turns(runners, sync, budget_s=turn_s)
    row.iree_s, row.torch_s, row.copy_s = (times.get(k) for k in ("iree", "torch", "copy"))
    return row


def header(manifest: bundle.Manifest, torch_side: Baselines, rows: list[table.Row]) -> list[str]:
    done = [r for r in rows if not r.check.startswith("not run")]
    passed = sum(r.passed for r in done)
    baseline = getattr(torch_side, "description", "none")
    return [
        "# Device check",
        "",
        f"- run: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on {platform.node()}",
        f"- modules: IREE {manifest.iree_compiler} for {manifest.backend} ({manifest.arch}), "
        f"prepared {manifest.created}",
        f"- checked: {passed} of {len(done)} run cases within tolerances.TIGHT "
        f"({len(rows) - len(done)} not run)",
        f"- baselines: {baseline}",
        "- times: median of alternating turns, wall clock from launch to the device's "
        "synchronisation; IREE: the exported function on device-resident inputs, its "
        "result's allocation included; PyTorch: torch.autograd.grad of the same loss (graph "
        "built once); copy: a device-to-device copy reading and writing the bytes of the "
        "kernel's tensors (GB/s counts the same bytes). Ratios above 1: IREE is slower.",
    ]


def run(folder: Path, out: Path, budget_s: float = 360.0, turn_s: float = 0.5) -> int:
    """Every case, within `budget_s` seconds (the rest is listed as not run); 0 when every
    case run matches the reference, 1 when one does not, 2 when no IREE device opens."""
    start = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "log.txt")
    manifest = bundle.Manifest.read(folder)
    log(f"python {sys.version.split()[0]}, numpy {np.__version__}, "
        f"ml_dtypes {metadata.version('ml_dtypes')}")  # fmt: skip
    log(f"bundle: {len(manifest.cases)} cases, {manifest.backend} ({manifest.arch}), "
        f"prepared {manifest.created}")  # fmt: skip
    torch_side = Baselines(manifest.backend, log)
    try:
        modules = IreeModules(manifest, folder, log)
    except RuntimeError as err:  # no device: every row says so, and the run fails
        log(f"IREE {manifest.iree_driver}: {err} {err.__cause__ or ''}")
        rows = [table.Row(c.name, c.function, f"not run (no IREE {manifest.iree_driver} device)")
                for c in manifest.cases]  # fmt: skip
        table.write(out, header(manifest, torch_side, rows), rows)
        return 2
    rows: list[table.Row] = []
    for case in manifest.cases:
        if time.monotonic() - start > budget_s:
            rows.append(table.Row(case.name, case.function, "not run (time budget)"))
            continue
        log(f"{case.name}: {case.function}")
        function = modules.functions[(case.module, case.function)]
        device = modules.config.device
        try:
            row = run_case(case, manifest, folder, device, function, torch_side, turn_s, log)
        except Exception as err:  # one case's failure must not lose the others' rows
            row = table.Row(case.name, case.function, f"error: {type(err).__name__}: {err}")
        log(f"  {' | '.join(row.cells()[1:])}" + "".join(f"\n  {n}" for n in row.notes))
        if not row.passed:
            log("  " + row.check.replace("\n", "\n  "))
        rows.append(row)
        table.write(out, header(manifest, torch_side, rows), rows)
    table.write(out, header(manifest, torch_side, rows), rows)
    log(f"done in {time.monotonic() - start:.1f} s")
    failed = [r for r in rows if not r.passed and not r.check.startswith("not run")]
    return 1 if failed else 0
