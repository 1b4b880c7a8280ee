"""How close two implementations of docs/operators.md must agree, and why.

An element is accepted when it is in the same class as expected (NaN, +inf, -inf or
finite) and, if finite,

    |actual - expected| <= eps_C * (ulps + ulps_per_term * (n - 1)) * M  +  half_ulps * ulp_R

* eps_C is the machine epsilon of the compute type C (float32 or float64);
* M is the sum of the absolute values of the terms the element is made of
  (helpers.magnitude): rounding errors scale with the intermediates, which cancellation
  can make much larger than the result;
* n is the number of elements of B summed into the result element (1 when nothing is
  summed): each addition of a sum taken in another order adds up to eps_C times the
  terms' magnitude;
* ulp_R is the spacing of the result type R at |expected|, counted only when R is
  narrower than C: both sides round once from C to R, and values a few eps_C apart can
  round to neighbouring R values (the 1-ulp rule for float16/bfloat16 results).

ORACLE is for independent implementations (torch autograd): the same math in another
order (torch computes norm*x*grad/beta, g/n instead of g*(1/n), pairwise sums) with other
exp/log (<= 1-2 ulp each), i.e. about 6 roundings per side plus the functions: 16 eps_C,
and 2 eps_C per summed term (both sums may round every addition).

TIGHT is for implementations of the same level-2 expressions in the same order (a backend
against reference.py): only exp/log may differ between libms, and a compiler may contract
a*b+c into an FMA: 4 eps_C, plus 1 eps_C per summed term for kernels that sum in another
order (e.g. in parallel).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from lossgrad_compiler import spec

from .magnitude import term_magnitude


@dataclass(frozen=True)
class Tolerance:
    ulps: float  # in eps_C of the element's term magnitude
    ulps_per_term: float  # added per summed term beyond the first
    result_ulps: float = 1.0  # in ulps of R, when R is narrower than C


ORACLE = Tolerance(ulps=16, ulps_per_term=2)
TIGHT = Tolerance(ulps=4, ulps_per_term=1)


def ulp(values: np.ndarray, dtype: Any) -> np.ndarray:
    """The spacing of `dtype` at |values|, as float64 (the smallest subnormal at 0)."""
    with np.errstate(all="ignore"):
        rounded = np.abs(np.asarray(values, np.float64)).astype(dtype)
        return np.abs(np.spacing(rounded)).astype(np.float64)


def close_mask(
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    compute: Any,
    magnitude: np.ndarray | None = None,
    n_terms: int = 1,
    tolerance: Tolerance = ORACLE,
) -> np.ndarray:
    """Elementwise: True where `actual` agrees with `expected` (see the module doc).

    Without a `magnitude` (no error model at hand) the terms are taken to be as large as
    |expected| plus the largest finite |expected| of the array; prefer `assert_matches`."""
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    eps = float(ml_dtypes.finfo(np.dtype(compute)).eps)  # bfloat16 too
    factor = tolerance.ulps + tolerance.ulps_per_term * (n_terms - 1)
    result_dtype = np.asarray(expected).dtype
    finite = np.isfinite(e)
    if magnitude is None:
        magnitude = np.abs(np.where(finite, e, 0.0))
        magnitude = magnitude + np.max(magnitude, initial=0.0)
    with np.errstate(all="ignore"):
        allowed = eps * factor * np.asarray(magnitude, np.float64)
        if result_dtype.itemsize < np.dtype(compute).itemsize:
            allowed = allowed + tolerance.result_ulps * ulp(np.where(finite, e, 0.0), result_dtype)
        near = (a == e) | (np.abs(a - e) <= allowed)  # equal is close, whatever the model
    same_special = (np.isnan(a) & np.isnan(e)) | (np.isinf(e) & (a == e))
    return np.where(finite, near & np.isfinite(a), same_special)


def assert_close(
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    compute: Any,
    magnitude: np.ndarray | None = None,
    n_terms: int = 1,
    tolerance: Tolerance | None = None,
    tight: bool = False,
    context: str = "",
) -> None:
    """Same dtype, same shape and every element close; the message shows the worst ones.
    `tight=True` is short for `tolerance=TIGHT` (the default is ORACLE)."""
    tolerance = tolerance or (TIGHT if tight else ORACLE)
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{context}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{context}: shape {actual.shape} != {expected.shape}"
    ok = close_mask(
        actual,
        expected,
        compute=compute,
        magnitude=magnitude,
        n_terms=n_terms,
        tolerance=tolerance,
    )
    if not ok.all():
        rows = [
            f"  at {tuple(int(i) for i in idx)}: actual {actual[tuple(idx)]!r}, "
            f"expected {expected[tuple(idx)]!r}"
            for idx in np.argwhere(~ok)[:5]
        ]
        raise AssertionError(
            f"{context}: {int((~ok).sum())} of {ok.size} elements differ "
            f"(compute {np.dtype(compute).name}, {tolerance})\n" + "\n".join(rows)
        )


def assert_matches(
    actual: np.ndarray,
    expected: np.ndarray,
    op_type: str,
    inputs: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any],
    *,
    tolerance: Tolerance = ORACLE,
    context: str = "",
) -> None:
    """`assert_close` for one call, with its compute type and term magnitudes worked out."""
    infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}
    compute = spec.validate(op_type, infos, attrs).compute.dtype
    magnitude, n_terms = term_magnitude(op_type, inputs, attrs)
    assert_close(
        actual,
        expected,
        compute=compute,
        magnitude=magnitude,
        n_terms=n_terms,
        tolerance=tolerance,
        context=context or op_type,
    )


def bits(a: np.ndarray, *, raw: bool = False) -> np.ndarray:
    """The bit patterns, for bit-identity checks (-0 != +0). Every NaN maps to one pattern
    unless `raw`: the sign and payload of a NaN are not part of the contract (IEEE 754
    leaves them unspecified, and SIMD and scalar code produce different ones)."""
    a = np.array(a, order="C", copy=True)
    if not raw:
        a[np.isnan(a)] = np.nan
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])
