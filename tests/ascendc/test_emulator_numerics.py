"""The emulation's arithmetic, bit by bit: Cast float -> half / bfloat16 in every round mode
(docs/ascend-c.md: CAST_NONE is round-to-nearest-even when lossy, CAST_ROUND is half away
from zero, CAST_ODD sets the last bit of an inexact result), half Add/Sub/Mul/Div computed in
float and rounded to nearest even, and float Exp/Ln within the 1 ulp the reference allows
(docs/ascend-c.md). The expected values come from numpy / ml_dtypes and exact float64 arithmetic."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from lossgrad_compiler.backends.ascendc.build import build_executable

N = 2048
HALF_MODES = ("none", "rint", "floor", "ceil", "round", "trunc", "odd")
BF16_MODES = ("rint", "floor", "ceil", "round", "trunc")


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    """Values of every kind for both 16-bit formats: random normals and subnormals, exact
    midpoints between neighbours (the ties), exact values, signed zeros, inf and NaN."""
    rng = np.random.default_rng(6)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 1e-8, -1e-8],
                        np.float32)  # fmt: skip
    half_bits = rng.integers(0, 0x7C00, 512).astype(np.uint16)  # finite halves
    h = half_bits.view(np.float16).astype(np.float64)
    half_ties = (h + np.nextafter(h.astype(np.float16), np.float16(np.inf)).astype(np.float64)) / 2
    bf_bits = rng.integers(0x0001, 0x7F80, 256).astype(np.uint16)  # finite positive bf16
    b = bf_bits.view(ml_dtypes.bfloat16).astype(np.float64)
    bf_next = (bf_bits + 1).view(ml_dtypes.bfloat16).astype(np.float64)
    bf_ties = (b + bf_next) / 2
    signs = rng.choice([-1.0, 1.0], 768)
    ties = np.concatenate([half_ties, bf_ties]) * signs
    spread = rng.uniform(-1, 1, N) * 2.0 ** rng.integers(-30, 17, N)  # normals, subnormals
    x = np.concatenate([specials, ties, spread])[:N].astype(np.float32)
    y = rng.permutation(x)
    y[y == 0] = 3.0  # keep Div finite where x is finite
    return x, y


@pytest.fixture(scope="module")
def probe() -> dict[str, np.ndarray]:
    source = (Path(__file__).parent / "numerics_probe.cpp").read_text()
    units = {"numerics_probe.cpp": "kernel"}
    executable = build_executable({"numerics_probe.cpp": source}, units, "the numerics probe")
    x, y = _inputs()
    stdin = struct.pack("<I", N) + x.tobytes() + y.tobytes()
    done = subprocess.run([str(executable)], input=stdin, capture_output=True, check=True)
    out = np.frombuffer(done.stdout, np.uint8)
    fields: dict[str, np.ndarray] = {"x": x, "y": y}
    layout = [(f"half_{m}", np.uint16) for m in HALF_MODES]
    layout += [(f"bf16_{m}", np.uint16) for m in BF16_MODES]
    layout += [("exp", np.float32), ("ln", np.float32)]
    layout += [(f"half_{op}", np.uint16) for op in ("add", "sub", "mul", "div")]
    offset = 0
    for name, dtype in layout:
        size = N * np.dtype(dtype).itemsize
        fields[name] = out[offset : offset + size].view(dtype)
        offset += size
    assert offset == out.size
    return fields


def _step(bits: np.ndarray, up: bool) -> np.ndarray:
    """The next 16-bit float toward +inf (up) or -inf, in sign-magnitude bit space."""
    b = bits.astype(np.int32)
    negative = (b & 0x8000) != 0
    if up:
        out = np.where(b == 0x8000, 0x0001, np.where(negative, b - 1, b + 1))
    else:
        out = np.where(b == 0x0000, 0x8001, np.where(negative, b + 1, b - 1))
    return out.astype(np.uint16)


def _directed(x: np.ndarray, nearest: np.ndarray, dtype) -> dict[str, np.ndarray]:
    """FLOOR/CEIL/TRUNC/ROUND/ODD from the nearest-even result and its neighbour."""
    xs = x.astype(np.float64)
    value = nearest.view(dtype).astype(np.float64)
    exact = value == xs
    above = value > xs
    other = np.where(above, _step(nearest, up=False), _step(nearest, up=True))
    lo = np.where(above, other, nearest)
    hi = np.where(above, nearest, other)
    d_lo = xs - lo.view(dtype).astype(np.float64)
    d_hi = hi.view(dtype).astype(np.float64) - xs
    away = np.where(xs > 0, hi, lo)
    toward_zero = np.where(xs > 0, lo, hi)
    rounded = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, away))
    odd = np.where((lo & 1) == 1, lo, hi)
    modes = {"floor": lo, "ceil": hi, "trunc": toward_zero, "round": rounded, "odd": odd}
    return {m: np.where(exact, nearest, v).astype(np.uint16) for m, v in modes.items()}


def _assert_bits(actual: np.ndarray, expected: np.ndarray, x: np.ndarray, what: str) -> None:
    bad = np.flatnonzero(actual != expected)
    detail = [(float(x[i]), hex(actual[i]), hex(expected[i])) for i in bad[:5]]
    assert bad.size == 0, f"{what}: {bad.size} of {x.size} differ, e.g. (x, got, want) {detail}"


def _finite(x: np.ndarray, limit: float) -> np.ndarray:
    return np.isfinite(x) & (np.abs(x.astype(np.float64)) <= limit)


def test_float_to_half_rounds_to_nearest_even(probe) -> None:
    """CAST_NONE and CAST_RINT are numpy's float32 -> float16 (overflow gives +-inf, NaN
    stays NaN)."""
    x = probe["x"]
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).view(np.uint16)
    nan = np.isnan(x)
    for mode in ("none", "rint"):
        got = probe[f"half_{mode}"]
        assert np.all(np.isnan(got.view(np.float16)[nan])), mode
        _assert_bits(got[~nan], expected[~nan], x[~nan], f"half {mode}")


@pytest.mark.parametrize("mode", ["floor", "ceil", "trunc", "round", "odd"])
def test_float_to_half_directed_modes(probe, mode: str) -> None:
    x = probe["x"]
    keep = _finite(x, 65504.0)
    nearest = x[keep].astype(np.float16).view(np.uint16)
    expected = _directed(x[keep], nearest, np.float16)[mode]
    _assert_bits(probe[f"half_{mode}"][keep], expected, x[keep], f"half {mode}")


def test_float_to_bfloat16_rounds_to_nearest_even(probe) -> None:
    x = probe["x"]
    nan = np.isnan(x)
    expected = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    _assert_bits(probe["bf16_rint"][~nan], expected[~nan], x[~nan], "bf16 rint")


@pytest.mark.parametrize("mode", ["floor", "ceil", "trunc", "round"])
def test_float_to_bfloat16_directed_modes(probe, mode: str) -> None:
    x = probe["x"]
    keep = _finite(x, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max))
    nearest = x[keep].astype(ml_dtypes.bfloat16).view(np.uint16)
    expected = _directed(x[keep], nearest, ml_dtypes.bfloat16)[mode]
    _assert_bits(probe[f"bf16_{mode}"][keep], expected, x[keep], f"bf16 {mode}")


@pytest.mark.parametrize(("op", "fn"), [("add", np.add), ("sub", np.subtract),
                                         ("mul", np.multiply), ("div", np.divide)])  # fmt: skip
def test_half_arithmetic_is_float_rounded_to_nearest_even(probe, op: str, fn) -> None:
    """Exact (float64) result of the two halves, rounded once to half."""
    with np.errstate(all="ignore"):
        a = probe["x"].astype(np.float16).astype(np.float64)
        b = probe["y"].astype(np.float16).astype(np.float64)
        expected = fn(a, b).astype(np.float16)
    got = probe[f"half_{op}"].view(np.float16)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan), op
    _assert_bits(got.view(np.uint16)[~nan], expected.view(np.uint16)[~nan], probe["x"][~nan], op)


@pytest.mark.parametrize(("op", "fn"), [("exp", np.exp), ("ln", np.log)])
def test_exp_and_ln_are_within_one_ulp_of_exact(probe, op: str, fn) -> None:
    x = probe["x"]
    with np.errstate(all="ignore"):
        exact = fn(x.astype(np.float64))
        rounded = exact.astype(np.float32)
    got = probe[op]
    nan = np.isnan(rounded)
    assert np.array_equal(np.isnan(got), nan), op
    same = got[~nan] == rounded[~nan]
    ulp = np.abs(np.spacing(rounded[~nan]))
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf (then `same`)
        close = np.abs(got[~nan].astype(np.float64) - exact[~nan]) <= ulp
    assert np.all(same | close), op
