"""The bits of the native library's float log and exp (backends/ort/cxx/vmath.h) over a fixed
sample, per build flavour, as SHA-256 digests: what tests/ort/test_vmath_golden.py pins.

The README promises that these results are stable. The accuracy tests (tests/
test_ort_numerics.py) allow about one ulp, so a change of a coefficient or of the order of
operations can pass them and still change a thousand results. A digest changes with any bit.

The flavours are the forms vmath.h compiles to, each built as the library is (its
optimisation flags) for one -march:

* x86-64: no FMA, so fdlibm's form of log;
* x86-64-v3: FMA, so the Estrin/Cephes form of log, vectorised by the compiler (AVX2);
* x86-64-v4: FMA and AVX-512, so vectorised loops call the log's and exp's 16-lane variants;
  `log_scalar` and `exp_scalar` are the scalar functions the variants must agree with;
* exp has two forms, with FMA (v3, v4) and without (x86-64); each flavour pins its own
  digest of it.

After an intended change of the numbers, print the new digests with
`.venv/bin/python -m tests.ort.vmath_golden` (from the repository root), and write them with
`--write` into tests/ort/data/vmath_golden.json; say in the commit why the bits changed."""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from lossgrad_compiler.backends.ort.build import build_shared_library, toolchain
from lossgrad_compiler.backends.ort.library import runtime_header

GOLDEN_FILE = Path(__file__).parent / "data" / "vmath_golden.json"
UPDATE_COMMAND = ".venv/bin/python -m tests.ort.vmath_golden --write"

FLAVOURS: dict[str, tuple[str, ...]] = {
    "x86-64": ("log", "exp"),
    "x86-64-v3": ("log", "exp"),
    "x86-64-v4": ("log", "log_scalar", "exp", "exp_scalar"),
}
"""Per -march, the functions whose bits are pinned."""

FORMS = {"x86-64": "fdlibm", "x86-64-v3": "fma", "x86-64-v4": "fma+avx512"}
"""The form of the float log each flavour must compile to (checked, so that a flavour cannot
silently turn into another one and pin the same bits twice)."""

_HARNESS = """
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif
%s
%s
#define LOSSGRAD_APPLY(NAME, F) \\
  extern "C" __attribute__((visibility("default"))) \\
  void NAME(const float* x, float* out, int64_t n) { \\
    for (int64_t i = 0; i < n; ++i) out[i] = F(x[i]); }
LOSSGRAD_APPLY(apply_log, lossgrad::log)
LOSSGRAD_APPLY(apply_exp, lossgrad::exp)
#if defined(LOSSGRAD_VECTOR_LOG)
LOSSGRAD_APPLY(apply_log_scalar, lossgrad_logf_scalar)
LOSSGRAD_APPLY(apply_exp_scalar, lossgrad_expf_scalar)
extern "C" __attribute__((visibility("default"))) const char* form() { return "fma+avx512"; }
#elif defined(__FMA__)
extern "C" __attribute__((visibility("default"))) const char* form() { return "fma"; }
#else
extern "C" __attribute__((visibility("default"))) const char* form() { return "fdlibm"; }
#endif
"""

_EDGES = [
    0x00000000, 0x80000000,  # +-0
    0x7F800000, 0xFF800000,  # +-inf
    0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFD00001,  # quiet NaNs, payloads and signs
    0x7F800001, 0x7FA00000, 0xFF800001,  # signalling NaNs
    0x00000001, 0x00000002, 0x000FFFFF, 0x007FFFFF,  # subnormals
    0x80000001, 0x807FFFFF,  # negative subnormals
    0x00800000, 0x00800001, 0x7F7FFFFF, 0xFF7FFFFF,  # smallest normal, largest finite
    0x3F800000, 0x3F7FFFFF, 0x3F800001,  # 1 and its neighbours
    0x3F3504F2, 0x3F3504F3, 0x3F3504F4,  # sqrt(2)/2: the log's reduction switches there
    0x3FB504F3, 0x3FB504F4,  # sqrt(2)
]  # fmt: skip
"""Bit patterns of the edges, the NaNs' payloads included (a float literal could quiet them)."""

_EDGE_VALUES = [
    88.72283, 88.72284, 88.7228394, 89.0, 89.00001, 104.0,  # exp's overflow
    -87.33654, -87.33655, -103.27893, -103.97208, -103.97209, -104.0, -150.0,  # underflow
    -1.0, -0.5, -1e-30, -3.4028235e38,  # negatives: NaN from log
    0.5, 2.0, 0.69314718, 1e-30, 1e30, 0.34657359, -0.34657359,  # exp's reduction at ln2/2
]  # fmt: skip


def sample() -> np.ndarray:
    """Every 4093rd float bit pattern (both signs, every binade, subnormals and NaNs, 1.05
    million values), then the edges."""
    bits = np.arange(0, 2**32, 4093, dtype=np.uint64).astype(np.uint32)
    edges = np.array(_EDGES, np.uint32)
    values = np.array(_EDGE_VALUES, np.float32).view(np.uint32)
    return np.concatenate([bits, edges, values]).view(np.float32)


def digest(array: np.ndarray) -> str:
    return hashlib.sha256(
        np.ascontiguousarray(array).view(np.uint32).astype("<u4").tobytes()
    ).hexdigest()


def compiler_macros(flags: tuple[str, ...]) -> set[str]:
    """The macros the library's compiler defines for `flags`."""
    done = subprocess.run(
        [*toolchain().compiler, *flags, "-dM", "-E", "-x", "c++", "-"],
        input="",
        capture_output=True,
        text=True,
        check=True,
    )
    return {line.split()[1] for line in done.stdout.splitlines() if line.startswith("#define")}


def missing_on_this_cpu(march: str) -> list[str]:
    """The instruction-set macros of -march=`march` that this CPU (-march=native) lacks: code
    for that flavour cannot run here when there are any."""
    wanted = {m for m in compiler_macros((f"-march={march}",)) if m.endswith("__") and
              m.startswith(("__AVX", "__FMA", "__F16C", "__SSE", "__BMI"))}  # fmt: skip
    return sorted(wanted - compiler_macros(("-march=native",)))


def build_harness(arch_flags: tuple[str, ...]) -> Path:
    """The harness's shared library, built and not loaded (this CPU may not run it)."""
    source = _HARNESS % (runtime_header("half.h"), runtime_header("vmath.h"))
    tools = dataclasses.replace(toolchain(), arch_flags=arch_flags)
    return build_shared_library(source, "test_vmath_golden", tools=tools)


@dataclasses.dataclass
class Flavour:
    """The harness built for one -march."""

    march: str
    path: Path
    library: ctypes.CDLL

    @staticmethod
    def build(march: str) -> Flavour:
        return Flavour.build_with((f"-march={march}",), march)

    @staticmethod
    def build_with(arch_flags: tuple[str, ...], march: str = "") -> Flavour:
        """The harness built with these -march flags (the library's other flags as they are)."""
        path = build_harness(arch_flags)
        library = ctypes.CDLL(str(path))
        library.form.restype = ctypes.c_char_p
        return Flavour(march, path, library)

    @property
    def form(self) -> str:
        return self.library.form().decode()

    def apply(self, function: str, x: np.ndarray) -> np.ndarray:
        out = np.empty_like(x)
        getattr(self.library, f"apply_{function}")(
            ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(x.size)
        )
        return out

    def digests(self) -> dict[str, str]:
        x = sample()
        return {function: digest(self.apply(function, x)) for function in FLAVOURS[self.march]}


def golden() -> dict:
    """The pinned digests: of the sample ("sample") and per flavour and function."""
    return json.loads(GOLDEN_FILE.read_text())


def pinned() -> dict[str, dict[str, str]]:
    return golden()["flavours"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {GOLDEN_FILE.name}")
    args = parser.parse_args(argv)
    found: dict[str, dict[str, str]] = {}
    for march in FLAVOURS:
        missing = missing_on_this_cpu(march)
        if missing:
            print(f"{march}: this CPU cannot run it (no {', '.join(missing)})", file=sys.stderr)
            return 1
        flavour = Flavour.build(march)
        if flavour.form != FORMS[march]:
            print(
                f"{march}: the log compiles to {flavour.form}, not {FORMS[march]}", file=sys.stderr
            )
            return 1
        found[march] = flavour.digests()
        print(march, json.dumps(found[march], indent=2))
    if args.write:
        GOLDEN_FILE.parent.mkdir(exist_ok=True)
        text = {
            "about": "tests/ort/vmath_golden.py: SHA-256 of the bits of vmath.h's float log and "
            "exp over its fixed sample, per -march",
            "sample": digest(sample()),
            "flavours": found,
        }
        GOLDEN_FILE.write_text(json.dumps(text, indent=2) + "\n")
        print(f"wrote {GOLDEN_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
