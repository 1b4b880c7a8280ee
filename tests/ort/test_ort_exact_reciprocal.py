"""The native SmoothL1LossBackward multiplies by 1/beta instead of dividing when beta is a
power of two whose reciprocal is exact (cxx/vmath.h's exact_reciprocal): the results must be
the reference's bit for bit, at the edges of the range too. Betas whose reciprocal is not a
finite value (2^-149 in float32) or that are no power of two keep the division; both paths
are checked on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest

from lossgrad_compiler import reference
from lossgrad_compiler.runtime.ort_io import run_session
from tests.helpers.tolerances import bits
from tests.ort.support import native_session, node_model

# powers of two: normal, with a subnormal reciprocal (2^127), subnormal (2^-127), and the
# smallest float32 (2^-149: 1/beta overflows, so the division stays); and two that are not
BETAS = (0.5, 1.0, 2.0**-20, 2.0**20, 2.0**127, 2.0**-127, 2.0**-149, 0.75, 3.0)


def _edge_values(dtype: np.dtype) -> np.ndarray:
    info = np.finfo(dtype)
    specials = [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        float(info.tiny),
        float(info.smallest_subnormal),
        float(info.max),
        -float(info.max),
        1.0,
        -1.0,
        3.0e-39,
        1.0e30,
    ]
    rng = np.random.default_rng(5)
    spread = rng.normal(0, 1, 200) * np.exp2(rng.integers(-140, 120, 200))
    return np.concatenate([specials, spread]).astype(dtype)


@pytest.mark.parametrize("beta", BETAS, ids=lambda b: f"beta={b!r}")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=lambda d: d.__name__)
def test_division_free_path_is_bit_exact(beta: float, dtype: type) -> None:
    x = _edge_values(np.dtype(dtype))
    t = np.random.default_rng(6).permutation(x)
    go = np.asarray(0.75, dtype)
    attrs = {"reduction": "none", "beta": beta}
    model = node_model("SmoothL1LossBackward", attrs, (dtype, dtype, dtype), ((), x.shape, t.shape))
    session = native_session(model)
    got = run_session(session, {"go": go, "x": x, "t": t})[0]
    want = reference.evaluate(
        "SmoothL1LossBackward", {"grad_output": go, "self": x, "target": t}, attrs
    )
    assert np.array_equal(bits(got), bits(want))
