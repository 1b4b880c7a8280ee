"""Fusion: PyTorch-exported training steps unfused (the exporter's standard ops, stock ONNX
Runtime) against the same models fused into ai.lossgrad nodes (native kernels), and the
time the fusion pass itself takes on large exported graphs.

    .venv/bin/python benchmarks/bench_fuse.py [--quick]

The steps are what a user exports with lossgrad_compiler.torch (dynamic batch, the
exporter's own node names): per operator, the gradient of F.kl_div (log_target, batchmean)
with respect to the input or the target, or of F.smooth_l1_loss (mean, beta 0.5) with
respect to the input, over [batch, 1024] float32 tensors. Times are the minimum over repeated
runs (one process, sessions built once); "speedup" is unfused / fused.

The fusion-pass rows fuse one exported model holding K copies of the three steps side by
side with every node's name cleared (as many producers write them), at two sizes, so that the
growth from the smaller to the larger model shows whether the pass is linear.

The exporter's KlDivTargetBackward form, (s*(t - x))*exp(t) + s*exp(t), groups its
operations otherwise than the operator, so fuse() leaves it by default (docs/fusion.md);
this benchmark fuses it with reassociate=True (rows marked *, and the pass timing), as a
user who accepts results that may differ near overflow would.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_ort_native import best_time
from lossgrad_compiler import fuse
from lossgrad_compiler.evaluation.ort import session
from lossgrad_compiler.runtime.ort_io import run_session

try:
    import torch
    import torch.nn.functional as F

    from lossgrad_compiler.torch import export_training_step
except ImportError:
    sys.exit("bench_fuse needs PyTorch: pip install -e '.[torch]'")

WIDTH = 1024
STEPS = {
    "KlDivBackward": ("kl_div", "input"),
    "KlDivTargetBackward": ("kl_div", "target"),
    "SmoothL1LossBackward": ("smooth_l1", "input"),
}
REASSOCIATE = {"KlDivTargetBackward"}  # fused only with fuse(..., reassociate=True)


def step_for(loss: str, wrt: str) -> object:
    def step(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        x = x.detach().requires_grad_(wrt == "input")
        t = t.detach().requires_grad_(wrt == "target")
        if loss == "kl_div":
            value = F.kl_div(x, t, reduction="batchmean", log_target=True)
        else:
            value = F.smooth_l1_loss(x, t, reduction="mean", beta=0.5)
        return torch.autograd.grad(value, x if wrt == "input" else t)[0]

    return step


def exported(op: str) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """(unfused, fused) models of the op's step, batch dynamic."""
    example = (torch.randn(4, WIDTH), torch.randn(4, WIDTH) - 1.0)
    shapes = {"x": {0: "batch"}, "t": {0: "batch"}}
    step = step_for(*STEPS[op])
    unfused, _ = export_training_step(step, example, dynamic_shapes=shapes, fuse_gradients=False)
    fused, report = export_training_step(
        step, example, dynamic_shapes=shapes, reassociate=op in REASSOCIATE
    )
    if not report.fused:
        sys.exit(f"{op}: the exported step did not fuse: {report.lines()}")
    return unfused, fused


def run_table(sizes: list[int], threads: list[int]) -> None:
    print(f"onnxruntime {ort.__version__}, torch {torch.__version__}; times in ms")
    header = (
        f"{'op':<22} {'n':>5} {'thr':>3} {'nodes':>9} {'unfused':>9} {'fused':>8} {'speedup':>8}"
    )
    print(header)
    print("-" * len(header))
    for op in STEPS:
        unfused, fused = exported(op)
        nodes = f"{len(unfused.graph.node)}->{len(fused.graph.node)}"
        for log2n in sizes:
            rng = np.random.default_rng(0)
            batch = (1 << log2n) // WIDTH
            feeds = {
                "x": rng.normal(0, 1, (batch, WIDTH)).astype(np.float32),
                "t": (rng.normal(0, 1, (batch, WIDTH)) - 1.0).astype(np.float32),
            }
            for thr in threads:
                options = {"intra_op_num_threads": thr, "inter_op_num_threads": 1}
                plain = session(unfused, native=False, **options)
                native = session(fused, **options)
                a = run_session(plain, feeds)[0]
                b = run_session(native, feeds)[0]
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6 * np.abs(a).max())
                t_unfused = best_time(lambda s=plain, f=feeds: run_session(s, f))
                t_fused = best_time(lambda s=native, f=feeds: run_session(s, f))
                label = op + ("*" if op in REASSOCIATE else "")
                print(
                    f"{label:<22} {'2^' + str(log2n):>5} {thr:>3} {nodes:>9} "
                    f"{t_unfused * 1e3:>9.3f} {t_fused * 1e3:>8.3f} {t_unfused / t_fused:>8.2f}"
                )
    print("* fused with reassociate=True (the exporter's form groups operations otherwise)")


def many_steps(copies: int) -> onnx.ModelProto:
    """One model with `copies` × the three exported steps, every node unnamed."""
    parts = [exported(op)[0] for op in STEPS]
    graph = onnx.helper.make_graph([], "many", [], [])
    for k in range(copies):
        for j, part in enumerate(parts):
            prefix = f"c{k}s{j}_"
            renamed = onnx.compose.add_prefix(part, prefix)
            graph.node.extend(renamed.graph.node)
            graph.initializer.extend(renamed.graph.initializer)
            graph.input.extend(renamed.graph.input)
            graph.output.extend(renamed.graph.output)
    for node in graph.node:
        node.name = ""
    model = onnx.helper.make_model(graph, opset_imports=parts[0].opset_import)
    model.ir_version = parts[0].ir_version
    return model


def run_pass_timing(node_counts: list[int]) -> None:
    per_copy = len(many_steps(1).graph.node)
    print()
    print("fusion pass on exported graphs (three steps per copy, unnamed nodes, reassociate=True)")
    header = f"{'nodes':>8} {'fused':>6} {'seconds':>9} {'us/node':>8}"
    print(header)
    print("-" * len(header))
    previous = None
    for target in node_counts:
        model = many_steps(max(1, target // per_copy))
        start = time.perf_counter()
        _, report = fuse(model, reassociate=True)
        seconds = time.perf_counter() - start
        nodes = len(model.graph.node)
        growth = "" if previous is None else f"  ({seconds / previous[1]:.1f}x the time for "
        growth += "" if previous is None else f"{nodes / previous[0]:.1f}x the nodes)"
        rate = seconds / nodes * 1e6
        print(f"{nodes:>8} {len(report.fused):>6} {seconds:>9.3f} {rate:>8.1f}{growth}")
        previous = (nodes, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2^20 only, 1 thread, 1k nodes")
    args = parser.parse_args()
    if args.quick:
        run_table([20], [1])
        run_pass_timing([1000])
    else:
        run_table([20, 22], [1, 2])
        run_pass_timing([1000, 10000])


if __name__ == "__main__":
    main()
