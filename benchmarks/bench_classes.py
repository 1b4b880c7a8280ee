"""The classification operators' native kernels against PyTorch eager, IREE on the same
level 2, and a triad moving the same bytes, at a language-model shape and a small one.

    .venv/bin/python benchmarks/bench_classes.py [--quick] [--ops NLLLossBackward] [--threads 1]

Per cell (operator, [N, C], element type): the runners take turns (alternating, each turn a
burst whose first call is not counted, as bench_ort_native.best_times does), and each
ratio is the median over the rounds of that round's ratio, so that a drift of the machine
meets every runner alike. The native runner is the kernel library in an ONNX Runtime
session (a single-node model with symbolic dims, the node unnamed, as exporters write it);
PyTorch's is `torch.ops.aten.nll_loss_backward`, the kernel autograd runs for F.nll_loss's
backward (given the forward's total weight); IREE's is the same level 2 compiled for
llvm-cpu (local-task). The triad a[i] = b[i] + s*c[i] on float32 moves the bytes the
operator must move (its result written, target, weight and the one-element inputs read).
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
from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.runtime.ort import session_options
from lossgrad_compiler.runtime.ort_io import to_ort_value
from lossgrad_compiler.targets.ort_library import native_library

SHAPES = ((4096, 32000), (256, 10))
DTYPES = (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16))
NAMES = {"grad_output": "go", "self": "x", "target": "t", "total_weight": "tw", "weight": "w"}
Runner = Callable[[], object]


def make_inputs(op: str, shape: tuple[int, int], dtype: np.dtype) -> dict[str, np.ndarray]:
    """A mean call with a weight and some ignored rows, every array on a cache line."""
    rng = np.random.default_rng(0)
    n, c = shape
    target = rng.integers(0, c, n)
    target[::7] = -100
    weight = rng.uniform(0.5, 1.5, c)
    kept = target[target != -100]
    arrays = {
        "grad_output": np.array(1.0),
        "self": rng.standard_normal(shape),
        "target": target,
        "total_weight": np.array(weight[kept].sum()),
        "weight": weight,
    }
    return {
        k: on_lines(v.astype(np.int64 if k == "target" else dtype)) for k, v in arrays.items()
    }


def model(op: str, dtype: np.dtype) -> bytes:
    t = spec.float_type(dtype)
    assert t is not None
    inputs = [
        ("go", t.name, ()),
        ("x", t.name, ("N", "C")),
        ("t", "int64", ("N",)),
        ("tw", t.name, ()),
        ("w", t.name, ("C",)),
    ]
    node = lo.make_node(op, ["go", "x", "t", "tw", "w"], "out", name="")
    graph = lo.make_graph([node], inputs, ["out"], name="bench")
    return lo.make_model(graph).SerializeToString()


def native_runner(op: str, inputs: dict[str, np.ndarray], threads: int) -> Runner:
    so = session_options(native_library(), intra_op_num_threads=threads, inter_op_num_threads=1)
    sess = pinned_session(model(op, inputs["self"].dtype), so, threads)
    binding = sess.io_binding()
    for key, name in NAMES.items():
        binding.bind_ortvalue_input(name, to_ort_value(inputs[key]))
    out = on_lines(np.empty_like(inputs["self"]))
    binding.bind_ortvalue_output("out", to_ort_value(out))
    return lambda: sess.run_with_iobinding(binding)


def torch_runner(inputs: dict[str, np.ndarray], threads: int) -> Runner | None:
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

    def run() -> object:
        return torch.ops.aten.nll_loss_backward(
            args["grad_output"], args["self"], args["target"], args["weight"], mean, -100,
            args["total_weight"],
        )  # fmt: skip

    return run


def iree_runner(op: str, inputs: dict[str, np.ndarray], threads: int) -> Runner | None:
    config = iree_config(threads)
    if config is None:
        return None
    import iree.runtime as rt

    from lossgrad_compiler.backends.iree import compile_module
    from lossgrad_compiler.frontend.lowering import lower_signatures
    from lossgrad_compiler.frontend.signature import signature_of

    infos = {k: spec.TensorInfo(v.dtype, v.shape) for k, v in inputs.items()}
    sig = signature_of(spec.validate(op, infos, {"reduction": "mean"}))
    context = rt.SystemContext(config=config)
    path = compile_module(lower_signatures([sig]))
    context.add_vm_module(rt.VmModule.mmap(config.vm_instance, str(path)))  # type: ignore[attr-defined]
    function = context.modules.module[sig.id]
    device = config.device  # type: ignore[attr-defined]
    args = [rt.asdevicearray(device, inputs[n]) for n in sig.present]
    return lambda: function(*args)


def moved_bytes(inputs: dict[str, np.ndarray]) -> int:
    """What the operator must move: its result written and every input but self read."""
    return inputs["self"].nbytes + sum(v.nbytes for k, v in inputs.items() if k != "self")


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


def cell_row(op: str, shape: tuple[int, int], dtype: np.dtype, threads: int, rounds: int) -> str:
    """One cell's row of the table."""
    inputs = make_inputs(op, shape, dtype)
    runners: dict[str, Runner] = {"native": native_runner(op, inputs, threads)}
    for name, found in (
        ("torch", torch_runner(inputs, threads)),
        ("iree", iree_runner(op, inputs, threads)),
    ):
        if found is not None:
            runners[name] = found
    runners["triad"] = triad_runner(moved_bytes(inputs) // 12 + 1, threads)
    times = measure(runners, rounds)
    ms = {n: f"{statistics.median(t) * 1e3:.3f}" for n, t in times.items()}
    ratios = {n: f"{median_ratio(times, n):.2f}" for n in times}
    cells = [ms.get(n, "-") for n in ("native", "torch", "iree", "triad")]
    cells += [ratios.get(n, "-") for n in ("torch", "iree", "triad")]
    return f"| {op} | {shape[0]} x {shape[1]} | {dtype.name} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", nargs="*", default=list(spec.CLASS_OPERATORS)[:1])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 5 if args.quick else 15
    header = (
        "| op | N x C | type | native ms | PyTorch ms | IREE ms | triad ms | x PyTorch "
        "| x IREE | x triad |"
    )
    print(header)
    print("| --- " * (header.count("|") - 1) + "|")
    for op in args.ops:
        for shape in SHAPES:
            for dtype in DTYPES:
                print(cell_row(op, shape, dtype, args.threads, rounds), flush=True)


if __name__ == "__main__":
    main()
