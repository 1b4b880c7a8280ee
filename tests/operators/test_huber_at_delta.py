"""HuberLossBackward exactly at |x - t| = delta, against PyTorch (issue 44, item 9).

The operator (docs/operators.md) takes the linear branches only where |d| > delta, so at
|d| = delta it computes (d*s)*g. The clamped branch there, (g*s)*delta, is the same number
in exact arithmetic but rounds otherwise where s = 1/n is not a power of two and delta is
not one either: a `<=` for the `<` changes the result under reduction mean, by one
rounding. Under none and sum the two branches are the same number (d*g and g*delta with
d = delta), and the cases pin that too.

PyTorch 2.13's CPU kernel is not one formula: its vectorized loop computes
`norm * clamp(d, -delta, delta) * grad`, (s*d)*g at |d| = delta as the operator does, and
its scalar loop (the tail of a tensor shorter than a vector's multiple) takes the clamped
branch at |d| = delta. The cases have 96 elements, a multiple of every vector length of
float32 and float64 (AVX2, AVX-512), so every element goes through the vectorized loop.
Outside the threshold that loop computes (s*delta)*g where the operator computes
(g*s)*delta; under mean the comparison is therefore at |d| <= delta.

Each case runs through reference.evaluate, the lowering (lower-lossgrad run by xDSL's
interpreter, with static shapes and as a signature) and the ONNX backend's inline mode (run
by onnx's ReferenceEvaluator), and is compared bit for bit with torch's autograd."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import reference, spec
from lossgrad_compiler.context import make_context
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.interpreter import run_function
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.cases import Case
from tests.helpers.modules import build_module
from tests.helpers.torch_oracle import oracle

HUBER = spec.HUBER_LOSS_BACKWARD.name
N = 96  # elements, n of the mean: whole vectors of PyTorch's kernel, not a power of two
# float32 deltas; 1.8592437 and 0.3 are not powers of two, so that the branches round apart
DELTAS = (1.8592437505722046, float(np.float32(0.3)), 0.5, 1.0)


def _distinguishing_g(delta: float, dtype: Any) -> float:
    """A grad_output g for which (g*s)*delta and (delta*s)*g, s = 1/N, differ in `dtype`
    (the clamped and the quadratic branch at d = delta), where any does."""
    c = np.dtype(dtype).type
    s = c(1) / c(N)
    for k in range(1, 400):
        g = c(1 + k / 64)
        if (g * s) * c(delta) != (c(delta) * s) * g:
            return float(g)
    return 1.25  # delta a power of two: the branches never round apart


def _inputs(delta: float, dtype: Any, reduction: str) -> dict[str, np.ndarray]:
    """x - t = +delta and -delta exactly (each a difference Sterbenz's lemma makes exact),
    next to values inside and outside the threshold, eight times over."""
    c = np.dtype(dtype).type
    d = c(delta)
    pairs = [
        (d, c(0)), (c(0), -d), (2 * d, d),  # x - t = +delta
        (c(0), d), (-d, c(0)), (d, 2 * d),  # -delta
        (c(0), c(0)), (d / 2, c(0)), (np.nextafter(d, c(0)), c(0)),  # inside
        (c(3) * d, c(0)), (-c(3) * d, c(0)), (np.nextafter(d, c(10)), c(0)),  # outside
    ] * 8  # fmt: skip
    assert len(pairs) == N
    x = np.asarray([p[0] for p in pairs], dtype)
    t = np.asarray([p[1] for p in pairs], dtype)
    assert np.all(np.abs(x - t)[AT_DELTA] == d)
    g = c(_distinguishing_g(delta, dtype))
    go = np.full(N, g, dtype) if reduction == "none" else np.asarray(g, dtype)
    return {"grad_output": go, "self": x, "target": t}


AT_DELTA = np.asarray([i % 12 < 6 for i in range(N)])  # the elements with |x - t| = delta
COMPARED = np.asarray([i % 12 < 9 for i in range(N)])  # and those inside


def _lowered(case: Case, dynamic: bool) -> np.ndarray:
    module = build_module(case, dynamic=dynamic)
    LowerLossgradPass().apply(make_context(), module)
    (result,) = run_function(module, "f", *(case.inputs[n] for n in case.checked.present))
    return np.asarray(result)


def _inline(case: Case) -> np.ndarray:
    inputs = [(n, a.dtype, list(a.shape)) for n, a in case.inputs.items()]
    node = lo.make_node(HUBER, list(case.inputs), "y", name="huber", **case.attrs)
    model = lo.make_model(lo.make_graph([node], inputs, ["y"], name="g"))
    inline = compile_model(model, target="onnx", mode="inline").model
    assert not any(n.domain == spec.DOMAIN for n in inline.graph.node)
    onnx.checker.check_model(inline)
    return np.asarray(lo.run_reference(inline, case.inputs)["y"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_huber_at_delta_is_pytorchs(reduction: str, delta: float, dtype: Any) -> None:
    attrs = {"delta": delta, "reduction": reduction}
    inputs = _inputs(delta, dtype, reduction)
    case = Case(HUBER, inputs, attrs)
    expected = oracle(HUBER, inputs, attrs)
    results = {
        "reference": reference.evaluate(HUBER, inputs, attrs),
        "lowered": _lowered(case, dynamic=False),
        "lowered signature": _lowered(case, dynamic=True),
        "inline": _inline(case),
    }
    compared = COMPARED if reduction == "mean" else np.ones(N, bool)
    for name, found in results.items():
        assert found.dtype == expected.dtype, name
        assert np.array_equal(found[compared], expected[compared]), (name, found[:6], expected[:6])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("delta", DELTAS[:2])
def test_the_mean_cases_tell_the_branches_apart(delta: float, dtype: Any) -> None:
    """Where delta is not a power of two, PyTorch's value at |d| = delta is the quadratic
    branch's, one rounding away from the clamped branch's: a `<=` would give the latter."""
    inputs = _inputs(delta, dtype, "mean")
    expected = oracle(HUBER, inputs, {"delta": delta, "reduction": "mean"})
    c = np.dtype(dtype).type
    s, g, d = c(1) / c(N), c(inputs["grad_output"]), c(delta)
    assert np.all(expected[AT_DELTA & (np.arange(N) % 12 < 3)] == (d * s) * g)
    assert np.all(expected[AT_DELTA & (np.arange(N) % 12 >= 3)] == (-d * s) * g)
    assert (d * s) * g != (g * s) * d and (-d * s) * g != (g * -s) * d
