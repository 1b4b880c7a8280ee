"""How IREE's classification results must agree with reference.evaluate, and why.

The NLL operators' bodies hold no product that feeds a sum and no function that libms
round differently: bit for bit. Level 2 of CrossEntropyLossGrad is `gl - exp(lp) * rowsum`
with `rowsum = a + s * W` and, where the result is not a half type, `gl = a + s * w`. IREE
(llvm-cpu) runs the same ops in the same order and sums the reductions (the kept weight,
the class weight) in order, as the reference does, with two differences:
* exp: IREE expands `math.exp` into its own polynomial (within 1 ulp in float32), the
  reference takes numpy's (within about 2.3 ulp in float32);
* FMA: IREE's LLVM contracts `a + s * W` into one fused multiply-add (IREE 3.13 compiles
  for llvm-cpu with FP contraction on; no flag turns it off), one rounding fewer.
So float32 and float64 results differ by a few ulps of their terms and are compared with
TIGHT (4 eps_C of the terms' magnitude; measured worst 2.7 in float32, 1.9 in float64).
With exp exact (log-probabilities 0 or -inf, `exp_exact`) and no smoothing (no product that
feeds a sum) they are bit-identical, a weighted mean's kept weight included
(test_iree_cross_entropy.py). A half result rounds both differences away almost always:
bit-identical on the class_cases grid and with exp exact; over thousands of elements a few
land on the other side of a rounding boundary, 1 ulp of the result, which TIGHT allows for
a result type narrower than C."""

from __future__ import annotations

import dataclasses

import numpy as np

from lossgrad_compiler import reference, spec
from tests.helpers.class_cases import ClassCase
from tests.helpers.tolerances import TIGHT, assert_close

CE = spec.CROSS_ENTROPY_LOSS_GRAD.name


def differs_in_ulps(case: ClassCase) -> bool:
    """Whether IREE's float32/float64 results of the case may be a few ulps off (exp, FMA)."""
    return case.op_type == CE


def exp_free(case: ClassCase) -> np.ndarray:
    """The reference's result at exp(lp) = 0 (self = -inf): gl, the terms before the
    product."""
    inputs = dict(case.inputs)
    inputs["self"] = np.full_like(inputs["self"], -np.inf)
    return reference.evaluate(case.op_type, inputs, case.attrs)


def magnitude(case: ClassCase, expected: np.ndarray) -> np.ndarray:
    """|gl| + |exp(lp) * rowsum| per element (float64): the product is gl - the result."""
    gl = exp_free(case).astype(np.float64)
    return np.abs(gl) + np.abs(gl - expected.astype(np.float64))


def exp_exact(case: ClassCase, seed: int = 0) -> ClassCase:
    """The case with log-probabilities 0 or -inf (exp 1 or 0, exact in every libm)."""
    rng = np.random.default_rng(seed)
    lp = case.inputs["self"]
    inputs = dict(case.inputs)
    inputs["self"] = np.where(rng.random(lp.shape) < 0.5, 0.0, -np.inf).astype(lp.dtype)
    return dataclasses.replace(case, inputs=inputs, label=case.label + "-exp-exact")


def assert_agrees(got: np.ndarray, case: ClassCase, *, bits: bool | None = None) -> None:
    """`got` is the reference's result: bit for bit, or within TIGHT of its terms where
    a float32 or float64 result may differ in ulps (`bits` overrides; see the module doc)."""
    want = case.expected()
    assert isinstance(got, np.ndarray), case.label  # the gradient alone, not (gradient, count)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), case.label
    if bits is None:
        bits = not differs_in_ulps(case) or case.checked.result_type.is_half
    if bits:
        assert got.tobytes() == want.tobytes(), (case.label, got, want)
        return
    assert_close(
        got, want, compute=case.checked.compute.dtype, magnitude=magnitude(case, want),
        tolerance=TIGHT, context=case.label,
    )  # fmt: skip
