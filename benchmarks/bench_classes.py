"""The classification operators' native kernels against PyTorch eager, IREE on the same
level 2, and a triad moving the same bytes, at a language-model shape and a small one.

    .venv/bin/python benchmarks/bench_classes.py [--quick] [--ops CrossEntropyLossGrad]
        [--threads 1] [--label-smoothing 0.1]

Per cell (operator, [N, C], element type): the runners take turns (alternating, each turn a
burst whose first call is not counted, as bench_ort_native.best_times does), and each
ratio is the median over the rounds of that round's ratio, so that a drift of the machine
meets every runner alike. The native runner is the kernel library in an ONNX Runtime
session (a single-node model with symbolic dims, the node unnamed, as exporters write it);
PyTorch's is its eager backward: for NLL `torch.ops.aten.nll_loss_backward`, the kernel
autograd runs for F.nll_loss's backward (given the forward's total weight), for
CrossEntropyLossGrad autograd's backward of F.cross_entropy on a recorded graph (the
log-probabilities saved, the forward not timed); IREE's is the same level 2 compiled for
llvm-cpu (local-task). The triad a[i] = b[i] + s*c[i] on float32 moves the bytes the
operator must move (its result written and every input its formula reads: NLL never reads
self, cross entropy does).

Below the table, each cell of the large shape with its goals (x PyTorch >= 2, x IREE >= 1,
x triad >= 0.8), and for a triad goal not met the reason from this run's own figures: the
kernel's time per element with its data in cache (the difference between 2 and 32 rows of
the same classes) against what the goal allows, compute-bound where the arithmetic alone
already costs more.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_ort_native import (
    iree_config,
    on_lines,
    pinned_session,
    triad_runner,
    turn,
    warm_up,
)
from benchmarks.class_inputs import SHAPES, class_attributes, class_inputs
from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.runtime.ort import session_options
from lossgrad_compiler.runtime.ort_io import to_ort_value
from lossgrad_compiler.targets.ort_library import native_library

DTYPES = (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16))
NAMES = {"grad_output": "go", "self": "x", "target": "t", "total_weight": "tw", "weight": "w"}
Runner = Callable[[], object]
LARGE = SHAPES[0]
GOALS = {"torch": 2.0, "iree": 1.0, "triad": 0.8}
"""At the large shape: at least 2x PyTorch's speed, IREE's, and 0.8 of the triad's."""
IN_CACHE_ROWS = (2, 32)
"""Rows of the large shape's classes whose data stay in cache (8 MiB at most)."""


def make_inputs(op: str, shape: tuple[int, int], dtype: np.dtype) -> dict[str, np.ndarray]:
    """class_inputs' call, every array on a cache line."""
    return {k: on_lines(v) for k, v in class_inputs(op, shape, dtype).items()}


def model(op: str, inputs: dict[str, np.ndarray], attrs: dict[str, object]) -> bytes:
    t = spec.float_type(inputs["self"].dtype)
    assert t is not None
    shapes = {"grad_output": (), "self": ("N", "C"), "target": ("N",), "total_weight": ()}
    declared = [
        (NAMES[k], "int64" if k == "target" else t.name, shapes.get(k, ("C",))) for k in inputs
    ]
    node = lo.make_node(op, [NAMES[k] for k in inputs], "out", name="", **attrs)
    graph = lo.make_graph([node], declared, ["out"], name="bench")
    return lo.make_model(graph).SerializeToString()


def native_runner(
    op: str, inputs: dict[str, np.ndarray], attrs: dict[str, object], threads: int
) -> Runner:
    so = session_options(native_library(), intra_op_num_threads=threads, inter_op_num_threads=1)
    sess = pinned_session(model(op, inputs, attrs), so, threads)
    binding = sess.io_binding()
    for key, value in inputs.items():
        binding.bind_ortvalue_input(NAMES[key], to_ort_value(value))
    out = on_lines(np.empty_like(inputs["self"]))
    binding.bind_ortvalue_output("out", to_ort_value(out))
    return lambda: sess.run_with_iobinding(binding)


def torch_runner(
    op: str, inputs: dict[str, np.ndarray], attrs: dict[str, object], threads: int
) -> Runner | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)

    def tensor(a: np.ndarray) -> object:
        if a.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
        return torch.from_numpy(a)

    args = {k: tensor(v) for k, v in inputs.items()}
    mean = 1  # at::Reduction::Mean
    if op == spec.CROSS_ENTROPY_LOSS_GRAD.name:
        return cross_entropy_backward(args, float(attrs["label_smoothing"]))  # type: ignore[arg-type]

    def run() -> object:
        return torch.ops.aten.nll_loss_backward(
            args["grad_output"], args["self"], args["target"], args["weight"], mean, -100,
            args["total_weight"],
        )  # fmt: skip

    return run


def cross_entropy_backward(args: dict[str, object], label_smoothing: float) -> Runner:
    """Autograd's backward of F.cross_entropy on a recorded graph: the logits are the
    log-probabilities themselves (log_softmax of a log_softmax is itself), and the graph
    keeps the log_softmax output that the backward reads."""
    import torch
    import torch.nn.functional as F

    logits = args["self"].clone().requires_grad_(True)  # type: ignore[attr-defined]
    loss = F.cross_entropy(
        logits, args["target"], weight=args["weight"], ignore_index=-100,  # type: ignore[arg-type]
        label_smoothing=label_smoothing,
    )  # fmt: skip
    seed = args["grad_output"]

    def run() -> object:
        return torch.autograd.grad(loss, logits, seed, retain_graph=True)

    return run


def iree_runner(
    op: str, inputs: dict[str, np.ndarray], attrs: dict[str, object], threads: int
) -> Runner | None:
    config = iree_config(threads)
    if config is None:
        return None
    import iree.runtime as rt

    from lossgrad_compiler.backends.iree import compile_module
    from lossgrad_compiler.frontend.lowering import lower_signatures
    from lossgrad_compiler.frontend.signature import signature_of

    infos = {k: spec.TensorInfo(v.dtype, v.shape) for k, v in inputs.items()}
    sig = signature_of(spec.validate(op, infos, attrs))
    context = rt.SystemContext(config=config)
    path = compile_module(lower_signatures([sig]))
    context.add_vm_module(rt.VmModule.mmap(config.vm_instance, str(path)))  # type: ignore[attr-defined]
    function = context.modules.module[sig.id]
    device = config.device  # type: ignore[attr-defined]
    args = [rt.asdevicearray(device, inputs[n]) for n in sig.present]
    return lambda: function(*args)


def moved_bytes(op: str, inputs: dict[str, np.ndarray]) -> int:
    """What the operator must move: its result written and every input its formula reads
    (NLL's never reads self)."""
    reads_self = "total_weight" not in spec.operator(op).input_names
    read = sum(v.nbytes for k, v in inputs.items() if k != "self" or reads_self)
    return inputs["self"].nbytes + read


def measure(runners: dict[str, Runner], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each runner, one figure per round, the runners alternating."""
    warm_up(runners)
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            times[name].append(turn(run, burst=3, pause=0.02))
    return times


def median_ratio(times: dict[str, list[float]], over: str, of: str = "native") -> float:
    """The median over rounds of time(over) / time(of): > 1 means `of` is faster."""
    return statistics.median(a / b for a, b in zip(times[over], times[of], strict=True))


def in_cache_ns(
    op: str, classes: int, dtype: np.dtype, attrs: dict[str, object], threads: int, rounds: int
) -> float:
    """Nanoseconds per element the native kernel adds between IN_CACHE_ROWS rows of
    `classes`: both calls' data stay in cache, and the difference cancels a call's fixed
    cost, so what is left is the kernel's arithmetic per element."""
    runners = {
        str(rows): native_runner(op, make_inputs(op, (rows, classes), dtype), attrs, threads)
        for rows in IN_CACHE_ROWS
    }
    times = measure(runners, rounds)
    small, large = (statistics.median(times[str(rows)]) for rows in IN_CACHE_ROWS)
    return (large - small) * 1e9 / ((IN_CACHE_ROWS[1] - IN_CACHE_ROWS[0]) * classes)


def verdicts(ratios: dict[str, float]) -> list[str]:
    """Each goal of the large shape as `x triad 0.19 < 0.8 NO` or `... ok`."""
    found = []
    for name, goal in GOALS.items():
        if name in ratios:
            met = ratios[name] >= goal
            found.append(f"x {name} {ratios[name]:.2f} {'>=' if met else '<'} {goal} "
                         f"{'ok' if met else 'NO'}")  # fmt: skip
    return found


def triad_reason(native_ns: float, ratio: float, cached_ns: float) -> str:
    """Why x triad is below its goal, from this run's figures: compute-bound when the
    kernel's arithmetic alone, in cache, already costs what the goal allows per element
    (the triad's time over the goal); else the time is lost moving the data."""
    allowed = native_ns * ratio / GOALS["triad"]
    cache = f"in cache ({IN_CACHE_ROWS[0]} and {IN_CACHE_ROWS[1]} rows)"
    if cached_ns >= allowed:
        return f"compute-bound: {cached_ns:.2f} ns/element {cache}, the goal allows {allowed:.2f}"
    return (
        f"memory: {native_ns:.2f} ns/element here against {cached_ns:.2f} {cache}; the goal "
        f"allows {allowed:.2f}"
    )


def cell_row(
    op: str,
    shape: tuple[int, int],
    dtype: np.dtype,
    threads: int,
    rounds: int,
    label_smoothing: float = 0.0,
) -> tuple[str, list[str]]:
    """One cell's row of the table, and at the large shape its goals (with the reason for a
    triad goal not met)."""
    inputs = make_inputs(op, shape, dtype)
    attrs = class_attributes(op, label_smoothing)
    runners: dict[str, Runner] = {"native": native_runner(op, inputs, attrs, threads)}
    for name, found in (
        ("torch", torch_runner(op, inputs, attrs, threads)),
        ("iree", iree_runner(op, inputs, attrs, threads)),
    ):
        if found is not None:
            runners[name] = found
    runners["triad"] = triad_runner(moved_bytes(op, inputs) // 12 + 1, threads)
    times = measure(runners, rounds)
    ms = {n: f"{statistics.median(t) * 1e3:.3f}" for n, t in times.items()}
    ratios = {n: median_ratio(times, n) for n in times if n != "native"}
    cells = [ms.get(n, "-") for n in ("native", "torch", "iree", "triad")]
    cells += [f"{ratios[n]:.2f}" if n in ratios else "-" for n in ("torch", "iree", "triad")]
    row = f"| {op} | {shape[0]} x {shape[1]} | {dtype.name} | " + " | ".join(cells) + " |"
    if shape != LARGE:
        return row, []
    goals = verdicts(ratios)
    if ratios["triad"] < GOALS["triad"]:
        native_ns = statistics.median(times["native"]) * 1e9 / (shape[0] * shape[1])
        cached = in_cache_ns(op, shape[1], dtype, attrs, threads, rounds)
        goals.append(triad_reason(native_ns, ratios["triad"], cached))
    return row, [f"- {op} {shape[0]} x {shape[1]} {dtype.name}: " + "; ".join(goals)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", nargs="*", default=[spec.CROSS_ENTROPY_LOSS_GRAD.name])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 5 if args.quick else 15
    header = (
        "| op | N x C | type | native ms | PyTorch ms | IREE ms | triad ms | x PyTorch "
        "| x IREE | x triad |"
    )
    print(header)
    print("| --- " * (header.count("|") - 1) + "|")
    notes: list[str] = []
    for op in args.ops:
        for shape in SHAPES:
            for dtype in DTYPES:
                row, found = cell_row(op, shape, dtype, args.threads, rounds, args.label_smoothing)
                print(row, flush=True)
                notes += found
    print(f"\nGoals at {LARGE[0]} x {LARGE[1]}:")
    print("\n".join(notes))


if __name__ == "__main__":
    main()
