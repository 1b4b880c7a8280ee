"""The standard-ONNX compilation of the three operators: run time in stock ONNX Runtime against
the numpy reference and PyTorch autograd, and compile time by model size.

    .venv/bin/python benchmarks/bench_onnx_backend.py [--quick]

Run time: float32, reduction "mean", a 0-d grad_output, self and target of n elements; the
compiled `functions` model (ORT inlines the body; `inline` mode gives the same graph). Each
figure is the minimum over repeated calls (other jobs share the machine: minima are stable,
medians are not). numpy runs single-threaded; torch uses as many threads as ORT.

Compile time: models with 1, 100 and 10,000 identical ai.lossgrad nodes, cold (empty cache of
compiled signatures), through compile_model, in both output modes; wall time and the
process's CPU time (compiling is single-threaded, so on a busy machine the CPU time is what
the wall time would be on an idle one).

Inline scaling (`--inline-scaling` prints only this table): inline mode for 1,000 to 10,000
identical nodes, named and unnamed (exporters often leave nodes unnamed, and each unnamed
node's values are then named after its operator): the CPU time per node stays flat when
the compile time is linear in the number of nodes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import reference
from lossgrad_compiler.driver import clear_cache, compile_model
from lossgrad_compiler.runtime.ort_io import make_session, to_ort_value

OPS = ("KlDivBackward", "KlDivTargetBackward", "SmoothL1LossBackward")
ATTRS = {
    "KlDivBackward": {"reduction": "mean", "log_target": 0},
    "KlDivTargetBackward": {"reduction": "mean", "log_target": 0},
    "SmoothL1LossBackward": {"reduction": "mean", "beta": 1.0},
}
SIZES = (2**16, 2**20, 2**22, 2**24)
NODE_COUNTS = (1, 100, 10_000)
SCALING_COUNTS = (1_000, 2_000, 4_000, 10_000)


def best_time(run: Callable[[], object], budget: float, min_runs: int = 3) -> float:
    """Minimum seconds per call over at least `min_runs` calls and about `budget` seconds."""
    run()  # warm-up: allocation, page faults, lazy initialisation
    best, runs, start = float("inf"), 0, time.perf_counter()
    while runs < min_runs or (time.perf_counter() - start < budget and runs < 100):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best


def make_inputs(op: str, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    positive = op == "KlDivTargetBackward"
    target = rng.uniform(0.05, 3.0, n) if positive else rng.normal(0.0, 1.0, n)
    return {
        "grad_output": np.array(1.0, np.float32),
        "self": rng.normal(0.0, 1.0, n).astype(np.float32),
        "target": target.astype(np.float32),
    }


def op_model(op: str, count: int = 1, named: bool = True) -> object:
    """`count` identical nodes reading go, x, t (n elements, symbolic); `named` n0, n1, ...
    or left without names."""
    nodes = [
        lo.make_node(op, ["go", "x", "t"], f"g{i}", name=f"n{i}" if named else None, **ATTRS[op])
        for i in range(count)
    ]
    inputs = [("go", "float32", []), ("x", "float32", ["n"]), ("t", "float32", ["n"])]
    outputs = [(f"g{i}", "float32", ["n"]) for i in range(count)]
    return lo.make_model(lo.make_graph(nodes, inputs, outputs))


def onnx_runner(op: str, inputs: dict[str, np.ndarray], threads: int) -> Callable[[], object]:
    session = make_session(compile_model(op_model(op)).model, threads)
    feeds = {k: to_ort_value(v) for k, v in zip(("go", "x", "t"), inputs.values(), strict=True)}
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, value)
    binding.bind_output("g0")

    def run() -> None:
        session.run_with_iobinding(binding)

    return run


def numpy_runner(op: str, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
    def run() -> None:
        reference.evaluate(op, inputs, ATTRS[op])

    return run


def torch_runner(op: str, inputs: dict[str, np.ndarray], threads: int) -> Callable[[], object]:
    """The backward of the loss alone (forward built once, graph retained)."""
    import warnings

    import torch
    import torch.nn.functional as F

    warnings.filterwarnings("ignore", message="reduction: 'mean' divides")  # kl_div's notice
    torch.set_num_threads(threads)
    x = torch.from_numpy(inputs["self"]).requires_grad_(op != "KlDivTargetBackward")
    t = torch.from_numpy(inputs["target"]).requires_grad_(op == "KlDivTargetBackward")
    if op == "SmoothL1LossBackward":
        loss = F.smooth_l1_loss(x, t, reduction="mean", beta=ATTRS[op]["beta"])
    else:
        loss = F.kl_div(x, t, reduction="mean", log_target=False)
    wrt = t if op == "KlDivTargetBackward" else x
    go = torch.from_numpy(inputs["grad_output"])

    def run() -> None:
        torch.autograd.grad(loss, wrt, go, retain_graph=True)

    return run


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def run_time_table(sizes: tuple[int, ...], budget: float) -> list[str]:
    with_torch = torch_available()
    header = "| op | n | threads | ONNX (ms) | numpy reference (ms) | "
    header += "torch autograd (ms) |" if with_torch else "torch |"
    lines = [header, "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for op in OPS:
        for n in sizes:
            inputs = make_inputs(op, n)
            numpy_ms = 1e3 * best_time(numpy_runner(op, inputs), budget)
            for threads in (1, 2):
                onnx_ms = 1e3 * best_time(onnx_runner(op, inputs, threads), budget)
                torch_ms = (
                    f"{1e3 * best_time(torch_runner(op, inputs, threads), budget):.2f}"
                    if with_torch
                    else "not installed"
                )
                numpy_cell = f"{numpy_ms:.2f}" if threads == 1 else "(1 thread)"
                lines.append(
                    f"| {op} | 2^{n.bit_length() - 1} | {threads} | {onnx_ms:.2f} | "
                    f"{numpy_cell} | {torch_ms} |"
                )
    return lines


def compile_time_table(counts: tuple[int, ...]) -> list[str]:
    lines = [
        "| nodes | mode | signatures compiled | compile wall time (s) | compile CPU time (s) |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    for count in counts:
        model = op_model("SmoothL1LossBackward", count)
        for mode in ("functions", "inline"):
            clear_cache()
            start, cpu = time.perf_counter(), time.process_time()
            result = compile_model(model, mode=mode)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            compiled = len(result.report.compiled)
            lines.append(f"| {count} | {mode} | {compiled} | {seconds:.3f} | {cpu:.3f} |")
    return lines


def inline_scaling_table(counts: tuple[int, ...]) -> list[str]:
    lines = [
        "| nodes | node names | compile wall time (s) | compile CPU time (s) | CPU µs per node |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    for count in counts:
        for named in (True, False):
            model = op_model("SmoothL1LossBackward", count, named)
            clear_cache()
            start, cpu = time.perf_counter(), time.process_time()
            compile_model(model, mode="inline")
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            names = "n0, n1, ..." if named else "none"
            lines.append(
                f"| {count} | {names} | {seconds:.3f} | {cpu:.3f} | {1e6 * cpu / count:.0f} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^16 and 2^20 only, short runs")
    parser.add_argument(
        "--inline-scaling",
        action="store_true",
        help="only the inline compile time of 1,000-10,000 named and unnamed nodes",
    )
    args = parser.parse_args()
    if args.inline_scaling:
        print("\n".join(inline_scaling_table(SCALING_COUNTS)))
        return
    sizes = SIZES[:2] if args.quick else SIZES
    print("\n".join(compile_time_table(NODE_COUNTS)))
    print()
    print("\n".join(run_time_table(sizes, budget=0.2 if args.quick else 1.0)))


if __name__ == "__main__":
    main()
