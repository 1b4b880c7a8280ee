"""Phase 1, on this machine: the bundle for the device (bundle.py describes it).

Compiles the benchmark set (cases.py: the elementwise and the classification cases) into
one IREE module and the example model's signatures into another, for IREE's cuda target (or
llvm-cpu, for the test suite's run), records the digests of each case's inputs and of
reference.py's result on them, carries the example calls' inputs and results, downloads the
runtime wheels, and says how large the bundle is against the 64 MiB the device takes."""

from __future__ import annotations

import datetime
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.device_check import bundle, cases, wheels
from lossgrad_compiler import examples, level2, reference, spec
from lossgrad_compiler.backends.iree import IreeOptions, compile_module
from lossgrad_compiler.calls import checked_call
from lossgrad_compiler.frontend.signature import Signature
from lossgrad_compiler.onnx.attributes import attributes_from_node
from lossgrad_compiler.pipeline import level2 as level2_of
from lossgrad_compiler.pipeline import signature

DEFAULT_GPU = "sm_80"
"""IREE 3.13 compiles nothing for sm_90 ('missing GPU target in #hal.executable.target': its
table of NVIDIA targets, KnownTargets.cpp, has no Hopper entry), so an H200 runs sm_80 PTX,
which its driver compiles when the module loads (tests/iree/test_device_check.py pins it)."""
EXAMPLE_BATCH = 32


def signature_for(op: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any]) -> Signature:
    """The signature of one call, checked by the pipeline's one check."""
    return signature(checked_call(op, inputs, attrs).checked)


def compile_group(
    name: str, signatures: list[Signature], options: IreeOptions, folder: Path
) -> tuple[bundle.ModuleEntry, dict[str, list[str]]]:
    """One module for `signatures`, copied into the bundle; and the inputs each function's
    level-2 body reads."""
    module = level2_of(signatures)
    reads = {
        f.name: [o.name for o in f.operands if o.reads] for f in level2.signature_functions(module)
    }
    path = compile_module(module, options)
    relative = f"{bundle.MODULES}/{name}.vmfb"
    (folder / bundle.MODULES).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, folder / relative)
    functions = {s.id: list(s.present) for s in {s.id: s for s in signatures}.values()}
    return bundle.ModuleEntry(relative, functions), reads


def benchmark_entries(
    sizes: tuple[int, ...],
    class_shapes: tuple[tuple[int, int], ...],
    types: tuple[str, ...],
    options: IreeOptions,
    folder: Path,
) -> tuple[bundle.ModuleEntry, list[bundle.CaseEntry]]:
    """The benchmark set's entries; one function per operator and type, its dimensions
    dynamic, so that the smallest case's signature serves every size."""
    # the classification cases first: with the time budget spent, the run drops the
    # largest elementwise cases rather than the language-model shape
    chosen = [*cases.class_set(class_shapes, types), *cases.benchmark_set(sizes, types)]
    smallest = {(c.op, c.type_name): c for c in reversed(chosen)}
    by_kind = {k: signature_for(c.op, c.inputs(), c.attrs) for k, c in smallest.items()}
    module, reads = compile_group("benchmark", list(by_kind.values()), options, folder)
    entries = []
    for case in chosen:
        inputs = case.inputs()
        expected = reference.evaluate(case.op, inputs, case.attrs)
        function = by_kind[(case.op, case.type_name)].id
        entries.append(
            bundle.CaseEntry(
                name=case.name,
                kind="benchmark",
                module="benchmark",
                function=function,
                op=case.op,
                attrs=case.attrs,
                reads=reads[function],
                type_name=case.type_name,
                **case.size_fields,
                seed=case.seed,
                inputs_sha256=cases.digest(inputs),
                expected_sha256=cases.digest({"result": expected}),
            )
        )
    return module, entries


def example_calls() -> list[tuple[str, str, dict[str, np.ndarray], dict[str, Any]]]:
    """(node name, op, inputs by the operator's input names, attributes) of each node of the
    example model, on example_feeds: the classification head's nodes too, whose functions
    return the target check's count after the gradient (run.py checks it is 0)."""
    feeds = examples.example_feeds(EXAMPLE_BATCH)
    calls = []
    for node in examples.example_model().graph.node:
        names = [i.name for i in spec.operator(node.op_type).inputs]
        inputs = {n: feeds[v] for n, v in zip(names, node.input, strict=False) if v}
        calls.append((node.name, node.op_type, inputs, attributes_from_node(node)))
    return calls


def example_entries(
    options: IreeOptions, folder: Path
) -> tuple[bundle.ModuleEntry, list[bundle.CaseEntry]]:
    calls = example_calls()
    signatures = [signature_for(op, inputs, attrs) for _, op, inputs, attrs in calls]
    module, reads = compile_group("example", signatures, options, folder)
    (folder / bundle.EXAMPLES).mkdir(parents=True, exist_ok=True)
    entries = []
    for (node, op, inputs, attrs), sig in zip(calls, signatures, strict=True):
        expected = reference.evaluate(op, inputs, attrs)
        data = f"{bundle.EXAMPLES}/{node}.npz"
        bundle.save_arrays(folder / data, {**inputs, "expected": expected})
        entries.append(
            bundle.CaseEntry(
                name=f"example {node} ({op})",
                kind="example",
                module="example",
                function=sig.id,
                op=op,
                attrs=attrs,
                reads=reads[sig.id],
                inputs_sha256=cases.digest(inputs),
                expected_sha256=cases.digest({"result": expected}),
                data=data,
            )
        )
    return module, entries


def fresh_folder(folder: Path) -> None:
    """Empty `folder` for a new bundle; refuse a folder that holds something else."""
    if folder.exists() and any(folder.iterdir()) and not (folder / bundle.MANIFEST).exists():
        raise SystemExit(f"{folder} is not empty and holds no {bundle.MANIFEST}: not replacing it")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def prepare(
    folder: Path,
    backend: str = "cuda",
    arch: str | None = None,
    sizes: tuple[int, ...] = cases.SIZES,
    types: tuple[str, ...] = cases.TYPES,
    with_wheels: bool = True,
    class_shapes: tuple[tuple[int, int], ...] = cases.CLASS_SHAPES,
) -> bundle.Manifest:
    """Write the bundle into `folder` (replacing an earlier bundle there)."""
    if backend == "cuda":
        options = IreeOptions("cuda", gpu=arch or DEFAULT_GPU)
    else:
        options = IreeOptions(backend, cpu=arch or "host")
    fresh_folder(folder)
    manifest = bundle.Manifest(
        backend=options.backend,
        arch=(options.gpu or DEFAULT_GPU) if options.backend == "cuda" else options.cpu,
        iree_compiler=metadata.version("iree-base-compiler"),
        iree_runtime=metadata.version("iree-base-runtime"),
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    # the examples first: they are quick, and the run starts no case after its time budget
    builds = (
        example_entries(options, folder),
        benchmark_entries(sizes, class_shapes, types, options, folder),
    )
    for build in builds:
        module, entries = build
        manifest.modules[Path(module.file).stem] = module
        manifest.cases += entries
    if with_wheels:
        found = wheels.download(folder / bundle.WHEELS)
        manifest.wheels = [str(p.relative_to(folder)) for p in found]
    else:
        manifest.notes.append("no wheels: run with an installed iree-base-runtime")
    manifest.write(folder)
    return manifest


def working_tree_bytes(root: Path) -> int | None:
    """The bytes of what git would send besides the bundle (tracked and untracked files
    that are not ignored); None outside a git checkout."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=root, capture_output=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    files = (root / name for name in listed.decode().split("\0") if name)
    return sum(p.stat().st_size for p in files if p.is_file())


def size_report(folder: Path, root: Path) -> str:
    """The bundle's size by part, and with the working tree, against the device's limit."""
    mib = 1024 * 1024
    parts = {
        p.name: bundle.folder_bytes(p) if p.is_dir() else p.stat().st_size
        for p in sorted(folder.iterdir())
    }
    total = sum(parts.values())
    lines = [f"bundle {folder}: {total / mib:.2f} MiB"]
    lines += [f"  {name}: {size / mib:.2f} MiB" for name, size in parts.items()]
    tree = working_tree_bytes(root)
    if tree is not None:
        together = total + tree
        verdict = "fits" if together < bundle.LIMIT_BYTES else "DOES NOT FIT"
        lines.append(
            f"with the working tree ({tree / mib:.2f} MiB): {together / mib:.2f} MiB of "
            f"{bundle.LIMIT_BYTES / mib:.0f} MiB, {verdict}"
        )
    return "\n".join(lines)
