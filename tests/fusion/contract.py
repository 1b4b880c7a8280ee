"""The fusion contract of docs/fusion.md ("What fusion guarantees"), as a check.

The original graph's meaning is ONNX's, evaluated by onnx's ReferenceEvaluator, where every
operation rounds once to its element type. ONNX leaves three things open, and the check
evaluates the original at each end of each:

* Exp and Log: any result within E = 4 ulp of the exact value (ONNX does not specify their
  accuracy; the native library's are within about 1 ulp, numpy's float32 exp and log, which
  the ReferenceEvaluator and reference.py use, within 2.4 and 3.8 ulp on AVX-512 machines).
  The original is evaluated with every Exp and Log result moved by k = -4..4 representable
  steps from the correctly rounded value, each kept within E ulp of the exact value (an
  infinity counts as the power of two just past the largest finite number).
* Sigmoid: ONNX gives its formula, 1/(1 + exp(-x)), not its accuracy. The check reads it
  as onnx's reference computes it, one exp of -|x| then 1/(1 + e) or e/(1 + e), with that
  exp moved like Exp's (the kernels compute it so).
* Sign(NaN): ONNX defines Sign for negative, zero and positive inputs only. The original is
  evaluated with Sign(NaN) = NaN (numpy, ONNX Runtime's float32 kernel) and = 0 (ONNX
  Runtime's float16 kernel).
* ReduceSum: the order of the additions. An element that adds n > 1 terms may differ by
  2 (n - 1) eps_C M, and where its finite terms' magnitudes add up past the largest finite
  value, its class depends on that order and is not checked.

A result element is accepted when, against one of those evaluations, it has the same class
(NaN, +inf, -inf, finite) and, if finite, the same value, except where

* it adds n > 1 terms: then within 2 (n - 1) eps_C M, plus 1 ulp of R where R is narrower
  than C (another order of additions, then one rounding to R);
* it is SmoothL1LossBackward with beta > 0 and |result| < 2 tiny_C / beta: within q_C / beta,
  plus 1 ulp of R where R is narrower (the exporter's (s*d)/beta rounds s*d before dividing
  by a beta = 2^-k, exact except where s*d is subnormal);

where C is the type the original computes in, R the result's type, M the sum of the
magnitudes of the terms the element is made of (as in tests/helpers/magnitude.py, in long
double here), tiny_C the smallest normal and q_C the smallest subnormal of C. (With the
operations in the same order, an implementation whose exp and log are within 4 ulp computes
exactly one of the evaluations: nothing else can differ.)

The bound is the gradient's: it applies to the gradient's output and to every other output
that holds its values in the same order (gradient_copies: the same tensor read through
Identity, Reshape, Squeeze, Unsqueeze, Flatten, an Expand or Slice that keeps every element,
or a Cast to a float type), with R that output's type; every other output is checked with
B = 0.

With `reassociate=True` (fuse(model, reassociate=True)), the pass may evaluate in another
order: elements are checked only where every input and exp(t) is 0 or within
[2^-40, 2^40] in magnitude (float32; [2^-300, 2^300] for float64), and then within
16 eps_C M + 4 (n - 1) eps_C M + [1 ulp of R where R is narrower than C]."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from lossgrad_compiler import spec
from lossgrad_compiler.onnx import run_reference
from tests.helpers.divisors import reduction_scale

ULPS = 4  # E: how far an Exp or Log result may be from the exact value
STEPS = (0, -1, 1, -2, 2, -3, 3, -4, 4)  # the correctly rounded evaluation first
HP = np.longdouble  # the "exact" values: 64-bit significand on x86-64
assert np.finfo(HP).nmant >= 63, "the contract check needs an 80-bit long double"


# --------------------------------------------------------------------------- Exp, Log, Sign


def _ulp(exact: np.ndarray, dtype: Any) -> np.ndarray:
    """The spacing of `dtype` at each exact value (the subnormal spacing below the normal
    range, the last finite spacing above it)."""
    info = np.finfo(dtype)
    magnitude = np.abs(exact)
    with np.errstate(all="ignore"):
        _, exponent = np.frexp(np.where(np.isfinite(magnitude) & (magnitude > 0), magnitude, 1))
    exponent = np.clip(exponent.astype(np.int64) - 1, info.minexp, info.maxexp - 1)
    return np.ldexp(HP(1), exponent - info.nmant).astype(HP)


def _as_hp(values: np.ndarray, dtype: Any) -> np.ndarray:
    """Values of `dtype` in long double, an infinity as the power of two past the largest
    finite value (the distance IEEE 754 rounding measures overflow by)."""
    info = np.finfo(dtype)
    out = values.astype(HP)
    past = np.ldexp(HP(1), info.maxexp)
    return np.where(np.isinf(out), np.sign(out) * past, out)


def nudged(function: Any, x: np.ndarray, step: int) -> np.ndarray:
    """function(x) moved `step` representable values from the correctly rounded result,
    as far as it stays within ULPS ulp of the exact value."""
    dtype = x.dtype
    with np.errstate(all="ignore"):
        exact = function(x.astype(HP))
        value = exact.astype(dtype)
        if step == 0:
            return value
        limit = ULPS * _ulp(exact, dtype)
        direction = np.asarray(np.inf if step > 0 else -np.inf, dtype)
        for _ in range(abs(step)):
            candidate = np.nextafter(value, direction)
            inside = np.abs(_as_hp(candidate, dtype) - exact) <= limit
            value = np.where(inside & ~np.isnan(exact), candidate, value)
    return value


def _unary(name: str, function: Any, step: int) -> type[OpRun]:
    def _run(self: OpRun, x: np.ndarray) -> tuple[np.ndarray]:
        return (nudged(function, np.asarray(x), step),)

    return type(name, (OpRun,), {"op_domain": "", "_run": _run})


def _sigmoid(step: int) -> type[OpRun]:
    """onnx's reference Sigmoid (one exp of -|x|, then 1/(1 + e) or e/(1 + e)) with that
    exp moved `step` values: the kernels compute it so, with their own exp."""

    def _run(self: OpRun, x: np.ndarray) -> tuple[np.ndarray]:
        x = np.asarray(x)
        positive = x > 0
        with np.errstate(all="ignore"):
            e = nudged(np.exp, np.where(positive, -x, x), step)
            one = np.asarray(1, x.dtype)
            return ((np.where(positive, one, e) / (one + e)).astype(x.dtype),)

    return type("Sigmoid", (OpRun,), {"op_domain": "", "_run": _run})


def _sign(nan_gives: float) -> type[OpRun]:
    def _run(self: OpRun, x: np.ndarray) -> tuple[np.ndarray]:
        x = np.asarray(x)
        return (np.where(np.isnan(x), np.asarray(nan_gives, x.dtype), np.sign(x)),)

    return type("Sign", (OpRun,), {"op_domain": "", "_run": _run})


def _op_types(model: onnx.ModelProto) -> set[str]:
    found: set[str] = set()

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            found.add(node.op_type)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)

    walk(model.graph)
    return found


def meanings(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], outputs: Sequence[str]
) -> list[list[np.ndarray]]:
    """The original's outputs under ONNX's semantics at each end of what ONNX leaves open
    (Exp/Log accuracy, Sign(NaN)); the first is numpy's own (correctly rounded Exp and Log
    steps, Sign(NaN) = NaN)."""
    ops = _op_types(model)
    steps = STEPS if ops & {"Exp", "Log", "Sigmoid"} else (0,)
    signs = (np.nan, 0.0) if "Sign" in ops else (np.nan,)
    found = []
    for step in steps:
        for sign in signs:
            new_ops = [_unary("Exp", np.exp, step), _unary("Log", np.log, step), _sign(sign)]
            new_ops.append(_sigmoid(step))
            with np.errstate(all="ignore"):
                evaluator = ReferenceEvaluator(model, new_ops=new_ops)
                found.append(list(evaluator.run(list(outputs), dict(feeds))))
    return found


# --------------------------------------------------------------------------- the bound


@dataclass
class Terms:
    """What an element of the gradient is made of: its operator, attributes, and the values
    of grad_output (times the scale), self and target that it reads."""

    op_type: str
    attrs: dict[str, Any]
    values: dict[str, np.ndarray] = field(default_factory=dict)


def _term_values(terms: Terms) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """(|terms| over the iteration space, exp(t) there, the result shape), in long double."""
    arrays = {n: np.asarray(v) for n, v in terms.values.items() if v is not None}
    infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in arrays.items()}
    checked = spec.validate(terms.op_type, infos, terms.attrs)
    space = tuple(int(d) for d in checked.iteration_shape)  # type: ignore[union-attr]
    result = tuple(int(d) for d in checked.result_shape)  # type: ignore[union-attr]
    go, x, t = (np.broadcast_to(arrays[n].astype(HP), space) for n in spec.INPUT_NAMES)
    extra = {  # the optional inputs
        n: np.broadcast_to(a.astype(HP), space)
        for n, a in arrays.items()
        if n not in spec.INPUT_NAMES
    }
    self_shape = tuple(int(d) for d in checked.shapes["self"])  # type: ignore[union-attr]
    b = tuple(int(d) for d in checked.broadcast_shape)  # type: ignore[union-attr]
    scale = reduction_scale(checked.reduction, self_shape, b)
    attrs = checked.attrs
    with np.errstate(all="ignore"):
        ge = np.abs(go) * HP(1.0 if math.isinf(scale) else scale)
        e = np.exp(t)
        if terms.op_type == "KlDivBackward":
            m = ge * (e if attrs["log_target"] else np.abs(t))
        elif terms.op_type == "KlDivTargetBackward":
            if attrs["log_target"]:
                m = ge * e * (np.abs(t) + 1 + np.abs(x))
            else:
                m = np.where(t == 0, HP(0), ge * (np.abs(np.log(t)) + 1 + np.abs(x)))
        elif terms.op_type in FAMILY_TERMS:
            m = FAMILY_TERMS[terms.op_type](ge, x, t, extra, attrs)
        else:
            beta = HP(attrs["beta"])
            if beta == 0:
                m = ge
            else:
                inside = np.abs(x - t) <= beta
                m = np.where(inside, ge * (1 + (np.abs(x) + np.abs(t)) / beta), ge)
    return np.broadcast_to(m, space), np.broadcast_to(e, space), result


def _mse(ge: Any, x: Any, t: Any, extra: dict[str, Any], attrs: dict[str, Any]) -> Any:
    """2|ge|(|x| + |t|): ((x - t)*(2/n))*g."""
    return 2 * ge * (np.abs(x) + np.abs(t))


def _huber(ge: Any, x: Any, t: Any, extra: dict[str, Any], attrs: dict[str, Any]) -> Any:
    """|ge| max(delta, |x| + |t|): the clamped branches are ge*delta, the other d*ge."""
    return ge * np.maximum(HP(attrs["delta"]), np.abs(x) + np.abs(t))


def _soft_margin(ge: Any, x: Any, t: Any, extra: dict[str, Any], attrs: dict[str, Any]) -> Any:
    """|ge||t|(2 + |t x|): sigmoid(t x) - 1 cancels near 1."""
    return ge * np.abs(t) * (2 + np.abs(t * x))


def _bce(ge: Any, x: Any, t: Any, extra: dict[str, Any], attrs: dict[str, Any]) -> Any:
    """|ge||w|(|x| + |t|)(2 + |x|)/max(|x(1 - x)|, 1e-12)."""
    w = np.abs(extra["weight"]) if "weight" in extra else HP(1)
    den = np.maximum(np.abs(x * (1 - x)), HP(1e-12))
    return ge * w * (np.abs(x) + np.abs(t)) * (2 + np.abs(x)) / den


def _bce_logits(ge: Any, x: Any, t: Any, extra: dict[str, Any], attrs: dict[str, Any]) -> Any:
    """|ge||w|(sig(1 + |x|) + |t|), or with pos_weight p
    |ge||w|((|p t| + 1 + |t|) sig (1 + |x|) + |p t|), sig = sigmoid(x)."""
    w = np.abs(extra["weight"]) if "weight" in extra else HP(1)
    t = np.abs(t)
    sig = 1 / (1 + np.exp(-x)) * (1 + np.where(np.isinf(x), HP(0), np.abs(x)))
    if "pos_weight" in extra:
        pt = np.abs(extra["pos_weight"]) * t
        return ge * w * ((pt + 1 + t) * sig + pt)
    return ge * w * (sig + t)


def _l1(ge: Any, x: Any, t: Any, extra: dict[str, Any], attrs: dict[str, Any]) -> Any:
    """|ge|: (g/n) times a sign, which is exact."""
    return ge


FAMILY_TERMS = {
    "BinaryCrossEntropyWithLogitsBackward": _bce_logits,
    "BinaryCrossEntropyBackward": _bce,
    "MseLossBackward": _mse,
    "HuberLossBackward": _huber,
    "SoftMarginLossBackward": _soft_margin,
    "L1LossBackward": _l1,
}
"""M of the loss family's operators (the sizes of the terms an element is made of, as in
tests/helpers/magnitude.py), from |ge| = |grad_output| * scale, self, target and the
optional inputs."""


def _sum_to(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    lead = values.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + j for j, d in enumerate(shape) if d == 1 and values.shape[lead + j] != 1
    )
    return np.sum(values, axis=axes).reshape(shape) if axes else np.asarray(values)


def _max_to(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    lead = values.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + j for j, d in enumerate(shape) if d == 1 and values.shape[lead + j] != 1
    )
    if not axes:
        return np.asarray(values)
    if values.size == 0:
        return np.zeros(shape, values.dtype)
    return np.max(values, axis=axes).reshape(shape)


@dataclass
class Allowance:
    bound: np.ndarray  # B per result element (long double)
    unchecked: np.ndarray  # True where the contract leaves the class open
    n_terms: int

    def reshaped(self, shape: tuple[int, ...]) -> Allowance:
        """The same allowance for the same elements in `shape` (row-major order)."""
        return Allowance(
            np.reshape(self.bound, shape), np.reshape(self.unchecked, shape), self.n_terms
        )


def allowance(
    terms: Terms, compute: Any, result_dtype: Any, expected: np.ndarray, reassociate: bool
) -> Allowance:
    m, e, shape = _term_values(terms)
    finite_m = np.where(np.isfinite(m), m, HP(0))
    magnitude = _sum_to(finite_m, shape)
    n = max(1, m.size // max(1, int(np.prod(shape))))
    eps = HP(np.finfo(compute).eps)
    tiny = HP(np.finfo(compute).smallest_subnormal)
    biggest = HP(np.finfo(compute).max)
    narrower = np.dtype(result_dtype).itemsize < np.dtype(compute).itemsize
    with np.errstate(all="ignore"):
        finite = np.where(np.isfinite(expected), expected, 0).astype(result_dtype)
        spacing = np.abs(np.spacing(np.abs(finite))).astype(HP) if narrower else HP(0)
        if reassociate:
            bound = eps * (16 + 4 * (n - 1)) * magnitude + spacing
        elif n > 1:  # another order of the additions, then one rounding to R
            bound = eps * 2 * (n - 1) * magnitude + spacing
        else:  # the same operations in the same order: the same value
            bound = np.zeros(shape, HP)
        beta = float(terms.attrs.get("beta", 0.0))
        if terms.op_type == "SmoothL1LossBackward" and beta > 0:
            # (s*d)/beta rounds s*d first: apart only where s*d is subnormal
            normal = HP(np.finfo(compute).tiny)
            low = np.abs(np.asarray(expected).astype(HP)) < 2 * normal / HP(beta)
            bound = bound + np.where(low, tiny / HP(beta) + spacing, HP(0))
    unchecked = np.zeros(shape, bool)
    if n > 1:  # the order of a sum decides the class once its terms can overflow
        unchecked = magnitude > biggest
    if reassociate:
        unchecked = unchecked | ~_moderate(terms, m, e, shape, compute)
    return Allowance(np.broadcast_to(bound, shape), unchecked, n)


def _moderate(
    terms: Terms, m: np.ndarray, e: np.ndarray, shape: tuple[int, ...], compute: Any
) -> np.ndarray:
    """Per result element: every input it reads and exp(t) is 0 or within the moderate
    range (reassociation changes only roundings there)."""
    low, high = (
        (HP(2.0**-300), HP(2.0**300))
        if compute == np.float64
        else (
            HP(2.0**-40),
            HP(2.0**40),
        )
    )
    ok = np.ones(m.shape, bool)
    space = m.shape
    beta = float(terms.attrs.get("beta", 1.0)) or 1.0
    arrays = [
        np.broadcast_to(np.asarray(terms.values[n]).astype(HP), space) for n in spec.INPUT_NAMES
    ]
    uses_exp = terms.op_type != "SmoothL1LossBackward" and terms.attrs.get("log_target")
    if uses_exp:
        arrays.append(e)
    arrays.append(np.broadcast_to(HP(beta), space))
    for a in arrays:
        magnitude = np.abs(a)
        ok &= np.isfinite(a) & ((magnitude == 0) | ((magnitude >= low) & (magnitude <= high)))
    bad = _max_to((~ok).astype(np.int8), shape)
    return bad == 0


# --------------------------------------------------------------------------- the check


def classify(values: np.ndarray) -> np.ndarray:
    """0 finite, 1 NaN, 2 +inf, 3 -inf."""
    v = np.asarray(values)
    return np.select([np.isnan(v), v == np.inf, v == -np.inf], [1, 2, 3], 0)


def accepted(actual: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> np.ndarray:
    a = np.asarray(actual).astype(HP)
    e = np.asarray(expected).astype(HP)
    same = classify(actual) == classify(expected)
    with np.errstate(all="ignore"):
        close = np.abs(a - e) <= bound
    return same & (~np.isfinite(e) | close)


@dataclass
class Verdict:
    ok: bool
    message: str = ""


def check_output(
    actual: np.ndarray,
    evaluations: Sequence[np.ndarray],
    allowed: Allowance | None,
    label: str,
) -> Verdict:
    """`actual` against the original's evaluations: accepted elementwise by any of them."""
    actual = np.asarray(actual)
    # an evaluation of another shape or type accepts nothing (ORT's rewrites once gave an
    # Expand to a shape with a 0 the shape (1, 1); ONNX's meaning is there besides)
    same = [
        np.asarray(e)
        for e in evaluations
        if np.asarray(e).shape == actual.shape and np.asarray(e).dtype == actual.dtype
    ]
    if not same:
        kinds = sorted({f"{np.asarray(e).dtype}{np.asarray(e).shape}" for e in evaluations})
        return Verdict(False, f"{label}: {actual.dtype}{actual.shape}, the original gives {kinds}")
    evaluations = same
    bound = allowed.bound if allowed is not None else np.zeros(actual.shape, HP)
    ok = np.zeros(actual.shape, bool)
    for expected in evaluations:
        ok |= accepted(actual, expected, bound)
    if allowed is not None:
        ok |= allowed.unchecked
    if ok.all():
        return Verdict(True)
    rows = []
    for idx in np.argwhere(~ok)[:4]:
        at = tuple(int(i) for i in idx)
        options = sorted({repr(np.asarray(e)[at]) for e in evaluations})
        rows.append(f"at {at}: {actual[at]!r}, the original gives {' or '.join(options)}")
    count = int((~ok).sum())
    return Verdict(
        False, f"{label}: {count} of {ok.size} elements break the contract; " + "; ".join(rows)
    )


def evaluate_terms(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], names: Mapping[str, str | None]
) -> dict[str, np.ndarray]:
    """The values the original computes for the operator's grad_output, self and target
    (a missing grad_output is the constant 1 of self's type)."""
    wanted = [v for v in names.values() if v is not None and v not in feeds]
    found = dict(feeds)
    if wanted:
        evaluator = ReferenceEvaluator(model)
        with np.errstate(all="ignore"):
            found |= dict(zip(wanted, evaluator.run(wanted, dict(feeds)), strict=True))
    values = {}
    for key, name in names.items():
        values[key] = np.asarray(found[name]) if name is not None else None
    if values.get("grad_output") is None:
        values["grad_output"] = np.ones((), values["self"].dtype)
    return values


# Ops whose result is their first input's elements in the same (row-major) order.
VALUE_PRESERVING = frozenset({"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})
# Ops that are so only where their result has as many elements as their first input
# (Expand then repeats nothing; Slice, with positive steps, drops nothing and keeps the
# order): an exporter's or the inline mode's way of giving the gradient self's shape.
SIZE_PRESERVING = frozenset({"Expand", "Slice"})
# A Cast to one of these rounds once more: the gradient in its compute type before the
# Cast to the result's is the same sum, held to the bound for that output's own type.
FLOAT_CASTS = frozenset({onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE})


def gradient_copies(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], output: str
) -> set[str]:
    """The graph outputs of `model` that hold the values of `output` in the same order on
    `feeds`, perhaps in another float type: `output` itself and those reached from the same
    tensor as it through VALUE_PRESERVING ops, SIZE_PRESERVING ops that keep every element
    and FLOAT_CASTS (main graph)."""
    producers = {
        name: node
        for node in model.graph.node
        if node.domain in ("", "ai.onnx")
        for name in node.output
    }

    def walk(name: str) -> tuple[str, list[onnx.NodeProto]]:
        """The tensor `name` copies, and the SIZE_PRESERVING nodes on the way."""
        conditional = []
        while name in producers and _copies(producers[name]):
            node = producers[name]
            if node.op_type in SIZE_PRESERVING:
                conditional.append(node)
            name = node.input[0]
        return name, conditional

    source, own = walk(output)
    candidates = {}
    for info in model.graph.output:
        if info.name != output:
            found, conditional = walk(info.name)
            if found == source:
                candidates[info.name] = conditional
    if not candidates:
        return {output}
    nodes = [*own, *(n for c in candidates.values() for n in c)]
    values = _values_of(model, feeds, [n for node in nodes for n in _size_inputs(node)])

    def keeps_every_element(node: onnx.NodeProto) -> bool:
        steps = node.input[4] if node.op_type == "Slice" and len(node.input) > 4 else ""
        positive = not steps or bool(np.all(values[steps] > 0))
        return positive and values[node.output[0]].size == values[node.input[0]].size

    if not all(keeps_every_element(node) for node in own):
        return {output}
    kept = {name for name, c in candidates.items() if all(map(keeps_every_element, c))}
    return {output, *kept}


def _copies(node: onnx.NodeProto) -> bool:
    """The node passes its first input's elements on in order (rounded, for a Cast)."""
    if node.op_type == "Cast":
        to = next((a.i for a in node.attribute if a.name == "to"), 0)
        return to in FLOAT_CASTS
    return node.op_type in VALUE_PRESERVING | SIZE_PRESERVING


def _size_inputs(node: onnx.NodeProto) -> list[str]:
    """The values that decide whether a SIZE_PRESERVING node keeps every element."""
    steps = [node.input[4]] if node.op_type == "Slice" and len(node.input) > 4 else []
    return [node.input[0], node.output[0], *(s for s in steps if s)]


def _values_of(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], names: Sequence[str]
) -> dict[str, np.ndarray]:
    """The values of `names` (inputs, initializers or node outputs of the main graph)."""
    found = {k: np.asarray(v) for k, v in feeds.items()}
    found |= {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    wanted = sorted({n for n in names if n not in found})
    if wanted:
        with np.errstate(all="ignore"):
            run = ReferenceEvaluator(model).run(wanted, dict(feeds))
        found |= {n: np.asarray(v) for n, v in zip(wanted, run, strict=True)}
    return found


def run_fused_reference(fused: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[Any]:
    with np.errstate(all="ignore"):
        out = run_reference(fused, feeds)
    return [out[o.name] for o in fused.graph.output]


# --------------------------------------------------------------------------- runtimes


def _ort_errors() -> tuple[type[BaseException], ...]:
    """The exceptions ONNX Runtime raises for a model or a run it refuses."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    names = ("Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "RuntimeException")
    return tuple(getattr(state, n) for n in names if hasattr(state, n))


ORT_ERRORS = _ort_errors()
ORIGINAL_IN_ORT = "original in ORT without rewrites"


def _computes_in_half(model: onnx.ModelProto) -> bool:
    """Some node of the main graph computes in float16 or bfloat16 (where ONNX Runtime's CPU
    provider computes in float32 instead)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    types |= {v.name: v.type.tensor_type.elem_type for v in inferred.graph.output}
    half = (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
    moving = {"Cast", "Identity", "Shape", "Reshape", "Expand", "Squeeze", "Unsqueeze"}
    return any(
        types.get(out) in half
        for node in model.graph.node
        if node.op_type not in moving
        for out in node.output
    )


def _has_lossgrad_nodes(model: onnx.ModelProto) -> bool:
    return any(n.domain == spec.DOMAIN for n in model.graph.node)


def run_ort(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], how: str, optimize: bool = True
) -> list[Any]:
    """One run of `model` in ONNX Runtime's CPU provider:
    "stock": the model as it is, with the native kernel library registered if it has
    ai.lossgrad nodes; "runtime": lossgrad_compiler.evaluation.ort.session (compile_model's
    functions model, native kernels); "functions": the same without the library (standard
    ONNX function bodies), ORT's graph rewrites off. `optimize=False` turns them off for
    "stock" too."""
    import onnxruntime as ort

    from lossgrad_compiler.evaluation.ort import session
    from lossgrad_compiler.runtime.ort_io import make_session, run_session
    from lossgrad_compiler.targets.ort_library import library_path

    if how == "stock" and not optimize:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 3
        if _has_lossgrad_nodes(model):
            options.register_custom_ops_library(library_path())
        runner = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    elif how == "stock":
        library = library_path() if _has_lossgrad_nodes(model) else None
        runner = make_session(model, custom_ops_library=library)
    elif how == "functions":
        # ORT's rewrites would act inside the inlined function bodies (DivMulFusion turns
        # their grad_output * (1/n) into a division, one rounding apart): the bodies are
        # checked as ONNX defines them
        off = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        runner = session(model, native=False, graph_optimization_level=off)
    else:
        runner = session(model)
    return run_session(runner, dict(feeds))


@dataclass
class Subject:
    """A graph and what the check needs to know about the gradient it computes."""

    model: onnx.ModelProto
    op_type: str
    attrs: dict[str, Any]
    terms: dict[str, str | None]  # names of the values grad_output (x scale), self, target
    compute: Any  # numpy dtype the original computes the gradient in
    output: str = "y"  # the gradient's output


def check_fusion(
    subject: Subject,
    fused: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    *,
    reassociate: bool = False,
    runtimes: Sequence[str] = ("reference", "stock", "runtime"),
    original_in_ort: bool = True,
) -> list[str]:
    """Every way the fused model breaks the contract on `feeds` (empty: none)."""
    original = subject.model
    names = [o.name for o in original.graph.output]
    if [o.name for o in fused.graph.output] != names:
        return [f"the fused model's outputs {[o.name for o in fused.graph.output]} != {names}"]
    evaluations = meanings(original, feeds, names)
    values = evaluate_terms(original, feeds, subject.terms)
    terms = Terms(subject.op_type, subject.attrs, values)
    problems: list[str] = []
    gradient_shape = np.asarray(evaluations[0][names.index(subject.output)]).shape
    # Another output holds the gradient's own values (docs/fusion.md: the bound is per
    # element of the gradient) where it reaches the same tensor as the gradient's output
    # through value-preserving ops and float Casts only; it gets the gradient's allowance
    # for its own type, reshaped. Every other output (an intermediate, a value computed
    # from the gradient) keeps B = 0.
    same = gradient_copies(original, feeds, subject.output)
    allowed: dict[str, Allowance | None] = {}
    for i, name in enumerate(names):
        found = np.asarray(evaluations[0][i])
        if name not in same or found.dtype not in (np.float16, np.float32, np.float64):
            allowed[name] = None
            continue
        expected = found.reshape(gradient_shape)
        allowed[name] = allowance(
            terms, subject.compute, expected.dtype, expected, reassociate
        ).reshaped(found.shape)
    # ONNX Runtime as its users run it rewrites graphs: Mul(x, Div(1, n)) becomes
    # Div(x, n) (its DivMulFusion), which rounds otherwise. With its rewrites off it runs
    # ONNX's operations one by one, except that its CPU provider computes float16 arithmetic
    # in float32 and drops the Casts between consecutive ops (its InsertCastTransformer).
    # So: the original without rewrites must give ONNX's meaning (float16 computations
    # aside), and the fused model's runs in ORT are held against ONNX's meaning or against
    # the original's run in ORT with the same rewrites. Where ORT does not run the original
    # (its rewrites reject some valid models), the fused model need not run there either.
    results: dict[str, list[Any]] = {}
    ort_original: list[Any] | None = None
    unrun: list[str] = []  # where ORT does not run the original, and why (said on failure)
    if original_in_ort:
        try:
            ort_original = run_ort(original, feeds, "stock")
        except ORT_ERRORS as err:  # not a place the original runs
            runtimes = [how for how in runtimes if how == "reference"]
            unrun.append(f"the original does not run in ORT ({type(err).__name__}: {err})")
        try:
            # ONNX Runtime's Sigmoid is an approximation (millions of ulp from the exact
            # value for large negative inputs): not ONNX's meaning as the contract reads it
            if not _computes_in_half(original) and "Sigmoid" not in _op_types(original):
                results[ORIGINAL_IN_ORT] = run_ort(original, feeds, "stock", optimize=False)
        except ORT_ERRORS as err:  # e.g. Cast(saturate=0) to a type that is no float8
            unrun.append(f"without rewrites ({type(err).__name__}: {err})")
    if not _has_lossgrad_nodes(fused):  # the runtime's session compiles ai.lossgrad models
        runtimes = [how for how in runtimes if how in ("reference", "stock")]
    for how in runtimes:
        try:
            if how == "reference":
                results[how] = run_fused_reference(fused, feeds)
            else:
                results[how] = run_ort(fused, feeds, how)
        except Exception as err:  # a fused model that does not run is a finding
            problems.append(f"fused model under {how}: {type(err).__name__}: {err}")
    for how, outputs in results.items():
        for i, name in enumerate(names):
            if how == ORIGINAL_IN_ORT and allowed[name] is None:
                # an output that is not the gradient's values is not bounded by the
                # contract: a sum read out (ReduceSum's order is open) may differ from
                # numpy's by an ulp
                continue
            against = [np.asarray(e[i]) for e in evaluations]
            if how in ("stock", "runtime", "functions") and ort_original is not None:
                against.append(np.asarray(ort_original[i]))
            verdict = check_output(
                np.asarray(outputs[i]), against, allowed[name], f"{how}, output '{name}'"
            )
            if not verdict.ok:
                problems.append(verdict.message)
    return [*problems, *unrun] if problems else []


def wrong_compute_types(fused: onnx.ModelProto, compute: Any) -> list[str]:
    """The ai.lossgrad nodes of the fused model that do not compute in `compute`, the type
    the original computes the gradient in (SmoothL1LossBackward with beta 0 and
    L1LossBackward without a mean aside: g*sgn(d) is the same in every type)."""
    inferred = onnx.shape_inference.infer_shapes(fused)
    types = {
        v.name: v.type.tensor_type.elem_type
        for v in (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output)
    }
    types |= {i.name: i.data_type for i in fused.graph.initializer}
    found = []
    for node in fused.graph.node:
        if node.domain != spec.DOMAIN:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "SmoothL1LossBackward" and attrs.get("beta") == 0.0:
            continue
        if node.op_type == "L1LossBackward" and attrs.get("reduction") != b"mean":
            continue
        operands = [spec.float_type(types.get(name, 0)) for name in node.input]
        if any(t is None for t in operands):
            found.append(f"{node.op_type}: an operand's type is not known")
            continue
        computes = spec.compute_type(spec.promote_types(operands))  # type: ignore[arg-type]
        if computes.dtype != np.dtype(compute):
            found.append(
                f"{node.op_type} computes in {computes.name}, the graph in {np.dtype(compute).name}"
            )
    return found
