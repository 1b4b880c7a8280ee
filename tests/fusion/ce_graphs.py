"""Hand-written graphs of the exporter's cross_entropy backward (lossgrad_compiler/fusion/
cross_entropy.py): the nll_loss backward of tests/fusion/nll_graphs.py on
lp = LogSoftmax(x), followed by log_softmax's backward `Sub(gl, Mul(Exp(lp),
ReduceSum(gl, [1], keepdims=1)))` (Casts to float32 and back for float16), with knobs for
the near misses; their feeds; and the check that a fused model gives the graph's elements.

ONNX Runtime's Exp and the kernel's exp are different functions (the contract lets each be
within 4 ulp), and ORT computes float16 graphs in float32 without the Casts between
operations: in ORT the fused model is held to the original's ORT run within a bound made
of those ulps times the row's magnitude |g*w[t]|, with the same class (NaN, inf, finite)
everywhere. Under the ReferenceEvaluator (numpy's exp on both sides) it must be exact."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.fusion.contract import ORT_ERRORS, run_ort
from tests.fusion.nll_graphs import NP, ONNX_TYPES, NllRecipe, check_exact
from tests.fusion.nll_graphs import build as build_nll
from tests.fusion.nll_graphs import feeds as nll_feeds

CE_MUTATIONS = (
    "swapped_sub",  # exp(lp)*rowsum - gl
    "sum_axis0",  # the row sum over the batch
    "keepdims0",  # the row sum without its class dimension (broadcast along the rows)
    "no_cast_back",  # float16: the result stays float32
    "compute_f64",  # float32 gl and lp Cast to float64 and computed there
    "exp_read_elsewhere",  # exp(lp) is also a graph output
    "smoothing",  # gl = Add(smoothing term, nll term): label smoothing
    "smoothing_mean",  # the same, its term divided by the kept rows' count
)


@dataclass(frozen=True)
class CeRecipe:
    nll: NllRecipe = field(default_factory=NllRecipe)
    mutation: str = ""


def build(recipe: CeRecipe) -> onnx.ModelProto:
    """The nll graph's 'grad' becomes gl; lp = LogSoftmax(x); the result is the Sub's (or
    its Cast back to float16)."""
    model = build_nll(recipe.nll)
    graph = model.graph
    r = recipe.nll
    dt = ONNX_TYPES[r.dtype]
    half = r.dtype == "float16"
    m = recipe.mutation
    compute = TensorProto.DOUBLE if m == "compute_f64" else TensorProto.FLOAT if half else dt
    dims = [d for d in graph.output[0].type.tensor_type.shape.dim]
    shape: list[Any] = [d.dim_param or d.dim_value for d in dims]
    del graph.output[0]
    nodes = list(graph.node)

    def node(op: str, ins: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=f"ce_{out}", **attrs))
        return out

    def const(name: str, value: Any, dtype: Any) -> str:
        graph.initializer.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    gl = "grad"
    if m in ("smoothing", "smoothing_mean"):
        term: str = const("smooth", np.full([shape[0] if isinstance(shape[0], int) else 1, 1],
                                             -0.025), NP[r.dtype])  # fmt: skip
        if m == "smoothing_mean":
            kept = node("Not", [node("Equal", ["t", "ii"], "s_eq")], "s_keep")
            count = node("ReduceSum", [node("Cast", [kept], "s_int", to=TensorProto.INT64)],
                         "s_count", keepdims=0)  # fmt: skip
            term = node("Div", [term, node("Cast", [count], "s_n", to=dt)], "s_div")
        gl = node("Add", [node("Expand", [term, node("Shape", ["x"], "s_shape")], "s_all"),
                          gl], "gl")  # fmt: skip
    lp = node("LogSoftmax", ["x"], "lp", axis=1)
    gl_c, lp_c = gl, lp
    if compute != dt:
        gl_c = node("Cast", [gl], "gl_c", to=compute)
        lp_c = node("Cast", [lp], "lp_c", to=compute)
    axes = const("ce_axes", [0 if m == "sum_axis0" else 1], np.int64)
    total = node("ReduceSum", [gl_c, axes], "rowsum", keepdims=0 if m == "keepdims0" else 1)
    p = node("Exp", [lp_c], "p")
    row = node("Mul", [p, total], "row")
    sub = node("Sub", [row, gl_c] if m == "swapped_sub" else [gl_c, row], "sub")
    out, out_type = sub, compute
    if compute != dt and m != "no_cast_back":
        out, out_type = node("Cast", [sub], "result", to=dt), dt
    graph.ClearField("node")
    graph.node.extend(nodes)
    graph.output.append(helper.make_tensor_value_info(out, out_type, shape))
    if m == "exp_read_elsewhere":
        graph.output.append(helper.make_tensor_value_info(p, compute, shape))
    onnx.checker.check_model(model, full_check=True)
    return model


def feeds(recipe: CeRecipe, rng: np.random.Generator, batch: int | None = None,
          specials: bool = True) -> dict[str, np.ndarray]:  # fmt: skip
    """nll_graphs.feeds (targets mixing classes, ignore_index and negative classes), with
    NaN, inf and large values now and then in x (NaN rows of lp, exp's edges)."""
    out = nll_feeds(recipe.nll, rng, batch, specials)
    if specials:
        x = out["x"].reshape(-1)
        pool = np.array([np.nan, np.inf, -np.inf, 80.0, -80.0, 1e4, 0.0], np.float64)
        picks = rng.integers(0, x.size, size=min(2, x.size))
        x[picks] = rng.choice(pool, size=picks.size)
    return out


def row_scale(recipe: CeRecipe, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """|g*w| bounded per row (the magnitude of gl's one nonzero element and of the row sum),
    as float64 [N, 1]: the scale of what another exp's ulps change."""
    r = recipe.nll
    rows = inputs["t"].shape[0]
    g = np.abs(np.asarray(r.scale_value, np.float64)) if r.scale == "constant" else 1.0
    if "g" in inputs:
        g = np.abs(np.asarray(inputs["g"], np.float64)).reshape(-1)
    w = np.max(np.abs(np.asarray(r.weight_values, np.float64)), initial=1.0) if r.weight else 1.0
    return np.broadcast_to(np.asarray(g * w, np.float64).reshape(-1, 1), (rows, 1))


def close_rows(got: np.ndarray, want: np.ndarray, scale: np.ndarray, eps: float) -> bool:
    """The same class everywhere and, for finite elements, |got - want| <= 16*eps*M or
    within the type's smallest subnormal, M = 2*scale + |want| bounding the magnitudes
    |gl| + exp(lp)*|rowsum| the element is made of (scale per row)."""
    a, b = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if a.shape != b.shape:
        return False
    classes = [np.isnan, np.isposinf, np.isneginf]
    if any(not np.array_equal(f(a), f(b)) for f in classes):
        return False
    finite = np.isfinite(a)
    tiny = float(np.finfo(np.asarray(got).dtype).smallest_subnormal)
    # a NaN or infinite grad_output bounds nothing (the classes still must agree)
    rows = np.nan_to_num(np.asarray(scale, np.float64), nan=np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        bound = 16 * eps * (2 * np.broadcast_to(rows, a.shape) + np.abs(b))
    return bool(np.all(np.abs(a - b)[finite] <= bound[finite] + tiny))


ORT_RUNTIMES = ("stock", "runtime", "functions")


def check_ce(
    recipe_or_scale: CeRecipe | np.ndarray,
    original: onnx.ModelProto,
    fused: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    dtype: str,
    runtimes: tuple[str, ...] = ORT_RUNTIMES,
) -> list[str]:
    """check_exact under the ReferenceEvaluator, then each ORT runtime's fused result
    against the original's ORT run without rewrites within close_rows' bound; where the
    original fails in ORT (a target outside [-C, C)) the fused model must fail too."""
    problems = check_exact(original, fused, inputs, False, ("reference",))
    scale = (
        row_scale(recipe_or_scale, inputs)
        if isinstance(recipe_or_scale, CeRecipe)
        else recipe_or_scale
    )
    try:
        (want, *_) = run_ort(original, inputs, "stock", optimize=False)
    except ORT_ERRORS:
        want = None
    eps = float(np.finfo(NP[dtype]).eps)
    for how in runtimes:
        try:
            (got, *_) = run_ort(fused, inputs, how)
        except ORT_ERRORS as err:
            if want is not None:
                problems.append(f"{how}: the fused model fails where the original runs: {err}")
            continue
        if want is None:
            if how != "functions":  # the standard functions compute zero rows (no raise)
                problems.append(f"{how}: the fused model runs where the original fails")
            continue
        if not close_rows(got, want, scale, eps):
            problems.append(f"{how}: differs from the original in ORT:\n{got}\n{want}")
    return problems
