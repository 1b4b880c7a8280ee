"""The native kernels' own numerics against correctly rounded values: log and exp
(cxx/vmath.h) and the one-rounding narrowing of float64 to float16/bfloat16 (cxx/half.h).

The kernels print math.log/math.exp as lossgrad::log/exp so the compiler can vectorise them;
these tests hold their error to about one ulp over dense samples of every binade and at every
special input (0, -0, subnormals, negatives, +-inf, NaN, overflow and gradual underflow)."""

from __future__ import annotations

import ctypes
import dataclasses
import platform

import ml_dtypes
import numpy as np
import pytest

from lossgrad_compiler.backends.ort.build import (
    NativeUnavailableError,
    build_shared_library,
    toolchain,
)
from lossgrad_compiler.backends.ort.library import runtime_header
from tests.ort.support import build_macros, builds_vector_log

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
#define LOSSGRAD_APPLY(NAME, T, F) \\
  extern "C" __attribute__((visibility("default"))) \\
  void NAME(const T* x, T* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = F(x[i]); }
LOSSGRAD_APPLY(log_f, float, lossgrad::log)
LOSSGRAD_APPLY(exp_f, float, lossgrad::exp)
LOSSGRAD_APPLY(log_d, double, lossgrad::log)
LOSSGRAD_APPLY(exp_d, double, lossgrad::exp)
#if defined(LOSSGRAD_VECTOR_LOG)
extern "C" __attribute__((visibility("default"))) int vector_log() { return 1; }
LOSSGRAD_APPLY(log_f_scalar, float, lossgrad_logf_scalar)
LOSSGRAD_APPLY(exp_f_scalar, float, lossgrad_expf_scalar)
#else
extern "C" __attribute__((visibility("default"))) int vector_log() { return 0; }
#endif
#if defined(LOSSGRAD_LANES8)
extern "C" __attribute__((visibility("default"))) int lanes8() { return 1; }
#define LOSSGRAD_APPLY8(NAME, F) \\
  extern "C" __attribute__((visibility("default"))) \\
  void NAME(const float* x, float* out, int64_t n) { \\
    for (int64_t i = 0; i + 8 <= n; i += 8) { lossgrad::floatx8 v; std::memcpy(&v, x + i, 32); \\
      v = F(v); std::memcpy(out + i, &v, 32); } }
LOSSGRAD_APPLY8(log_f8, lossgrad::log_fma8)
LOSSGRAD_APPLY8(exp_f8, lossgrad::exp_fma8)
LOSSGRAD_APPLY(log_f_fma, float, lossgrad::log_fma)
LOSSGRAD_APPLY(exp_f_fma, float, lossgrad::exp_fma)
#else
extern "C" __attribute__((visibility("default"))) int lanes8() { return 0; }
#endif
#define LOSSGRAD_NARROW(NAME, T) \\
  extern "C" __attribute__((visibility("default"))) \\
  void NAME(const double* x, uint16_t* out, int64_t n) { \\
    for (int64_t i = 0; i < n; ++i) out[i] = lossgrad::convert<lossgrad::T>(x[i]).bits; }
LOSSGRAD_NARROW(narrow_f16, float16)
LOSSGRAD_NARROW(narrow_bf16, bfloat16)
#define LOSSGRAD_BLOCKS(NAME, T) \\
  extern "C" __attribute__((visibility("default"))) \\
  void NAME(const float* x, lossgrad::T* out, float* back, int64_t n) { \\
    lossgrad::store_block(out, x, n); \\
    const float* widened = lossgrad::load_block<float>(out, 1, n, back); \\
    if (widened != back) std::memcpy(back, widened, sizeof(float) * n); }
LOSSGRAD_BLOCKS(blocks_f16, float16)
LOSSGRAD_BLOCKS(blocks_bf16, bfloat16)
"""


# The baseline build exists only where the build machine is x86-64.
BUILDS = ["build machine", *(["x86-64"] if platform.machine() in ("x86_64", "AMD64") else [])]


def vmath_arch_flags(build: str) -> tuple[str, ...]:
    """The -march flags of one of BUILDS."""
    return toolchain().arch_flags if build == "build machine" else (f"-march={build}",)


@pytest.fixture(scope="module", params=BUILDS)
def vmath(request: pytest.FixtureRequest) -> ctypes.CDLL:
    """The harness built as the library is: for this machine's CPU (with F16C/AVX2 paths
    where it has them) and for baseline x86-64 (the portable bit-arithmetic paths)."""
    source = _HARNESS % (runtime_header("half.h"), runtime_header("vmath.h"))
    try:
        tools = toolchain()
    except NativeUnavailableError as err:
        pytest.skip(f"no toolchain: {err}")
    tools = dataclasses.replace(tools, arch_flags=vmath_arch_flags(request.param))
    return ctypes.CDLL(str(build_shared_library(source, "test_vmath", tools=tools)))


def _apply(library: ctypes.CDLL, name: str, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)
    getattr(library, name)(
        ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(x.size)
    )
    return out


def _ulps(got: np.ndarray, exact: np.ndarray, dtype: type) -> np.ndarray:
    """|got - exact| in units of the spacing of `dtype` at the rounded exact value; 0 where
    both are the same non-finite value, inf where only one is."""
    with np.errstate(all="ignore"):
        rounded = exact.astype(dtype)
        spacing = np.spacing(np.abs(rounded)).astype(np.longdouble)
        err = np.abs(got.astype(np.longdouble) - exact) / spacing
    special = ~np.isfinite(rounded)
    same = np.where(np.isnan(rounded), np.isnan(got), got == rounded)
    err[special] = np.where(same[special], 0.0, np.inf)
    err[np.isfinite(rounded) & ~np.isfinite(got)] = np.inf
    return err


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -1e-30, 1.0, 2.0, 0.5]


def _float_samples() -> np.ndarray:
    """Every 4093rd float bit pattern (all binades, both signs) and the special values."""
    bits = np.arange(0, 2**32, 4093, dtype=np.uint64).astype(np.uint32)
    extremes = [
        1e-45,
        1.1754942e-38,
        1.1754944e-38,
        3.4028235e38,
        88.72283,
        88.72284,
        -87.33654,
        -103.27893,
        -103.97208,
        -104.0,
        -150.0,
        89.0,
    ]
    return np.concatenate([bits.view(np.float32), np.array(SPECIAL + extremes, np.float32)])


def _lane_samples() -> np.ndarray:
    """The float samples, subnormals, and exp's whole range densely: what the lane forms are
    compared with the scalar ones on."""
    return np.concatenate(
        [
            _float_samples(),
            np.arange(1, 2**23, 97, dtype=np.uint32).view(np.float32),
            np.linspace(-104.5, 89.5, 1_000_003, dtype=np.float32),  # exp's whole range
        ]
    )


def _double_samples(rng: np.random.Generator, size: int) -> np.ndarray:
    bits = rng.integers(0, 2**64, size, dtype=np.uint64, endpoint=False)
    extremes = [5e-324, 2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308]
    return np.concatenate([bits.view(np.float64), np.array(SPECIAL + extremes, np.float64)])


def test_float_log_within_one_ulp(vmath: ctypes.CDLL) -> None:
    x = _float_samples()
    with np.errstate(all="ignore"):
        exact = np.log(x.astype(np.float64)).astype(np.longdouble)
    err = _ulps(_apply(vmath, "log_f", x), exact, np.float32)
    assert err.max() <= 1.0, f"log({x[err.argmax()]!r}) is {err.max():.3f} ulp off"


@pytest.mark.parametrize("function", ["log_f", "exp_f"])
def test_float_vector_variant_gives_the_scalar_bits(
    vmath: ctypes.CDLL, request: pytest.FixtureRequest, function: str
) -> None:
    """A g++ build with AVX-512 and FMA has the float log's and exp's vector variants
    (cxx/vmath.h), and a vectorised loop through them gives the scalar form's bits for every
    sample, NaN payloads and signs included (the whole 2^32 was checked once by hand, for
    each). Other builds (the baseline x86-64 one) have none."""
    wanted = builds_vector_log(vmath_arch_flags(request.node.callspec.params["vmath"]))
    assert bool(vmath.vector_log()) == wanted
    if not wanted:
        return
    x = _lane_samples()
    vector = _apply(vmath, function, x)
    scalar = _apply(vmath, f"{function}_scalar", x)
    assert np.array_equal(vector.view(np.uint32), scalar.view(np.uint32))


@pytest.mark.parametrize("function", ["log_f", "exp_f"])
def test_float_eight_lane_forms_give_the_scalar_bits(
    vmath: ctypes.CDLL, request: pytest.FixtureRequest, function: str
) -> None:
    """A build with AVX2 and FMA but not the 16-lane variants has log and exp on 8 lanes for
    the loop nests' lane loops (cxx/vmath.h's log_fma8, exp_fma8), and they give the scalar
    FMA forms' bits for every sample, NaN payloads and signs included (the whole 2^32 was
    checked once by hand, for each). Other builds have none."""
    flags = vmath_arch_flags(request.node.callspec.params["vmath"])
    wanted = {"__AVX2__", "__FMA__"} <= build_macros(flags) and not builds_vector_log(flags)
    assert bool(vmath.lanes8()) == wanted
    if not wanted:
        return
    x = _lane_samples()
    x = np.concatenate([x, np.zeros(-len(x) % 8, np.float32)])
    lanes = _apply(vmath, f"{function}8", x)
    scalar = _apply(vmath, f"{function}_fma", x)
    assert np.array_equal(lanes.view(np.uint32), scalar.view(np.uint32))


def test_float_exp_within_one_ulp(vmath: ctypes.CDLL, request: pytest.FixtureRequest) -> None:
    x = _float_samples()
    with np.errstate(all="ignore"):
        exact = np.exp(x.astype(np.float64)).astype(np.longdouble)
    err = _ulps(_apply(vmath, "exp_f", x), exact, np.float32)
    # The largest errors over every 7th float (vmath.h): 0.925 ulp with FMA, 1.02 without;
    # sampled more sparsely here.
    fma = "__FMA__" in build_macros(vmath_arch_flags(request.node.callspec.params["vmath"]))
    limit = 0.95 if fma else 1.05
    assert err.max() <= limit, f"exp({x[err.argmax()]!r}) is {err.max():.3f} ulp off"


def test_double_log_within_one_ulp(vmath: ctypes.CDLL) -> None:
    x = _double_samples(np.random.default_rng(1), 1_000_000)
    with np.errstate(all="ignore"):
        exact = np.log(x.astype(np.longdouble))
    err = _ulps(_apply(vmath, "log_d", x), exact, np.float64)
    assert err.max() <= 1.0, f"log({x[err.argmax()]!r}) is {err.max():.3f} ulp off"


def test_double_exp_within_one_ulp(vmath: ctypes.CDLL) -> None:
    rng = np.random.default_rng(2)
    x = np.concatenate(
        [rng.uniform(-760.0, 720.0, 1_000_000), _double_samples(rng, 1000), [709.78, -745.13]]
    )
    with np.errstate(all="ignore"):
        exact = np.exp(x.astype(np.longdouble))
    err = _ulps(_apply(vmath, "exp_d", x), exact, np.float64)
    assert err.max() <= 1.0, f"exp({x[err.argmax()]!r}) is {err.max():.3f} ulp off"


def _round_once(x: np.ndarray, digits: int, min_exponent: int) -> np.ndarray:
    """x rounded to nearest even with `digits` significant bits, or to a multiple of
    2^min_exponent below the normal range (exact in float64: the scaled values are
    integers after np.rint)."""
    _, e = np.frexp(x)
    unit = np.maximum(e - digits, min_exponent)
    return np.ldexp(np.rint(np.ldexp(x, -unit)), unit)


@pytest.mark.parametrize(
    ("name", "dtype", "digits", "min_exponent", "limit"),
    [
        ("narrow_f16", np.float16, 11, -24, 65520.0),
        ("narrow_bf16", ml_dtypes.bfloat16, 8, -133, float(2**128 - 2**119)),
    ],
)
def test_float64_narrows_in_one_rounding(
    vmath: ctypes.CDLL, name: str, dtype: type, digits: int, min_exponent: int, limit: float
) -> None:
    """Including the doubles just off every rounding tie, where rounding through float32
    first would round twice and go wrong."""
    rng = np.random.default_rng(3)
    info = ml_dtypes.finfo(dtype)
    exponents = rng.integers(-140, 130, 200_000)
    x = np.ldexp(rng.uniform(0.5, 1.0, exponents.size), exponents)
    spacing = np.ldexp(1.0, np.maximum(np.frexp(x)[1] - digits, min_exponent))
    ties = _round_once(x, digits, min_exponent) + spacing / 2
    x = np.concatenate([x, ties, ties * (1 + 2**-40), ties * (1 - 2**-40)])
    x = np.concatenate([x, -x, [0.0, np.inf, -np.inf, float(info.max), limit, limit * 0.999]])
    expected = _round_once(x[np.isfinite(x)], digits, min_exponent)
    expected = np.where(np.abs(expected) >= limit, np.copysign(np.inf, expected), expected)
    got = np.empty(x.size, np.uint16)
    getattr(vmath, name)(
        ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(got.ctypes.data), ctypes.c_int64(x.size)
    )
    finite = np.isfinite(x)
    got_values = got.view(dtype).astype(np.float64)
    assert np.array_equal(got_values[finite], expected)
    assert np.array_equal(got_values[~finite], x[~finite])
    nan = np.empty(1, np.uint16)
    getattr(vmath, name)(
        ctypes.c_void_p(np.array([np.nan]).ctypes.data), ctypes.c_void_p(nan.ctypes.data), 1
    )
    assert np.isnan(nan.view(dtype).astype(np.float64)[0])


@pytest.mark.parametrize(
    ("name", "dtype"), [("blocks_f16", np.float16), ("blocks_bf16", ml_dtypes.bfloat16)]
)
def test_float32_blocks_convert_like_numpy(vmath: ctypes.CDLL, name: str, dtype: type) -> None:
    """The block conversions (F16C / AVX2 where the build has them, else bit arithmetic):
    float32 -> half rounds to nearest even and half -> float32 is exact, bit for bit as
    numpy / ml_dtypes convert, on a float sample with every rounding tie nearby. Blocks of
    odd length exercise the vector loops' scalar tails."""
    bits = np.arange(0, 2**32, 65521, dtype=np.uint64).astype(np.uint32)
    ties = (bits & 0xFFFF0000) | 0x8000
    x = np.concatenate([bits, ties, ties + 1, ties - 1, ties ^ 0x10000]).view(np.float32)
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, 65504.0, 65520.0], np.float32)])
    x = x[: x.size // 16 * 16 - 3]  # not a whole number of vectors
    out = np.empty(x.size, np.uint16)
    back = np.empty(x.size, np.float32)
    getattr(vmath, name)(
        ctypes.c_void_p(x.ctypes.data),
        ctypes.c_void_p(out.ctypes.data),
        ctypes.c_void_p(back.ctypes.data),
        ctypes.c_int64(x.size),
    )
    with np.errstate(all="ignore"):
        expected = x.astype(dtype)
    nan = np.isnan(x)
    assert np.array_equal(out[~nan], expected[~nan].view(np.uint16))
    assert np.isnan(out[nan].view(dtype).astype(np.float32)).all()
    assert np.array_equal(back[~nan], expected[~nan].astype(np.float32))
