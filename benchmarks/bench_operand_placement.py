"""What the native kernels' speed owes to where their arrays sit: each cell with its operands
and result placed at chosen byte offsets, modulo the 64-byte line and the 4 KiB page.

    .venv/bin/python benchmarks/bench_operand_placement.py [--ops ...] [--log2n 22]

The 16-lane loops align their blocks to the result's lines, so an operand that starts at
another offset within a line is read with loads that each span two lines (unless the row runs
shifted: cxx/iteration.h's shifted_row); the cost also depends on whether the operand sits
just below or just above the result modulo 4 KiB. Where arrays sit is up to their producer:
ORT's arena puts a tensor on a line, numpy puts a fresh large array 16 bytes into one, and
glibc's heap, once the process has freed large arrays, puts consecutive ones 16 bytes apart.
Each placement puts grad_output, self, target and the result at slot k of one buffer (slots
on pages, 8 KiB apart; at 2^22 16 MiB + 8 KiB) plus the placement's byte offset for it; the
placements' runners bind the same inputs' values and take turns (bench_ort_native.best_times),
with a triad on lines beside them. Each figure is the placement's time over the "on lines" one's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_ort_native import (
    best_times,
    make_inputs,
    ort_runner,
    single_node_model,
    triad_runner,
)
from lossgrad_compiler import spec

SLOT_GAP = 8 << 10  # bytes between slots past the arrays: the slots keep their page offsets
# byte offsets of (grad_output, self, target, result) in their slots
PLACEMENTS: dict[str, tuple[int, int, int, int]] = {
    "on lines": (0, 0, 0, 0),
    "out +16": (0, 0, 0, 16),
    "out +48": (0, 0, 0, 48),
    "out +80": (0, 0, 0, 80),
    "out -16": (16, 16, 16, 0),  # numpy's inputs, a result from ORT's arena
    "out +1040": (0, 0, 0, 1040),
    "heap": (0, 16, 32, 48),  # consecutive arrays 16 bytes apart
}


def placed_arrays(
    inputs: dict[str, np.ndarray], offsets: tuple[int, int, int, int]
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Copies of the inputs and an empty result (self's shape and type), slot k of one buffer
    holding array k (spec.INPUT_NAMES, then the result) at its offset: every slot starts on a
    page, so that the offsets hold modulo the line and the page whatever the size."""
    slot = -(-inputs["self"].nbytes // 4096) * 4096 + SLOT_GAP
    raw = np.empty(4 * slot + max(offsets) + 4096, np.uint8)
    base = (-raw.ctypes.data) % 4096

    def at(k: int, like: np.ndarray) -> np.ndarray:
        start = base + k * slot + offsets[k]
        return raw[start : start + like.nbytes].view(like.dtype).reshape(like.shape)

    placed = {}
    for k, name in enumerate(spec.INPUT_NAMES):
        placed[name] = at(k, inputs[name])
        placed[name][...] = inputs[name]
    return placed, at(3, inputs["self"])


def placed_runner(
    model: object,
    inputs: dict[str, np.ndarray],
    offsets: tuple[int, int, int, int],
    threads: int,
    library: str | None = None,
):
    """The native kernel of `model` (from the JIT library, or `library`) on copies of
    `inputs` placed at `offsets`, and the result it writes."""
    placed, out = placed_arrays(inputs, offsets)
    run = ort_runner(model, placed, threads, library is None, library, out=out)
    return run, out


def placement_results(
    op: str, dtype: np.dtype, form: str, n: int, library: str | None = None
) -> dict[str, bytes]:
    """The result's bytes at each placement, for the tests: the same at every placement."""
    inputs = make_inputs(op, n, dtype, form=form)
    model = single_node_model(op, dtype, form)
    results = {}
    for name, offsets in PLACEMENTS.items():
        run, out = placed_runner(model, inputs, offsets, 1, library)
        run()
        results[name] = out.tobytes()
    return results


def measure(op: str, type_name: str, form: str, log2n: int, threads: int, budget: float):
    """Seconds per call at each placement, and of the triad beside them."""
    dtype = spec.float_type(type_name).dtype
    inputs = make_inputs(op, 1 << log2n, dtype, form=form)
    model = single_node_model(op, dtype, form)
    runners = {}
    for name, offsets in PLACEMENTS.items():
        runners[name] = placed_runner(model, inputs, offsets, threads)[0]
    runners["triad"] = triad_runner(1 << log2n, threads)
    return best_times(runners, budget=budget)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ops",
        nargs="+",
        default=["MseLossBackward", "SmoothL1LossBackward", "KlDivTargetBackward"],
    )
    parser.add_argument("--types", nargs="+", default=["float32"])
    parser.add_argument("--forms", nargs="+", default=["full", "0-d"])
    parser.add_argument("--log2n", type=int, default=22)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--budget", type=float, default=6.0, help="seconds per cell")
    args = parser.parse_args()
    width = max(len(op) for op in args.ops)
    header = f"{'op':{width}s} type     form thr  on lines ms " + " ".join(
        f"{name:>17s}" for name in list(PLACEMENTS)[1:]
    )
    print(f"2^{args.log2n} elements; each placement's time over the on-lines one's")
    print(header + "  triad ms")
    print("-" * (len(header) + 10))
    for op in args.ops:
        for type_name in args.types:
            for form in args.forms:
                best = measure(op, type_name, form, args.log2n, args.threads, args.budget)
                lined = best["on lines"]
                ratios = " ".join(f"{best[name] / lined:17.2f}" for name in list(PLACEMENTS)[1:])
                print(
                    f"{op:{width}s} {type_name:8s} {form:4s} {args.threads:3d} "
                    f"{lined * 1e3:11.3f} {ratios}  {best['triad'] * 1e3:8.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
