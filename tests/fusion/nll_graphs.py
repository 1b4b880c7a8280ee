"""Hand-written graphs of the exporter's nll_loss backward (lossgrad_compiler/fusion/nll.py)
with knobs for the fuzzer and the near misses, their feeds, and the check that a fused
model computes exactly the original's elements (B = 0: the decomposition's only rounding,
the product by the weight, is the operator's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from lossgrad_compiler.onnx.schemas import ensure_schemas
from tests.fusion.contract import ORT_ERRORS, run_fused_reference, run_ort

NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16}
ONNX_TYPES = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE,
              "float16": TensorProto.FLOAT16}  # fmt: skip
MUTATIONS = (
    "other_mask",  # the gradient's Where reads another mask than the safe target's
    "scatter_axis",  # the one-hot scattered along another axis than the class dim
    "plus_ones",  # +1 scattered instead of -1
    "other_target",  # the scatter's indices from another target than the mask compares
    "else_nonzero",  # where(keep, v, 0.5)
    "weight_other_axis",  # the weight reshaped along axis 0 (batch == classes)
    "mask_read_elsewhere",  # the mask is also a graph output
)


@dataclass(frozen=True)
class NllRecipe:
    rank: int = 2  # 1, 2 or 4
    batch: int = 3
    classes: int = 4
    dtype: str = "float32"
    scale: str = "constant"  # "constant" (one element), "rows" (Unsqueeze of an input g),
    # "input" (a one-element graph input), "count" (1/kept count), "dropped" (v is w alone)
    scale_value: float = 1.0
    weight: str = ""  # "", "input", "constant"
    weight_values: tuple[float, ...] = ()
    ignore_index: int = -100
    dynamic: bool = False
    mutation: str = ""

    @property
    def class_dim(self) -> int:
        return 1 if self.rank >= 2 else 0

    @property
    def self_shape(self) -> tuple[int, ...]:
        return {1: (self.classes,), 2: (self.batch, self.classes),
                4: (self.batch, self.classes, 2, 3)}[self.rank]  # fmt: skip

    @property
    def rows(self) -> tuple[int, ...]:
        return tuple(d for i, d in enumerate(self.self_shape) if i != self.class_dim)


def build(recipe: NllRecipe) -> onnx.ModelProto:
    """The exporter's node sequence, `Unsqueeze Equal Not Where ConstantOfShape
    ScatterElements [Unsqueeze] [Mul] Where Mul`, for the recipe."""
    r, dt, np_t = recipe, ONNX_TYPES[recipe.dtype], NP[recipe.dtype]
    cd, rank = r.class_dim, r.rank
    dims: list[Any] = list(r.self_shape)
    rows: list[Any] = list(r.rows)
    if r.dynamic and rank >= 2:
        dims[0] = rows[0] = "batch"
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    inputs = [
        helper.make_tensor_value_info("x", dt, dims),
        helper.make_tensor_value_info("t", TensorProto.INT64, rows),
    ]
    outputs: list[onnx.ValueInfoProto] = []

    def const(name: str, value: Any, dtype: Any = np.int64) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def node(op: str, ins: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=f"n_{out}", **attrs))
        return out

    axis = const("axis", [cd])
    u = node("Unsqueeze", ["t", axis], "u")
    keep = node("Not", [node("Equal", [u, const("ii", r.ignore_index)], "eq")], "keep")
    index_source = u
    if r.mutation == "other_target":
        inputs.append(helper.make_tensor_value_info("t2", TensorProto.INT64, rows))
        index_source = node("Unsqueeze", ["t2", axis], "u2")
    safe = node("Where", [keep, index_source, const("zero_i", 0)], "safe")
    zeros = node("Expand", [const("zero_f", 0.0, np_t), node("Shape", ["x"], "xs")], "zeros")
    minus = -1.0 if r.mutation != "plus_ones" else 1.0
    ones = node(
        "ConstantOfShape", [node("Shape", [safe], "ss")], "ones",
        value=numpy_helper.from_array(np.asarray([minus], np_t)),
    )  # fmt: skip
    scatter_axis = 0 if r.mutation == "scatter_axis" else cd
    onehot = node("ScatterElements", [zeros, safe, ones], "onehot", axis=scatter_axis)
    if r.scale == "rows":
        inputs.append(helper.make_tensor_value_info("g", dt, rows))
        s: str | None = node("Unsqueeze", ["g", axis], "g_u")
    elif r.scale == "input":
        inputs.append(helper.make_tensor_value_info("g", dt, []))
        s = "g"
    elif r.scale == "count":
        mask = node("Not", [node("Equal", ["t", "ii"], "eq_all")], "keep_all")
        count = node("ReduceSum", [node("Cast", [mask], "keep_i", to=TensorProto.INT64)],
                     "count_i", keepdims=0)  # fmt: skip
        s = node("Div", [const("one", r.scale_value, np_t),
                         node("Cast", [count], "count", to=dt)], "q")  # fmt: skip
    elif r.scale == "dropped":
        s = None
    else:
        s = const("s", r.scale_value, np_t)
    value = s
    if r.weight:
        w_shape = [r.classes if i == cd else 1 for i in range(rank)]
        if r.mutation == "weight_other_axis":
            w_shape = [r.classes if i == 0 else 1 for i in range(rank)]
        if r.weight == "input":
            inputs.append(helper.make_tensor_value_info("w", dt, [r.classes]))
            w = "w"
        else:
            w = const("w_const", list(r.weight_values), np_t)
        view = node("Reshape", [w, const("w_shape", w_shape)], "w_view")
        value = view if s is None else node("Mul", [s, view], "v")
    assert value is not None
    gate = keep
    if r.mutation == "other_mask":
        gate = node("Not", [node("Equal", [u, const("ii2", r.ignore_index + 1)], "eq2")], "k2")
    else_value = const("zero_g", 0.5 if r.mutation == "else_nonzero" else 0.0, np_t)
    masked = node("Where", [gate, value, else_value], "masked")
    node("Mul", [onehot, masked], "grad")
    outputs.append(helper.make_tensor_value_info("grad", dt, dims))
    if r.mutation == "mask_read_elsewhere":
        outputs.append(
            helper.make_tensor_value_info("keep", TensorProto.BOOL, [*rows[:cd], 1, *rows[cd:]])
        )
    graph = helper.make_graph(nodes, "nll", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def feeds(recipe: NllRecipe, rng: np.random.Generator, batch: int | None = None,
          specials: bool = True) -> dict[str, np.ndarray]:  # fmt: skip
    """Random values; targets mixing classes, ignore_index and negative classes (which the
    graph's ScatterElements reads as t + C); specials put inf and NaN in g and x."""
    r, np_t = recipe, NP[recipe.dtype]
    shape = list(r.self_shape)
    rows = list(r.rows)
    if batch is not None and r.rank >= 2:
        shape[0] = rows[0] = batch
    c = r.classes
    choices = np.array([*range(-c, c), r.ignore_index], np.int64)
    t = rng.choice(choices, size=rows).astype(np.int64)
    out = {"x": rng.standard_normal(shape).astype(np_t), "t": t}
    if r.mutation == "other_target":
        out["t2"] = rng.choice(np.arange(c), size=rows).astype(np.int64)
    pool = np.array([1.5, -2.0, 0.0, -0.0, 3e4, np.inf, -np.inf, np.nan], np.float64)
    if r.scale == "rows":
        g = rng.standard_normal(rows)
        if specials:
            g.reshape(-1)[: min(3, g.size)] = rng.choice(pool, size=min(3, g.size))
        out["g"] = g.astype(np_t)
    if r.scale == "input":
        out["g"] = np.asarray(rng.choice(pool) if specials else 0.75, np_t)
    if r.weight == "input":
        w = rng.random(c) + 0.25
        if specials:
            w[0] = rng.choice(pool)
        out["w"] = w.astype(np_t)
    return out


def _run(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], how: str) -> Any:
    if how == "reference":
        return run_fused_reference(model, inputs)
    if how == "original-ort":
        return run_ort(model, inputs, "stock", optimize=False)
    return run_ort(model, inputs, how)


def check_schemas(model: onnx.ModelProto) -> None:
    """The full check with the ai.lossgrad schemas registered (onnx skips a node of an
    unregistered domain): the fused node validates against NLLLossBackward's v4 schema."""
    ensure_schemas()
    onnx.checker.check_model(model, full_check=True)


FUSED_RUNTIMES = ("reference", "stock", "runtime", "functions")


def same_elements(a: np.ndarray, b: np.ndarray) -> bool:
    """The same class (NaN, +inf, -inf, finite) and value for every element."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def check_exact(
    original: onnx.ModelProto,
    fused: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    runtimes_agree: bool = True,
    runtimes: tuple[str, ...] = FUSED_RUNTIMES,
) -> list[str]:
    """Every runtime's fused result against the original in the ReferenceEvaluator (the
    reference run) and in ONNX Runtime without rewrites (the others); where the original
    fails (a target outside [-C, C)) the fused model must fail too in ONNX Runtime (aclnn
    161002 from the native kernel). A fused run in ONNX Runtime may also match the
    original's run there with ORT's rewrites on, or ONNX's meaning (docs/fusion.md: ORT
    computes float16 operations in float32). `runtimes_agree=False`
    where the rest of an exported graph (log_softmax's backward: Exp, ReduceSum) rounds
    otherwise in the two; `runtimes` the fused model's runtimes to check."""
    problems: list[str] = []
    expected = []
    for how in ("reference", "original-ort"):
        try:
            expected.append(_run(original, inputs, how))
        except (IndexError, ValueError, *ORT_ERRORS):
            expected.append(None)
    if runtimes_agree and expected[0] is not None and expected[1] is not None:
        for a, b in zip(*expected, strict=True):
            # ORT computes float16 operations in float32 (docs/fusion.md): there the two
            # runs of the original may differ, and the fused run may match either (below)
            if np.asarray(a).dtype != np.float16 and not same_elements(a, b):
                problems.append("the original differs between the reference and ORT")
    for how in runtimes:
        try:
            got = _run(fused, inputs, how)
        except Exception as err:
            if expected[1] is not None:
                problems.append(f"{how}: the fused model fails where the original runs: {err}")
            continue
        if expected[1] is None and how != "functions":
            if how != "reference":  # the standard functions compute zero rows (no raise)
                problems.append(f"{how}: the fused model runs where the original fails")
            continue
        if how == "reference":
            wants = [expected[0] if expected[0] is not None else expected[1]]
        else:  # ORT's rewrites change the original's rounding (DivMulFusion), its CPU
            # provider computes float16 in float32: either run, or ONNX's meaning
            wants = [expected[1], _run(original, inputs, "stock"), expected[0]]
        for i, a in enumerate(got):
            if not any(want is not None and same_elements(a, want[i]) for want in wants):
                shown = "\n".join(str(np.asarray(w[i])) for w in wants if w is not None)
                problems.append(f"{how}: output {i} differs:\n{np.asarray(a)}\n{shown}")
    return problems
