"""Native ORT kernels against the ONNX function path, PyTorch eager backward, IREE and a
STREAM-like triad, for every operator × element type × grad_output form × size × thread
count, in one run, with the goals of each cell reported as met or not.

    .venv/bin/python benchmarks/bench_ort_native.py [--quick] [--plot docs/native_bandwidth.png]

Each figure is the minimum over repeated runs, and the runners of a cell (native, function
path, PyTorch, IREE and the triad) take turns, round robin, for --seconds (3 by default), so
that each meets the same machine: other jobs share it, and its bandwidth drifts over seconds
(docs/benchmarks.md, "Native ORT kernels"). Each thread count
runs in a child process, because IREE fixes its worker count when its device starts. Every
array starts on a 64-byte line (on_lines), as ORT's arena, IREE and PyTorch place theirs. Forms:
"0-d" is reduction mean with a 0-d grad_output; "full" is reduction none with a grad_output
of self's shape (three tensors read, one written, like autograd's unreduced loss). GB/s
counts the bytes the operator must move (the tensors it reads and writes: KlDivBackward
never reads self); "x triad" is that rate as a fraction of the triad a[i] = b[i] + s*c[i]
(float32) measured beside it with the same compiler and thread count, its threads on the CPUs
an ORT runner's take (thread_cpus). Goals: at least 0.9 of
the triad at >= 2^22 (0.8 for KlDivTargetBackward), faster than PyTorch, at least as fast as
IREE; and per call at 16 elements at most 1.2x an ORT Mul of the same size. Each goal not
met is listed with its reason, taken from the run itself: a runner's cost per element in
cache (the difference between its 2^16 and 2^20 times, which cancels the fixed cost of a
call) against what the goal allows.

--prebuilt adds the platform wheel's prebuilt library for this CPU (the installed one, or
built here as the wheel build does) as another runner of each cell, with its time over the
JIT build's ("pre/jit"; the goal: at most 1.10 at >= 2^22).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.backends.build_cache import cache_root
from lossgrad_compiler.backends.ort.build import build_shared_library, toolchain
from lossgrad_compiler.backends.ort.prebuilt import (
    build_prebuilt,
    prebuilt_library,
    prebuilt_present,
)
from lossgrad_compiler.evaluation.ort import prepare_model
from lossgrad_compiler.runtime.ort import session_options
from lossgrad_compiler.runtime.ort_io import to_ort_value
from lossgrad_compiler.targets.ort_library import kernel_library_source, native_library

FAMILY = (
    "MseLossBackward",
    "HuberLossBackward",
    "SoftMarginLossBackward",
    "BinaryCrossEntropyBackward",
    "BinaryCrossEntropyWithLogitsBackward",
    "L1LossBackward",
)
OPS = ("KlDivBackward", "SmoothL1LossBackward", "KlDivTargetBackward", *FAMILY)
ATTRS = {
    "KlDivBackward": {"reduction": "mean", "log_target": 0},
    "KlDivTargetBackward": {"reduction": "mean", "log_target": 0},
    "SmoothL1LossBackward": {"reduction": "mean", "beta": 0.5},
    "HuberLossBackward": {"reduction": "mean", "delta": 1.0},
    **{op: {"reduction": "mean"} for op in FAMILY if op != "HuberLossBackward"},
}
# tensors of n elements read and written with a 0-d grad_output: KL reads only target
STREAMS = {"KlDivBackward": 2, **{op: 3 for op in OPS if op != "KlDivBackward"}}
FORMS = ("0-d", "full")  # grad_output 0-d with reduction mean, or of self's shape with none
# KL-target's log makes it compute-bound in the half types (docs/benchmarks.md): for those
# cells the goal that counts is IREE's speed
TRIAD_GOAL = {op: 0.8 if op == "KlDivTargetBackward" else 0.9 for op in OPS}
COMPUTE_BOUND = {"KlDivTargetBackward": ("float16", "bfloat16")}
OP_WIDTH = max(len(op) for op in OPS)  # the table's first column
TRIAD_GOAL_FROM = 22  # log2 n from which the triad goal applies
IN_CACHE = (16, 20)  # log2 n of two sizes whose data stay in cache (at most 16 MiB)
CELL_SECONDS = 3.0  # the runners' turns per cell (best_times' budget)
PREBUILT_GOAL = 1.10  # the prebuilt library's time over the JIT build's, at >= 2^22


def attrs_for(op: str, form: str = "0-d") -> dict:
    return ATTRS[op] if form == "0-d" else {**ATTRS[op], "reduction": "none"}


def streams(op: str, form: str = "0-d") -> int:
    """Tensors of n elements the operator reads and writes."""
    return STREAMS[op] + (form == "full")


# Thread t (the calling thread is 0) computes part t of the arrays. Where `cpus` is given,
# thread t >= 1 starts on cpus[t] (the caller is held on cpus[0] by on_its_cpus), as an ORT
# runner's pool threads sit, so that each part meets the same core, and its caches, every
# call; it is placed before it starts, since a thread created with the caller's one CPU waits
# behind the caller until it moves. `affinity`, where given, receives each thread's CPUs as a
# bit mask (the tests read it).
TRIAD_SOURCE = r"""
#include <pthread.h>
#include <sched.h>
#include <cstdint>
#include <vector>
namespace {
struct Part {
  float* a;
  const float* b;
  const float* c;
  float s;
  int64_t begin, end;
  uint64_t* affinity;  // this thread's slot, or null
};
void* run_part(void* arg) {
  const Part& p = *static_cast<const Part*>(arg);
  if (p.affinity != nullptr) {
    cpu_set_t set;
    CPU_ZERO(&set);
    pthread_getaffinity_np(pthread_self(), sizeof set, &set);
    *p.affinity = 0;
    for (int cpu = 0; cpu < 64; ++cpu)
      if (CPU_ISSET(cpu, &set)) *p.affinity |= uint64_t{1} << cpu;
  }
  for (int64_t i = p.begin; i < p.end; ++i) p.a[i] = p.b[i] + p.s * p.c[i];
  return nullptr;
}
}  // namespace
extern "C" __attribute__((visibility("default")))
void triad(float* a, const float* b, const float* c, float s, int64_t n, int threads,
           const int* cpus, uint64_t* affinity) {
  const int64_t step = (n + threads - 1) / threads;
  std::vector<Part> parts;
  for (int t = 0; t < threads; ++t)
    parts.push_back({a, b, c, s, t * step < n ? t * step : n,
                     (t + 1) * step < n ? (t + 1) * step : n,
                     affinity != nullptr ? affinity + t : nullptr});
  std::vector<pthread_t> pool(threads);
  for (int t = 1; t < threads; ++t) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (cpus != nullptr) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus[t], &set);
      pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    }
    pthread_create(&pool[t], &attr, run_part, &parts[t]);
    pthread_attr_destroy(&attr);
  }
  run_part(&parts[0]);
  for (int t = 1; t < threads; ++t) pthread_join(pool[t], nullptr);
}
"""


# The CPUs this process may run on, and where an ORT runner's threads go. ORT pins none of its
# intra-op pool threads unless told, and the benchmark holds several sessions (native, function
# path, prebuilt), each with its own pool: unpinned, a session's pool thread can share a CPU
# with the calling thread, and a 2-thread time then measures that sharing (docs/benchmarks.md,
# "Native ORT kernels").
ALL_CPUS = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()


def thread_cpus(threads: int) -> list[int] | None:
    """The CPU of each of a runner's threads, the calling thread's first, each its own: None
    where this process has fewer CPUs than threads, or where the platform cannot pin."""
    cpus = sorted(ALL_CPUS)
    return cpus[:threads] if len(cpus) >= max(threads, 1) else None


def ort_cpus(threads: int) -> tuple[frozenset[int], str | None]:
    """The CPU that holds an ORT runner's calling thread, and the affinities of its pool
    threads (ORT numbers processors from 1), as thread_cpus places them."""
    placed = thread_cpus(threads)
    if placed is None:
        return ALL_CPUS, None
    pool = ";".join(str(cpu + 1) for cpu in placed[1:])
    return frozenset(placed[:1]), pool or None


def on_its_cpus(run: Callable[[], object]) -> None:
    """Hold the calling thread where `run` wants it (an ORT runner: its CPU; others: any)."""
    if ALL_CPUS:
        os.sched_setaffinity(0, getattr(run, "main_cpus", ALL_CPUS))


def best_time(run: Callable[[], object], budget: float = 1.0, min_runs: int = 3) -> float:
    """Minimum seconds per call over repeated calls within about `budget` seconds."""
    on_its_cpus(run)
    run()  # warm up (allocations, page faults, lazy initialisation)
    best = float("inf")
    start = time.perf_counter()
    runs = 0
    while runs < min_runs or (time.perf_counter() - start < budget and runs < 200):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best


def best_times(
    runners: dict[str, Callable[[], object]],
    budget: float = 3.0,
    min_rounds: int = 3,
    burst: int = 3,
    pause: float = 0.02,
) -> dict[str, float]:
    """Minimum seconds per call of each runner, the runners taking turns (round robin) for
    about `budget` seconds: on a shared machine the bandwidth drifts over seconds, and runners
    measured one after another would each meet a different machine. Each turn is a burst of
    calls whose first is not counted, so that a runner's data are as warm in cache as when it
    runs alone (the others' turns evict them). A pause follows each turn: ORT's and the other
    runtimes' pool threads spin for a while after a call and would take the next runner's
    second core. Each turn starts with the calling thread on the runner's CPUs (on_its_cpus)."""
    warm_up(runners)
    best = dict.fromkeys(runners, float("inf"))
    start = time.perf_counter()
    rounds = 0
    while rounds < min_rounds or (time.perf_counter() - start < budget and rounds < 200):
        for name, run in runners.items():
            best[name] = min(best[name], turn(run, burst, pause))
        rounds += 1
    return best


def warm_up(runners: dict[str, Callable[[], object]]) -> None:
    """One call of each runner on its CPUs: allocations, page faults, lazy initialisation."""
    for run in runners.values():
        on_its_cpus(run)
        run()


def turn(run: Callable[[], object], burst: int, pause: float) -> float:
    """One runner's turn, as best_times takes it: on its CPUs, a burst of calls whose first is
    not counted, then a pause. Returns the fastest counted call's seconds."""
    on_its_cpus(run)
    run()
    best = float("inf")
    for _ in range(burst - 1):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    time.sleep(pause)
    return best


LINE = 64  # bytes in a cache line, and ORT's CPU arena alignment


def on_lines(array: np.ndarray, offset: int = 0) -> np.ndarray:
    """A copy of `array` whose data start `offset` bytes past a 64-byte line. Every array a
    cell binds starts on a line, as ORT's arena places the tensors it allocates and as IREE's
    and PyTorch's buffers start: where numpy's allocator puts an array depends on what the
    process allocated and freed before, and a kernel whose operands sit off its result's
    lines runs slower (benchmarks/bench_operand_placement.py measures how much)."""
    raw = np.empty(array.nbytes + LINE + offset, np.uint8)
    start = (-raw.ctypes.data) % LINE + offset
    placed = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    placed[...] = array
    return placed


def make_inputs(
    op: str, n: int, dtype: np.dtype, seed: int = 0, form: str = "0-d"
) -> dict[str, np.ndarray]:
    """Inputs in each operator's domain, on lines (on_lines): KL-target's target positive, the
    BCE's self a probability and target in [0, 1], SoftMargin's target a sign."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, n)
    target = rng.normal(0, 1, n)
    if op == "KlDivTargetBackward":
        target = rng.uniform(0.05, 3.0, n)
    elif op == "BinaryCrossEntropyBackward":
        x, target = rng.uniform(0.01, 0.99, n), rng.uniform(0.0, 1.0, n)
    elif op == "BinaryCrossEntropyWithLogitsBackward":
        target = rng.uniform(0.0, 1.0, n)
    elif op == "SoftMarginLossBackward":
        target = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    go = np.array(1.0, dtype) if form == "0-d" else rng.normal(0, 1, n).astype(dtype)
    arrays = {"grad_output": go, "self": x.astype(dtype), "target": target.astype(dtype)}
    return {name: on_lines(a) for name, a in arrays.items()}


def single_node_model(op: str, dtype: np.dtype, form: str = "0-d") -> object:
    return chain_model(op, dtype, form, 1)


def chain_model(op: str, dtype: np.dtype, form: str, nodes: int) -> object:
    """`nodes` nodes of `op` on inputs go, x and t, each after the first taking its
    predecessor's result as self; the last one's result is out."""
    attrs = attrs_for(op, form)
    names = ["x", *(f"r{k}" for k in range(1, nodes)), "out"]
    go_shape = () if form == "0-d" else ("n",)
    graph = lo.make_graph(
        [lo.make_node(op, ["go", names[k], "t"], names[k + 1], **attrs) for k in range(nodes)],
        [("go", dtype, go_shape), ("x", dtype, ("n",)), ("t", dtype, ("n",))],
        [("out", dtype, ("n",))],
    )
    return prepare_model(lo.make_model(graph))


def ort_runner(
    model: object,
    inputs: dict[str, np.ndarray],
    threads: int,
    native: bool,
    library: str | None = None,
    out: np.ndarray | None = None,
):
    """The model in ORT with the JIT kernel library (`native`), another `library`, or the
    function path, writing `out` (by default an array like self, on lines)."""
    jit = native_library() if native else None
    so = session_options(jit, intra_op_num_threads=threads, inter_op_num_threads=1)
    if library is not None:
        so.register_custom_ops_library(library)
    sess = pinned_session(model.SerializeToString(), so, threads)
    binding = sess.io_binding()
    for name, key in zip(("go", "x", "t"), spec.INPUT_NAMES, strict=True):
        binding.bind_ortvalue_input(name, to_ort_value(inputs[key]))
    if out is None:
        out = on_lines(np.empty_like(inputs["self"]))
    binding.bind_ortvalue_output("out", to_ort_value(out))
    return bound_runner(sess, binding, threads)


def pinned_session(model: bytes, so: ort.SessionOptions, threads: int) -> ort.InferenceSession:
    """A CPU session whose pool threads are pinned as ort_cpus says."""
    pool = ort_cpus(threads)[1]
    if pool is not None:
        so.add_session_config_entry("session.intra_op_thread_affinities", pool)
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def bound_runner(sess: ort.InferenceSession, binding: object, threads: int):
    """One run of `sess` with its IO binding; best_time(s) holds the calling thread on the
    CPU that ort_cpus leaves it."""

    def run() -> None:
        sess.run_with_iobinding(binding)

    run.main_cpus = ort_cpus(threads)[0]  # type: ignore[attr-defined]
    return run


def torch_runner(op: str, inputs: dict[str, np.ndarray], threads: int):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    dtype = {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16}.get(
        inputs["self"].dtype, torch.bfloat16
    )
    x = torch.tensor(inputs["self"].astype(np.float32), dtype=dtype)
    t = torch.tensor(inputs["target"].astype(np.float32), dtype=dtype)
    go = torch.tensor(inputs["grad_output"].astype(np.float32), dtype=dtype)
    reduction = "mean" if go.dim() == 0 else "none"
    code = 1 if reduction == "mean" else 0  # aten's reduction codes: none 0, mean 1
    aten = torch.ops.aten
    backward = {  # aten's own backward kernels, where PyTorch has one
        "SmoothL1LossBackward": lambda: aten.smooth_l1_loss_backward(go, x, t, code, 0.5),
        "MseLossBackward": lambda: aten.mse_loss_backward(go, x, t, code),
        "HuberLossBackward": lambda: aten.huber_loss_backward(go, x, t, code, 1.0),
        "SoftMarginLossBackward": lambda: aten.soft_margin_loss_backward(go, x, t, code),
        "BinaryCrossEntropyBackward": lambda: aten.binary_cross_entropy_backward(
            go, x, t, None, code
        ),
    }.get(op)
    if backward is not None:
        try:
            backward()
        except RuntimeError:  # a type PyTorch's CPU kernel does not take
            return None
        return backward
    # the KL gradients, BCE with logits and L1 have no aten backward: autograd's
    wrt = t if op == "KlDivTargetBackward" else x
    wrt.requires_grad_(True)
    with warnings.catch_warnings():  # torch warns that 'mean' will change meaning
        warnings.simplefilter("ignore")
        if op == "BinaryCrossEntropyWithLogitsBackward":
            loss = torch.nn.functional.binary_cross_entropy_with_logits(x, t, reduction=reduction)
        elif op == "L1LossBackward":
            loss = torch.nn.functional.l1_loss(x, t, reduction=reduction)
        else:
            loss = torch.nn.functional.kl_div(x, t, reduction=reduction)
    return lambda: torch.autograd.grad(loss, [wrt], grad_outputs=go, retain_graph=True)


def triad_runner(n: int, threads: int, affinity: object = None):
    """The triad on n floats with its threads placed as an ORT runner's (thread_cpus), so that
    both meet the machine the same way; `affinity` (ctypes uint64 array) receives each
    thread's CPUs. Unpinned, its second thread would run wherever a CPU is free, and would
    not meet the machine as the pinned kernels beside it do."""
    import ctypes

    library = ctypes.CDLL(str(build_shared_library(TRIAD_SOURCE, "bench_triad")))
    library.triad.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_float,
        ctypes.c_int64,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_uint64),
    ]
    placed = thread_cpus(threads)
    cpus = (ctypes.c_int * threads)(*placed) if placed is not None else None
    a, b, c = (on_lines(np.ones(n, np.float32)) for _ in range(3))

    def run() -> None:
        library.triad(a.ctypes.data, b.ctypes.data, c.ctypes.data, 3.0, n, threads, cpus, affinity)

    run.main_cpus = ort_cpus(threads)[0]  # type: ignore[attr-defined]
    return run


@dataclass
class Cell:
    op: str
    log2n: int
    type_name: str
    form: str
    threads: int
    native: float
    function: float
    torch: float
    iree: float
    triad: float
    prebuilt: float = float("nan")

    @property
    def rate(self) -> float:
        """Bytes the operator moves per second at the native kernel's time."""
        itemsize = spec.float_type(self.type_name).dtype.itemsize
        return streams(self.op, self.form) * (1 << self.log2n) * itemsize / self.native

    @property
    def triad_rate(self) -> float:
        return 3 * (1 << self.log2n) * 4 / self.triad

    @property
    def triad_ratio(self) -> float:
        return self.rate / self.triad_rate

    def per_element(self, seconds: float) -> float:
        """Nanoseconds per element of a time of this cell."""
        return seconds * 1e9 / (1 << self.log2n)

    def goal_per_element(self) -> float:
        """Nanoseconds per element the triad goal allows at this cell's triad."""
        return self.per_element(self.native) * self.triad_ratio / TRIAD_GOAL[self.op]

    def verdicts(self) -> tuple[str, str, str]:
        """The triad, PyTorch and IREE goals: met (ok) or not (NO); '-' where one does not
        apply."""
        triad = "-"
        if self.log2n >= TRIAD_GOAL_FROM:
            triad = "ok" if self.triad_ratio >= TRIAD_GOAL[self.op] else "NO"
        torch = "-" if np.isnan(self.torch) else ("ok" if self.native < self.torch else "NO")
        iree = "-" if np.isnan(self.iree) else ("ok" if self.native <= self.iree else "NO")
        return triad, torch, iree

    def goals(self) -> str:
        return " ".join(f"{verdict:>5}" for verdict in self.verdicts())

    def to_json(self) -> str:
        """One line: how a child hands a cell over."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, line: str) -> Cell:
        return cls(**json.loads(line))


def in_cache_cost(cell: Cell, cells: list[Cell], runner: str) -> float | None:
    """Nanoseconds per element a runner (native, torch or iree) adds between 2^16 and 2^20
    elements of the same operator, type, form and thread count: both sizes stay in cache, and
    the difference cancels the fixed cost of a call (IREE's and PyTorch's dispatch take
    microseconds), so what is left is the runner's arithmetic per element. None when this run
    has no such pair."""
    key = (cell.op, cell.type_name, cell.form, cell.threads)
    twins = {
        c.log2n: getattr(c, runner)
        for c in cells
        if (c.op, c.type_name, c.form, c.threads) == key and c.log2n in IN_CACHE
    }
    if len(twins) != 2 or any(np.isnan(t) for t in twins.values()):
        return None
    return per_element_between(twins[IN_CACHE[0]], twins[IN_CACHE[1]])


def per_element_between(small: float, large: float) -> float:
    """Nanoseconds per element from a runner's seconds per call at the two IN_CACHE sizes."""
    return (large - small) * 1e9 / ((1 << IN_CACHE[1]) - (1 << IN_CACHE[0]))


def reasons(cell: Cell, cells: list[Cell]) -> list[str]:
    """Why each goal of `cell` that is not met is missed, from this run's own measurements:
    whether the kernel's arithmetic alone, with the data in cache, already costs more than the
    goal allows (compute-bound), or the time is lost moving the data at this size."""
    cache = f"in cache (2^{IN_CACHE[0]}..2^{IN_CACHE[1]})"
    unknown = f"no 2^{IN_CACHE[0]} and 2^{IN_CACHE[1]} cells in this run to tell why"
    found: list[str] = []
    triad, torch, iree = cell.verdicts()
    ours = in_cache_cost(cell, cells, "native")
    if triad == "NO":
        allowed = cell.goal_per_element()
        head = f"triad {cell.triad_ratio:.2f} < {TRIAD_GOAL[cell.op]}"
        if ours is None:
            found.append(f"{head}: {unknown}")
        elif ours >= allowed:
            found.append(
                f"{head}: compute-bound, {ours:.2f} ns/element {cache}, the goal allows "
                f"{allowed:.2f}"
            )
        else:
            found.append(
                f"{head}: memory, {cell.per_element(cell.native):.2f} ns/element here against "
                f"{ours:.2f} {cache}; the goal allows {allowed:.2f}"
            )
    for name, goal, runner in (("PyTorch", torch, "torch"), ("IREE", iree, "iree")):
        if goal != "NO":
            continue
        head = f"{name} {cell.native / getattr(cell, runner):.2f}x faster"
        theirs = in_cache_cost(cell, cells, runner)
        if ours is None or theirs is None:
            found.append(f"{head}: {unknown}")
            continue
        where = (
            "it costs less per element even in cache"
            if theirs < ours
            else "it moves the data faster at this size"
        )
        found.append(f"{head}: {theirs:.2f} against our {ours:.2f} ns/element {cache}, so {where}")
    return found


def report_prebuilt(cells: list[Cell]) -> None:
    """The prebuilt library against the JIT build where the goal applies."""
    judged = [c for c in cells if c.log2n >= TRIAD_GOAL_FROM]
    ratios = [c.prebuilt / c.native for c in judged]
    within = sum(1 for r in ratios if r <= PREBUILT_GOAL)
    if ratios:
        print(
            f"\nprebuilt / JIT at >= 2^{TRIAD_GOAL_FROM}: within {PREBUILT_GOAL:.2f} in {within} "
            f"of {len(ratios)} cells; ratios {min(ratios):.2f} to {max(ratios):.2f}"
        )


def report_reasons(cells: list[Cell]) -> None:
    """One line per goal not met, with its reason."""
    lines = [
        f"{c.op:{OP_WIDTH}} 2^{c.log2n:<3} {c.type_name:8} {c.form:4} {c.threads:>3}  {why}"
        for c in cells
        for why in reasons(c, cells)
    ]
    print(f"\ngoals not met, and why ({len(lines)}):" if lines else "\nevery goal met")
    for line in lines:
        print(line)


def iree_runner(op: str, inputs: dict[str, np.ndarray], form: str, config: object):
    """IREE (local-task) running the same signature, compiled once (cached)."""
    import iree.runtime as rt

    from lossgrad_compiler.backends.iree import compile_module
    from lossgrad_compiler.frontend.lowering import lower_signatures
    from lossgrad_compiler.frontend.signature import signature_of

    infos = {k: spec.TensorInfo(v.dtype, v.shape) for k, v in inputs.items()}
    sig = signature_of(spec.validate(op, infos, attrs_for(op, form)))
    context = rt.SystemContext(config=config)
    path = compile_module(lower_signatures([sig]))
    context.add_vm_module(rt.VmModule.mmap(config.vm_instance, str(path)))  # type: ignore[attr-defined]
    function = context.modules.module[sig.id]
    args = [rt.asdevicearray(config.device, inputs[n]) for n in spec.INPUT_NAMES]  # type: ignore[attr-defined]
    return lambda: function(*args).to_host()


def iree_config(threads: int) -> object | None:
    """IREE's local-task device with `threads` workers, or None where IREE is not installed.
    The worker count is fixed when the device starts: one process per thread count."""
    try:
        import iree.runtime as rt
    except ImportError:
        return None
    rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    return rt.Config("local-task")


def mul_runner(n: int, dtype: np.dtype, threads: int):
    """An ORT Mul of two n-element tensors through IOBinding: the per-call floor."""
    from onnx import helper

    onnx_type = spec.float_type(dtype).onnx
    graph = helper.make_graph(
        [helper.make_node("Mul", ["a", "b"], ["c"])],
        "mul",
        [helper.make_tensor_value_info(v, onnx_type, [n]) for v in ("a", "b")],
        [helper.make_tensor_value_info("c", onnx_type, [n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    so = session_options(None, intra_op_num_threads=threads, inter_op_num_threads=1)
    sess = pinned_session(model.SerializeToString(), so, threads)
    binding = sess.io_binding()
    for name in ("a", "b"):
        binding.bind_ortvalue_input(name, to_ort_value(np.ones(n, dtype)))
    binding.bind_ortvalue_output("c", to_ort_value(np.empty(n, dtype)))
    return bound_runner(sess, binding, threads)


def measure_cell(
    op: str,
    log2n: int,
    type_name: str,
    form: str,
    threads: int,
    iree: object,
    prebuilt: str | None = None,
    seconds: float = CELL_SECONDS,
):
    """One cell: native, function path, PyTorch, IREE, the triad and, with `prebuilt`, that
    library, taking turns for about `seconds`."""
    n = 1 << log2n
    dtype = spec.float_type(type_name).dtype
    inputs = make_inputs(op, n, dtype, form=form)
    model = single_node_model(op, dtype, form)
    runners = {
        "native": ort_runner(model, inputs, threads, native=True),
        "function": ort_runner(model, inputs, threads, native=False),
        "triad": triad_runner(n, threads),
    }
    if prebuilt is not None:
        runners["prebuilt"] = ort_runner(model, inputs, threads, False, library=prebuilt)
    torch_run = torch_runner(op, inputs, threads)
    if torch_run:
        runners["torch"] = torch_run
    if iree is not None:
        runners["iree"] = iree_runner(op, inputs, form, iree)
    times = best_times(runners, seconds)
    nan = float("nan")
    return Cell(
        op, log2n, type_name, form, threads,
        native=times["native"],
        function=times["function"],
        torch=times.get("torch", nan),
        iree=times.get("iree", nan),
        triad=times["triad"],
        prebuilt=times.get("prebuilt", nan),
    )  # fmt: skip


def prebuilt_for_this_cpu() -> str:
    """The installed prebuilt library for this CPU, else the one built here as the wheel
    build does (cached: a copy once built)."""
    if prebuilt_present():
        return str(prebuilt_library())
    folder = cache_root() / "ort" / "bench-prebuilt"
    build_prebuilt(kernel_library_source(), folder, toolchain())
    return str(prebuilt_library(folder))


def measure_child(
    cases: list[tuple[str, int, str, str]],
    threads: int,
    prebuilt: str | None = None,
    seconds: float = CELL_SECONDS,
) -> None:
    """Child process for one thread count: each cell's times as one JSON line, as measured."""
    iree = iree_config(threads)
    for op, log2n, type_name, form in cases:
        cell = measure_cell(op, log2n, type_name, form, threads, iree, prebuilt, seconds)
        print(cell.to_json(), flush=True)


def measure(
    ops: list[str],
    sizes: list[int],
    types: list[str],
    forms: list[str],
    threads: list[int],
    prebuilt: str | None = None,
    seconds: float = CELL_SECONDS,
) -> list[Cell]:
    header = (
        f"{'op':{OP_WIDTH}} {'n':>5} {'type':8} {'form':4} {'thr':>3} {'native':>8} "
        f"{'function':>9} "
        f"{'torch':>8} {'iree':>8} {'triad':>7} {'GB/s':>6} {'x triad':>7} {'triad':>5} "
        f"{'torch':>5} {'iree':>5}"
    )
    if prebuilt is not None:
        header += f" {'prebuilt':>8} {'pre/jit':>7}"
    print(
        f"onnxruntime {ort.__version__}; times in ms (minimum of interleaved runs, the triad "
        "beside each cell); goals:"
    )
    if prebuilt is not None:
        print(f"prebuilt: {prebuilt}")
    print(header)
    print("-" * len(header))
    cells: list[Cell] = []
    for thr in threads:
        cases = [
            (o, n, t, f) for n in sizes for t in types for f in forms for o in ops
        ]  # fmt: skip
        command = [sys.executable, __file__, "--child", str(thr), json.dumps(cases)]
        command += ["--seconds", str(seconds)]
        if prebuilt is not None:
            command += ["--prebuilt-library", prebuilt]
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
            assert child.stdout is not None
            for line in child.stdout:
                if not line.startswith("{"):
                    continue  # a build notice or a library's chatter
                cell = Cell.from_json(line)
                cells.append(cell)
                print(
                    f"{cell.op:{OP_WIDTH}} 2^{cell.log2n:<3} {cell.type_name:8} {cell.form:4} "
                    f"{thr:>3} {cell.native * 1e3:8.3f} {cell.function * 1e3:9.3f} "
                    f"{cell.torch * 1e3:8.3f} {cell.iree * 1e3:8.3f} {cell.triad * 1e3:7.3f} "
                    f"{cell.rate / 1e9:6.1f} {cell.rate / cell.triad_rate:7.2f} {cell.goals()}"
                    + (
                        f" {cell.prebuilt * 1e3:8.3f} {cell.prebuilt / cell.native:7.2f}"
                        if prebuilt is not None
                        else ""
                    ),
                    flush=True,
                )
        if child.returncode != 0:
            raise SystemExit(f"the {thr}-thread measurement failed (exit {child.returncode})")
    return cells


def overhead(ops: list[str]) -> None:
    """Per call at 16 elements: each native kernel (0-d grad_output) over an ORT Mul."""
    print("\nper call at 16 elements, 1 thread (goal: native <= 1.2x an ORT Mul)")
    for type_name in ("float32", "float16", "bfloat16"):
        dtype = spec.float_type(type_name).dtype
        # ORT's CPU provider has no bfloat16 Mul: the float16 one moves the same bytes
        floor_type = np.dtype(np.float16) if type_name == "bfloat16" else dtype
        floor = best_time(mul_runner(16, floor_type, 1))
        for op in ops:
            inputs = make_inputs(op, 16, dtype)
            native = best_time(ort_runner(single_node_model(op, dtype), inputs, 1, native=True))
            verdict = "ok" if native <= 1.2 * floor else "NO"
            print(
                f"{op:{OP_WIDTH}} {type_name:8} native {native * 1e6:7.1f} us  "
                f"Mul({floor_type.name}) {floor * 1e6:7.1f} us"
                f"  {native / floor:5.2f}x  {verdict}"
            )


def plot(cells: list[Cell], path: Path) -> None:
    """GB/s against size per op (float32, 0-d grad_output, 1 thread): native, IREE, PyTorch,
    the function path and the triad."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = sorted({c.op for c in cells})
    figure, axes = plt.subplots(1, len(ops), figsize=(5 * len(ops), 4), sharey=True)
    for ax, op in zip(np.atleast_1d(axes), ops, strict=True):
        row = sorted(
            (c for c in cells if c.op == op and c.type_name == "float32")
            if any(c.type_name == "float32" for c in cells)
            else (c for c in cells if c.op == op),
            key=lambda c: c.log2n,
        )
        row = [c for c in row if c.form == row[0].form and c.threads == row[0].threads]
        sizes = [1 << c.log2n for c in row]
        bytes_moved = [c.rate * c.native for c in row]
        for label, times in (
            ("native", [c.native for c in row]),
            ("IREE", [c.iree for c in row]),
            ("PyTorch", [c.torch for c in row]),
            ("function path", [c.function for c in row]),
        ):
            ax.plot(
                sizes,
                [b / t / 1e9 for b, t in zip(bytes_moved, times, strict=True)],
                marker="o",
                label=label,
            )
        ax.plot(sizes, [c.triad_rate / 1e9 for c in row], "k--", label="triad")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{op} ({row[0].type_name}, {row[0].form}, {row[0].threads} thread)")
        ax.set_xlabel("elements")
    np.atleast_1d(axes)[0].set_ylabel("GB/s")
    np.atleast_1d(axes)[0].legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    print(f"\nwrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^16 and 2^20, float32, 0-d only")
    parser.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS), help="operators")
    parser.add_argument("--sizes", nargs="+", type=int, help="log2 n (default 16 20 22 24)")
    parser.add_argument("--types", nargs="+", help="element types (default all three)")
    parser.add_argument("--forms", nargs="+", choices=FORMS, help="grad_output forms")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--plot", type=Path, help="write the GB/s picture here (matplotlib)")
    parser.add_argument(
        "--prebuilt",
        action="store_true",
        help="also time the prebuilt library for this CPU, against the JIT build",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=CELL_SECONDS,
        help=f"seconds of turns per cell (default {CELL_SECONDS:g}); each runner's minimum over "
        "more turns moves less from run to run",
    )
    parser.add_argument("--prebuilt-library", help=argparse.SUPPRESS)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("cases", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        cases = [tuple(c) for c in json.loads(args.cases)]
        measure_child(cases, args.child, args.prebuilt_library, args.seconds)  # type: ignore[arg-type]
        return
    quick = args.quick
    sizes = args.sizes or ([16, 20] if quick else [16, 20, 22, 24])
    types = args.types or (["float32"] if quick else ["float32", "float16", "bfloat16"])
    forms = args.forms or (["0-d"] if quick else list(FORMS))
    prebuilt = prebuilt_for_this_cpu() if args.prebuilt else None
    cells = measure(args.ops, sizes, types, forms, args.threads, prebuilt, args.seconds)
    if prebuilt is not None:
        report_prebuilt(cells)
    report_reasons(cells)
    overhead(args.ops)
    if args.plot:
        plot(cells, args.plot)


if __name__ == "__main__":
    main()
