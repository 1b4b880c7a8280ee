"""Where the host runs this VM's two CPUs, seen from inside without hardware counters.

    .venv/bin/python benchmarks/core_probe.py [--seconds 30]

A virtual machine's CPUs are threads of the host, placed by its scheduler: two of them may sit
on one core as SMT siblings, on two cores, or take turns on one hardware thread, and the cores
may be near one another or far apart. `lscpu` inside the guest shows none of it. Three timings
tell them apart:

- a port-bound loop (16 independent multiply-add chains) on both CPUs at once, against one CPU
  alone: near 2x slower when the two share a core's execution ports, near 1x when each has a
  core;
- a latency-bound loop (one dependent chain) the same way: near 1x on SMT siblings, which
  share ports but not the chain's latency; near 2x only where the two take turns on one
  hardware thread;
- a cache line passed back and forth between the two: its round trip grows with the distance
  between their cores.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lossgrad_compiler.backends.ort.build import build_shared_library

SHARED = 1.5  # a ratio from which the two CPUs count as sharing what the loop needs
# A line's round trip from which two cores count as far apart. On the Zen 5 VM it took mostly
# 86-125 ns while a second thread brought memory-bound kernels 1.0-1.2x, and 577-632 ns in the
# windows where it brought 1.5-2x (docs/benchmarks.md, "Where the second CPU sits").
FAR_NS = 300.0

# Each thread t runs on cpus[t] (placed before it starts, the caller moved there and back);
# all wait for one another, then time the loop. The result is the wall time from the first
# thread's start to the last one's end, so two threads that take turns on one CPU count twice.
# The ping-pong runs until `trips` round trips or `budget` seconds, whichever comes first, since
# between two threads on one CPU each pass waits for the scheduler.
PROBE_SOURCE = r"""
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <atomic>
#include <cstdint>
#include <vector>
namespace {
typedef float v16 __attribute__((vector_size(64)));
double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
struct Shared {
  std::atomic<int> arrived{0};
  int threads;
  int64_t iterations;
  int ports;  // 1: independent chains (port-bound); 0: one chain (latency-bound)
};
struct Slot {
  Shared* shared;
  double start, end;
  float sink;
};
template <int kChains>
float chains(int64_t n) {
  v16 a[kChains];
  const v16 m = v16{} + 0.999999f, b = v16{} + 1e-7f;
  for (int c = 0; c < kChains; ++c) a[c] = v16{} + (1.0f + c);
  for (int64_t k = 0; k < n; ++k)
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) a[c] = a[c] * m + b;
  float s = 0;
  for (int c = 0; c < kChains; ++c) s += a[c][0];
  return s;
}
void* run_slot(void* arg) {
  Slot& s = *static_cast<Slot*>(arg);
  Shared& sh = *s.shared;
  sh.arrived.fetch_add(1);
  while (sh.arrived.load() < sh.threads) sched_yield();
  s.start = now();
  s.sink = sh.ports ? chains<16>(sh.iterations) : chains<1>(sh.iterations);
  s.end = now();
  return nullptr;
}
cpu_set_t one_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return set;
}
void place(pthread_attr_t* attr, int cpu) {
  const cpu_set_t set = one_cpu(cpu);
  pthread_attr_setaffinity_np(attr, sizeof set, &set);
}
void on_cpu(int cpu) {
  const cpu_set_t set = one_cpu(cpu);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
struct alignas(64) Line {
  std::atomic<int64_t> value{0};
};
struct Pong {
  Line* line;
  std::atomic<int>* stop;
};
void* pong(void* arg) {
  Pong& p = *static_cast<Pong*>(arg);
  while (!p.stop->load(std::memory_order_relaxed)) {
    const int64_t v = p.line->value.load(std::memory_order_acquire);
    if (v & 1) p.line->value.store(v + 1, std::memory_order_release);
  }
  return nullptr;
}
}  // namespace

extern "C" __attribute__((visibility("default")))
double loop_seconds(int threads, const int* cpus, int64_t iterations, int ports) {
  cpu_set_t before;
  pthread_getaffinity_np(pthread_self(), sizeof before, &before);
  on_cpu(cpus[0]);
  Shared sh;
  sh.threads = threads;
  sh.iterations = iterations;
  sh.ports = ports;
  std::vector<Slot> slots(threads, Slot{&sh, 0, 0, 0});
  std::vector<pthread_t> pool(threads);
  for (int t = 1; t < threads; ++t) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    place(&attr, cpus[t]);
    pthread_create(&pool[t], &attr, run_slot, &slots[t]);
    pthread_attr_destroy(&attr);
  }
  run_slot(&slots[0]);
  for (int t = 1; t < threads; ++t) pthread_join(pool[t], nullptr);
  pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  double first = slots[0].start, last = slots[0].end;
  for (const Slot& s : slots) {
    first = s.start < first ? s.start : first;
    last = s.end > last ? s.end : last;
  }
  return last - first;
}

extern "C" __attribute__((visibility("default")))
double round_trip_seconds(int from, int to, int64_t trips, double budget) {
  cpu_set_t before;
  pthread_getaffinity_np(pthread_self(), sizeof before, &before);
  on_cpu(from);
  Line line;
  std::atomic<int> stop{0};
  Pong p{&line, &stop};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  place(&attr, to);
  pthread_t other;
  pthread_create(&other, &attr, pong, &p);
  pthread_attr_destroy(&attr);
  int64_t done = 0;
  const double start = now();
  double end = start;
  bool late = false;
  while (done < trips && !late) {
    line.value.store(2 * done + 1, std::memory_order_release);  // the ball is the other's
    for (int64_t spins = 1; line.value.load(std::memory_order_acquire) != 2 * done + 2; ++spins)
      if (spins % 256 == 0 && (late = now() - start > budget)) break;
    if (!late) {
      ++done;
      end = now();
    }
  }
  stop.store(1);
  pthread_join(other, nullptr);
  pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  return done > 0 ? (end - start) / done : -1.0;
}
"""


@dataclass(frozen=True)
class Placement:
    """Two CPUs' timings: each loop's 2-CPU time over its 1-CPU time, and the line's round trip."""

    ports: float
    latency: float
    round_trip_ns: float

    @property
    def kind(self) -> str:
        if self.latency >= SHARED:
            return "one hardware thread"
        if self.ports >= SHARED:
            return "SMT siblings"
        return "cores far apart" if self.round_trip_ns >= FAR_NS else "cores near"

    @property
    def short(self) -> str:
        """The kind in one word, for a table column."""
        return {
            "one hardware thread": "turns",
            "SMT siblings": "smt",
            "cores far apart": "far",
            "cores near": "near",
        }[self.kind]


def library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build_shared_library(PROBE_SOURCE, "bench_core_probe")))
    lib.loop_seconds.restype = ctypes.c_double
    lib.loop_seconds.argtypes = [
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int64,
        ctypes.c_int,
    ]
    lib.round_trip_seconds.restype = ctypes.c_double
    lib.round_trip_seconds.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_double]
    return lib


def loop_ratio(lib: ctypes.CDLL, cpus: tuple[int, int], ports: bool, repeats: int = 5) -> float:
    """The loop's best time on both CPUs at once over its best time on the first alone."""
    iterations = 40_000 if ports else 200_000  # 0.08 and 0.29 ms alone on the Zen 5 VM
    both = (ctypes.c_int * 2)(*cpus)
    alone = min(lib.loop_seconds(1, both, iterations, int(ports)) for _ in range(repeats))
    shared = min(lib.loop_seconds(2, both, iterations, int(ports)) for _ in range(repeats))
    return shared / alone


def round_trip_ns(lib: ctypes.CDLL, cpus: tuple[int, int], repeats: int = 5) -> float:
    """The fastest of a few batches' mean round trip: a batch in which the host stopped either
    CPU for a while takes microseconds a trip, and the fastest batch had no such stop."""
    trips = [lib.round_trip_seconds(cpus[0], cpus[1], 400, 0.005) for _ in range(repeats)]
    answered = [t for t in trips if t > 0]
    return min(answered) * 1e9 if answered else float("inf")


def placement(lib: ctypes.CDLL, cpus: tuple[int, int] = (0, 1)) -> Placement:
    return Placement(
        ports=loop_ratio(lib, cpus, ports=True),
        latency=loop_ratio(lib, cpus, ports=False),
        round_trip_ns=round_trip_ns(lib, cpus),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--every", type=float, default=0.5, help="seconds between probes")
    parser.add_argument("--cpus", type=int, nargs=2, default=[0, 1])
    args = parser.parse_args()
    lib = library()
    print(f"{'seconds':>8} {'ports':>6} {'latency':>7} {'round trip ns':>13}  placement")
    start = time.perf_counter()
    while (at := time.perf_counter() - start) < args.seconds:
        p = placement(lib, tuple(args.cpus))
        print(f"{at:8.1f} {p.ports:6.2f} {p.latency:7.2f} {p.round_trip_ns:13.0f}  {p.kind}")
        time.sleep(args.every)


if __name__ == "__main__":
    main()
