"""CANN's own Atlas A2 kernels for the three operators (docs/ascend-c.md, "CANN's kernels",
which names the public sources): vector API calls per tile, how many of them are Casts, and
the precision the arithmetic runs in. The static report (ascendc_report.py) sets the
generated kernels beside these figures. A module of that report, not a script of its own:
run `.venv/bin/python benchmarks/ascendc_report.py`.

Only one of CANN's kernels computes in half precision: the KlDivTargetBackward sample for
float16. The operator contract computes float16 in float32 and rounds once, which costs
Casts the sample does not have. `sample_in_half` replays the sample's instruction sequence
in half precision, so the report can measure what that shortcut would do to the results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lossgrad_compiler import reference, spec


@dataclass(frozen=True)
class CannKernel:
    calls: int  # vector API calls per tile
    casts: int  # of which Casts
    compute_bytes: int  # element size of the arithmetic: 4 (float32) or 2 (half)

    @property
    def repeats_per_128(self) -> int:
        """Vector repeats per 128 elements: a repeat is 256 bytes (64 float32 or 128 half
        elements), and a Cast repeats at the width of its wider type (docs/ascend-c.md)."""
        return self.calls * self.compute_bytes // 2


COMPARED = (
    spec.KL_DIV_BACKWARD.name,
    spec.KL_DIV_TARGET_BACKWARD.name,
    spec.SMOOTH_L1_LOSS_BACKWARD.name,
)
"""The operators whose CANN kernels have been counted (`cann_kernel`); the loss family's
newer operators have no figures here yet."""


def cann_kernel(op: str, attrs: dict[str, Any], dtype: str, scalar_g: bool) -> CannKernel | None:
    """CANN's A2 kernel for the same case, or None when there is none to compare with."""
    narrow = dtype != "f32"
    scaled = attrs["reduction"] in ("mean", "batchmean")
    if op == spec.KL_DIV_BACKWARD.name:  # the A2 port: Casts in (g unless scalar) and out
        casts = (2 if scalar_g else 3) if narrow else 0
        return CannKernel((3 if attrs["log_target"] else 2) + casts, casts, 4)
    if op == spec.KL_DIV_TARGET_BACKWARD.name:
        # the sample: float16 in half, bfloat16 through 4 Casts; only mean scales (batchmean is
        # ignored by the sample but needs the same Muls, so it is counted like mean).
        core = (5 if attrs["log_target"] else 6) + (1 if scaled else 0)
        if dtype == "f16":
            return CannKernel(core, 0, 2)
        casts = 4 if dtype == "bf16" else 0
        return CannKernel(core + casts, casts, 4)
    if op == spec.SMOOTH_L1_LOSS_BACKWARD.name:  # the A2 port: 15 vector ops, +4 Casts, 16-bit
        casts = 4 if narrow else 0
        return CannKernel(15 + (1 if scaled else 0) + casts, casts, 4)
    return None


@dataclass(frozen=True)
class HalfMismatch:
    elements: int
    differing: int  # results whose bits differ from reference.py's (NaN equals NaN)
    max_ulps: int  # the largest distance between finite results, in float16 ulps

    @property
    def fraction(self) -> float:
        return self.differing / self.elements


def _ordered(bits: np.ndarray) -> np.ndarray:
    """float16 bit patterns mapped to integers in the order of their values."""
    b = bits.astype(np.int64)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)


def sample_in_half(
    attrs: dict[str, Any], scalar_g: bool, elements: int = 65536, seed: int = 6
) -> HalfMismatch:
    """KlDivTargetBackward float16 as CANN's sample computes it (every instruction rounded
    to half), against reference.py (the contract: float32, rounded once), on random inputs
    in the op's domain (positive targets, or log-targets around -1)."""
    rng = np.random.default_rng(seed)
    h = np.float16
    log_target = bool(attrs["log_target"])
    g = rng.standard_normal(() if scalar_g else elements).astype(h)
    x = rng.standard_normal(elements).astype(h)
    t = rng.normal(-1.0, 1.0, elements) if log_target else rng.uniform(0.0, 4.0, elements)
    t = t.astype(h)
    with np.errstate(all="ignore"):
        if log_target:  # Adds, Sub, Exp, Mul, Mul
            r = g * (((t + h(1)) - x) * np.exp(t))
        else:  # Ln, Adds, Sub, Mul, CompareScalar NE 0, Select
            r = np.where(t != 0, g * ((np.log(t) + h(1)) - x), h(0))
        if attrs["reduction"] in ("mean", "batchmean"):  # Muls by 1/N in half
            r = r * h(1.0 / elements)
    inputs = {"grad_output": g, "self": x, "target": t}
    expected = reference.evaluate(spec.KL_DIV_TARGET_BACKWARD.name, inputs, attrs)
    r = np.asarray(r, h)
    both_nan = np.isnan(r) & np.isnan(expected)
    differ = (r.view(np.uint16) != expected.view(np.uint16)) & ~both_nan
    finite = np.isfinite(r) & np.isfinite(expected)
    ulps = np.abs(_ordered(r.view(np.uint16)) - _ordered(expected.view(np.uint16)))[finite]
    return HalfMismatch(elements, int(differ.sum()), int(ulps.max(initial=0)))
