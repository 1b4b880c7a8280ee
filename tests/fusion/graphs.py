"""Decomposed loss gradients written by hand, as PyTorch 2.13's exporter and this project's
inline mode write them, with the knobs that the regression tests and the differential
fuzzer turn: the form, its constants, the element type the arithmetic runs in and the
Casts around it, how the reduction scale is computed, broadcast shapes, extra readers of
intermediates, names that subgraphs define, the opset.

`build(recipe)` gives the model and what the contract check needs to know about it (the
values that the operator's terms are made of, for the error bound)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F16, F32, F64 = TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE
SMOOTH_L1, KL, KL_TARGET = "SmoothL1LossBackward", "KlDivBackward", "KlDivTargetBackward"

# form -> operator; the SmoothL1 forms with "div" or "reciprocal" divide by beta
FORMS = {
    # PyTorch's exporter: where(|d| < beta, (s*d)/beta, s*sign(d)) and its variants
    "sl1_div_after_mul": SMOOTH_L1,
    "sl1_div_first": SMOOTH_L1,
    "sl1_reciprocal": SMOOTH_L1,
    "sl1_beta_one": SMOOTH_L1,
    "sl1_sign": SMOOTH_L1,  # beta 0 as F.smooth_l1_loss writes it (l1_loss)
    "sl1_aten_zero": SMOOTH_L1,  # aten.smooth_l1_loss_backward with beta 0
    # this project's inline mode: s * clamp(d / beta, -1, 1) as two selects, and sgn(d)
    "sl1_inline": SMOOTH_L1,
    "sl1_inline_sign": SMOOTH_L1,
    "kl_exp": KL,  # -(s * exp(t))
    "kl_plain": KL,  # -(s * t)
    "kl_neg_first": KL,  # (-s) * t
    "klt_exporter": KL_TARGET,  # (s*(t - x))*exp(t) + s*exp(t): also the inline mode's
    "klt_grouped": KL_TARGET,  # s * (exp(t) * ((t + 1) - x)): hand-written, another order
    "klt_inline_log": KL_TARGET,  # where(t == 0, 0, s * ((log(t) + 1) - x))
}
LOG_TARGET = {"kl_exp": 1, "kl_plain": 0, "kl_neg_first": 0, "klt_exporter": 1}
LOG_TARGET |= {"klt_grouped": 1, "klt_inline_log": 0}

# How s (grad_output times the reduction scale) is computed:
SCALES = (
    "one",  # no s at all where the form allows (a sum), else the constant 1
    "const",  # a constant (the exporter folds grad_output * 1/n for static shapes)
    "const_off_by_one",  # the constant 1/(numel + 1): not the mean's 1/numel
    "input",  # grad_output, a graph input
    "count",  # grad_output * (1 / numel) with numel counted from shapes at run time
    "count_only",  # 1 / numel counted at run time (the exporter's seed of ones)
    "count_off_by_one",  # 1 / (numel + 1) counted at run time
    # the exporter's seed of ones, Expand(1, Shape(x)) (or of t, the smaller), divided by
    # 1/scale_value: a tensor whose dims the compiler's shape inference (no data
    # propagation) does not know
    "ones",
)


@dataclass(frozen=True)
class Recipe:
    form: str
    beta: float = 0.5
    divisor: float | None = None  # the constant divided by (None: beta)
    compute: int = F32  # the element type of the arithmetic
    x_type: int = F32
    t_type: int = F32
    go_type: int = F32
    out_type: int | None = None  # a Cast of the result at the end (None: none)
    scale: str = "one"
    scale_value: float = 0.25  # for "const"
    x_shape: tuple[int, ...] = (3, 4)
    t_shape: tuple[int, ...] = (3, 4)
    go_shape: tuple[int, ...] = ()
    symbolic_batch: bool = False  # the inputs' first dimension named "N"
    swap: str = (
        ""  # a near miss: which select's branches are swapped ("", "outer", "inner", "ones")
    )
    spelling: str = "less"  # SmoothL1's comparison: "less" (|d| < beta) or "less_equal"
    sum_back: str = ""  # KlDivBackward summed to a smaller self: "", "squeeze", "reshape", "drop"
    cast_saturate_first: bool = False  # Casts list `saturate` before `to` (opset >= 19)
    opset: int = 17
    extra_reader: int = -1  # >= 0: that intermediate (by position) is also a graph output
    subgraph: str = ""  # "collide": an If whose branches define names the pass may invent
    # "branch": the gradient is computed inside an If branch
    mid_cast: int = -1  # >= 0: that intermediate goes through Cast(to=F16) and back
    reshape: bool = False  # t is declared with its dims reversed and reshaped in the graph

    @property
    def t_declared(self) -> tuple[int, ...]:
        """The shape of the graph input t (a 0 without allowzero, before opset 14, would copy
        the input's size: no Reshape then)."""
        if self.reshape and (0 not in self.t_shape or self.opset >= 14):
            return tuple(reversed(self.t_shape))
        return self.t_shape

    @property
    def op_type(self) -> str:
        return FORMS[self.form]


@dataclass
class Built:
    model: onnx.ModelProto
    recipe: Recipe
    op_type: str
    attrs: dict[str, Any]
    # the values (names in the model) that the operator's grad_output, self and target are:
    # the contract check evaluates them to bound rounding errors by the terms' magnitude
    terms: dict[str, str | None] = field(default_factory=dict)
    output: str = "y"


_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div", "Exp", "Log", "Neg", "Abs", "Sign", "Where"})
_NP = {F16: np.float16, F32: np.float32, F64: np.float64}
_IR = {9: 4, 10: 5, 11: 6, 12: 7, 13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10}


def np_type(elem_type: int) -> type:
    return _NP[elem_type]


class _Graph:
    """Nodes, initializers and names of a graph under construction."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0
        self.intermediates: list[str] = []

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def node(self, op: str, inputs: list[str], typed: bool = True, **attrs: Any) -> str:
        """A node's output; `typed`: the output has the compute type (an intermediate the
        knobs may read)."""
        out = self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        if op in _ARITHMETIC and typed:
            self.intermediates.append(out)
            if self.recipe.mid_cast == len(self.intermediates) - 1:
                return self.cast(self.cast(out, F16), self.recipe.compute)
        return out

    def const(self, value: Any, elem_type: int | None = None, name: str = "c") -> str:
        out = self.fresh(name)
        dtype = _NP[elem_type] if elem_type is not None else np.int64
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), out))
        return out

    def cast(self, value: str, to: int) -> str:
        out = self.fresh("cast")
        node = helper.make_node("Cast", [value], [out], to=to)
        if self.recipe.cast_saturate_first and self.recipe.opset >= 19:
            saturate = helper.make_attribute("saturate", 1)
            attrs = list(node.attribute)
            node.ClearField("attribute")
            node.attribute.extend([saturate, *attrs])
        self.nodes.append(node)
        return out

    def to_compute(self, value: str, elem_type: int) -> str:
        return value if elem_type == self.recipe.compute else self.cast(value, self.recipe.compute)


def _numel(g: _Graph, of: str, plus_one: bool) -> str:
    """numel(of) as a float of the compute type, counted from Shape at run time."""
    shape = g.node("Shape", [of])
    numel = g.node("ReduceProd", [shape], keepdims=0)
    if plus_one:
        numel = g.node("Add", [numel, g.const(1)])
    return g.node("Cast", [numel], to=g.recipe.compute)


def _scale(g: _Graph, r: Recipe, go: str | None, x: str, t: str) -> str | None:
    """s in the compute type, or None for "one" (the caller writes the form without s where
    it can, else the constant 1)."""
    c = r.compute
    b = tuple(np.broadcast_shapes(r.x_shape, r.t_shape))
    numel = int(np.prod(b))
    if r.scale == "one":
        return None
    if r.scale == "const":
        return g.const(r.scale_value, c, "s")
    if r.scale == "const_off_by_one":
        return g.const(np.asarray(1, _NP[c]) / np.asarray(numel + 1, _NP[c]), c, "s")
    if r.scale == "input":
        assert go is not None
        return g.to_compute(go, r.go_type)
    if r.scale == "ones":  # of the smaller operand, which the graph broadcasts
        smaller = x if int(np.prod(r.x_shape)) <= int(np.prod(r.t_shape)) else t
        shape = g.node("Shape", [smaller], typed=False)
        ones = g.node("Expand", [g.const(1.0, c, "one"), shape], typed=False)
        with np.errstate(all="ignore"):
            divisor = np.asarray(1, _NP[c]) / np.asarray(r.scale_value, _NP[c])
        return g.node("Div", [ones, g.const(divisor, c, "n")])
    # numel of broadcast(self, target): of the larger operand (the shapes here broadcast one
    # operand up to the other's shape)
    of = x if int(np.prod(r.x_shape)) >= int(np.prod(r.t_shape)) else t
    n = _numel(g, of, r.scale == "count_off_by_one")
    one = g.const(1.0, c, "one")
    reciprocal = g.node("Div", [one, n])
    if r.scale == "count":
        assert go is not None
        return g.node("Mul", [g.to_compute(go, r.go_type), reciprocal])
    return reciprocal


def _smooth_l1(g: _Graph, r: Recipe, s: str | None, x: str, t: str) -> str:
    c = r.compute
    d = g.node("Sub", [x, t])
    if r.form == "sl1_sign":
        # the exporter's half L1 gradient: Sign in float32, Casts around it
        half = c == F16
        if half:
            sign = g.cast(g.node("Sign", [g.cast(d, F32)], typed=False), F16)
        else:
            sign = g.node("Sign", [d])
        return sign if s is None else g.node("Mul", [s, sign])
    if r.form in ("sl1_inline", "sl1_inline_sign"):
        one, minus_one = g.const(1.0, c, "one"), g.const(-1.0, c, "minus_one")
        if r.swap == "ones":
            one, minus_one = minus_one, one
        if r.form == "sl1_inline":
            beta = g.const(r.beta, c, "beta")
            q = g.node("Div", [d, g.const(r.beta if r.divisor is None else r.divisor, c, "div")])
            below = g.node("LessOrEqual", [d, g.node("Neg", [beta])])
            above = g.node("GreaterOrEqual", [d, beta])
            inner = [below, minus_one, q] if r.swap != "inner" else [below, q, minus_one]
            low = g.node("Where", inner)
        else:
            zero = g.const(0.0, c, "zero")
            below = g.node("Less", [d, zero])
            above = g.node("Greater", [d, zero])
            inner = [below, minus_one, zero] if r.swap != "inner" else [below, zero, minus_one]
            low = g.node("Where", inner)
        outer = [above, one, low] if r.swap != "outer" else [above, low, one]
        clamped = g.node("Where", outer)
        return clamped if s is None else g.node("Mul", [s, clamped])
    beta_value = {"sl1_beta_one": 1.0, "sl1_aten_zero": 0.0}.get(r.form, r.beta)
    beta = g.const(beta_value, c, "beta")
    divisor = beta if r.divisor is None else g.const(r.divisor, c, "div")
    magnitude = g.node("Abs", [d])
    outside_first = r.spelling == "less_equal" and r.opset >= 12
    if outside_first:  # beta <= |d|: true outside the quadratic zone
        inside = g.node("LessOrEqual", [beta, magnitude])
    else:
        inside = g.node("Less", [magnitude, beta])
    inverse = 1.0 / np.float64(beta_value if r.divisor is None else r.divisor)
    if s is None:
        if r.form == "sl1_beta_one":
            quadratic = d
        elif r.form == "sl1_reciprocal":
            quadratic = g.node("Mul", [d, g.const(inverse, c, "inv")])
        else:
            quadratic = g.node("Div", [d, divisor])
        linear = g.node("Sign", [d])
    else:
        if r.form == "sl1_beta_one":
            quadratic = g.node("Mul", [s, d])
        elif r.form == "sl1_div_first":
            quadratic = g.node("Mul", [s, g.node("Div", [d, divisor])])
        elif r.form == "sl1_reciprocal":
            quadratic = g.node("Mul", [g.node("Mul", [s, d]), g.const(inverse, c, "inv")])
        else:
            quadratic = g.node("Div", [g.node("Mul", [s, d]), divisor])
        linear = g.node("Mul", [s, g.node("Sign", [d])])
    branches = [linear, quadratic] if outside_first else [quadratic, linear]
    if r.swap:
        branches.reverse()
    return g.node("Where", [inside, *branches])


def _kl(g: _Graph, r: Recipe, s: str | None, x: str, t: str) -> str:
    c = r.compute
    s = s if s is not None else g.const(1.0, c, "s")
    if r.form == "kl_exp":
        value = g.node("Neg", [g.node("Mul", [s, g.node("Exp", [t])])])
    elif r.form == "kl_plain":
        value = g.node("Neg", [g.node("Mul", [s, t])])
    else:
        value = g.node("Mul", [g.node("Neg", [s]), t])
    return _sum_back(g, r, value)


def _sum_back(g: _Graph, r: Recipe, value: str) -> str:
    """KlDivBackward's result has self's shape: sum B back to it."""
    if not r.sum_back:
        return value
    b = tuple(np.broadcast_shapes(r.x_shape, r.t_shape))
    lead = len(b) - len(r.x_shape)
    stretched = [lead + i for i, d in enumerate(r.x_shape) if d == 1 and b[lead + i] != 1]
    axes = list(range(lead)) + stretched
    keepdims = 0 if r.sum_back == "drop" else 1
    if r.opset >= 13:
        summed = g.node("ReduceSum", [value, g.const(axes)], keepdims=keepdims)
    else:
        summed = g.node("ReduceSum", [value], axes=axes, keepdims=keepdims)
    if r.sum_back == "drop":
        return summed
    if r.sum_back == "reshape" and (0 not in r.x_shape or r.opset >= 14):
        # a 0 in the shape copies the input's size unless allowzero (opset 14) says it is 0
        zeros = {"allowzero": 1} if 0 in r.x_shape else {}
        return g.node("Reshape", [summed, g.const(list(r.x_shape))], **zeros)
    if not lead:
        return summed
    if r.opset >= 13:
        return g.node("Squeeze", [summed, g.const(list(range(lead)))])
    return g.node("Squeeze", [summed], axes=list(range(lead)))


def _kl_target(g: _Graph, r: Recipe, s: str | None, x: str, t: str) -> str:
    c = r.compute
    s = s if s is not None else g.const(1.0, c, "s")
    one = g.const(1.0, c, "one")
    if r.form == "klt_exporter":
        e = g.node("Exp", [t])
        first = g.node("Mul", [g.node("Mul", [s, g.node("Sub", [t, x])]), e])
        return g.node("Add", [first, g.node("Mul", [s, e])])
    if r.form == "klt_grouped":
        inner = g.node("Sub", [g.node("Add", [t, one]), x])
        return g.node("Mul", [s, g.node("Mul", [g.node("Exp", [t]), inner])])
    zero = g.const(0.0, c, "zero")
    inner = g.node("Sub", [g.node("Add", [g.node("Log", [t]), one]), x])
    value = g.node("Mul", [s, inner])
    at_zero = g.node("Equal", [t, zero])
    branches = [zero, value] if not r.swap else [value, zero]
    return g.node("Where", [at_zero, *branches])


def _dims(shape: tuple[int, ...], symbolic: bool) -> list[int | str]:
    dims: list[int | str] = list(shape)
    if symbolic and dims and dims[0] > 1:
        dims[0] = "N"
    return dims


def build(r: Recipe) -> Built:
    g = _Graph(r)
    names = {"x": "x", "t": "t", "go": "go"}
    x = g.to_compute(names["x"], r.x_type)
    t_value = names["t"]
    if r.t_declared != r.t_shape:
        zeros = {"allowzero": 1} if 0 in r.t_shape else {}
        t_value = g.node("Reshape", [t_value, g.const(list(r.t_shape))], typed=False, **zeros)
    t = g.to_compute(t_value, r.t_type)
    uses_go = r.scale in ("input", "count")
    s = _scale(g, r, names["go"] if uses_go else None, x, t)
    op = r.op_type
    if op == SMOOTH_L1:
        value = _smooth_l1(g, r, s, x, t)
    elif op == KL:
        value = _kl(g, r, s, x, t)
    else:
        value = _kl_target(g, r, s, x, t)
    result_type = r.compute
    if r.out_type is not None and r.out_type != r.compute:
        value = g.cast(value, r.out_type)
        result_type = r.out_type
    g.nodes.append(helper.make_node("Identity", [value], ["y"]))
    inputs = [
        helper.make_tensor_value_info("x", r.x_type, _dims(r.x_shape, r.symbolic_batch)),
        helper.make_tensor_value_info("t", r.t_type, _dims(r.t_declared, r.symbolic_batch)),
    ]
    if uses_go:
        inputs.append(helper.make_tensor_value_info("go", r.go_type, list(r.go_shape)))
    outputs = [helper.make_tensor_value_info("y", result_type, None)]
    if 0 <= r.extra_reader < len(g.intermediates):
        read = g.intermediates[r.extra_reader]
        g.nodes.append(helper.make_node("Identity", [read], ["also"]))
        outputs.append(helper.make_tensor_value_info("also", 0, None))
    if r.subgraph:
        _add_subgraph(g, r, inputs, outputs, value)
    graph = helper.make_graph(g.nodes, "g", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", r.opset)])
    model.ir_version = _IR[r.opset]
    _type_outputs(model)
    attrs: dict[str, Any] = {"reduction": "none"}
    if op == SMOOTH_L1:
        attrs["beta"] = {"sl1_beta_one": 1.0, "sl1_sign": 0.0, "sl1_aten_zero": 0.0}.get(
            r.form, 0.0 if r.form == "sl1_inline_sign" else r.beta
        )
    else:
        attrs["log_target"] = LOG_TARGET[r.form]
    return Built(model, r, op, attrs, {"grad_output": s, "self": x, "target": t})


def _add_subgraph(g: _Graph, r: Recipe, inputs: list[Any], outputs: list[Any], value: str) -> None:
    """An If on a boolean input. "collide": its branches define the names the pass invents
    for what it adds (y_grad_output, y_self, <op>_fused, ...). "branch": both branches read
    an intermediate of the gradient from the enclosing graph."""
    inputs.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
    if r.subgraph == "collide":
        names = ["y_grad_output", "y_self", "y_grad_output_2", f"{r.op_type}_fused", "y_s"]
        nodes = [helper.make_node("Identity", ["x"], [names[0]])]
        nodes += [helper.make_node("Identity", [a], [b]) for a, b in itertools.pairwise(names)]
        then_reads, else_reads, out_type = names[-1], "x", r.x_type
    else:
        read = g.intermediates[len(g.intermediates) // 2] if g.intermediates else value
        nodes = [helper.make_node("Neg", [read], ["branch_y"])]
        then_reads, else_reads, out_type = "branch_y", read, r.compute
    then_branch = helper.make_graph(
        nodes, "then", [], [helper.make_tensor_value_info(then_reads, out_type, [])]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", [else_reads], ["else_y"])],
        "else",
        [],
        [helper.make_tensor_value_info("else_y", out_type, [])],
    )
    for branch in (then_branch, else_branch):  # any rank
        branch.output[0].type.tensor_type.ClearField("shape")
    g.nodes.append(
        helper.make_node(
            "If", ["flag"], ["chosen"], then_branch=then_branch, else_branch=else_branch
        )
    )
    outputs.append(helper.make_tensor_value_info("chosen", out_type, None))


def _type_outputs(model: onnx.ModelProto) -> None:
    """Give the graph outputs the types shape inference finds (as exporters write them)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    found = {v.name: v.type for v in (*inferred.graph.value_info, *inferred.graph.output)}
    for out in model.graph.output:
        if out.name in found and found[out.name].tensor_type.elem_type:
            out.type.CopyFrom(found[out.name])


def with_(recipe: Recipe, **changes: Any) -> Recipe:
    return replace(recipe, **changes)


def feeds(built: Built, rng: np.random.Generator, specials: bool = True) -> dict[str, np.ndarray]:
    """Inputs for the built graph: normal values with, now and then, the values where the
    forms part ways: NaN, infinities, signed zeros, subnormals, values near overflow, exp's
    overflow and underflow edges, d == 0, |d| == beta, t == 0."""
    r = built.recipe
    shapes = {"x": r.x_shape, "t": r.t_shape, "go": r.go_shape}
    types = {"x": r.x_type, "t": r.t_type, "go": r.go_type}
    out: dict[str, np.ndarray] = {}
    for name in ("x", "t", "go"):
        if name == "go" and r.scale not in ("input", "count"):
            continue
        dtype = _NP[types[name]]
        values = rng.normal(0.0, 1.0, shapes[name]) * 10.0 ** rng.integers(-2, 3)
        if specials and values.size:
            pick = rng.random(values.shape) < 0.3
            choices = special_values(dtype, np.dtype(_NP[r.compute]), r.beta)
            values = np.where(pick, rng.choice(choices, values.shape), values)
        with np.errstate(all="ignore"):
            out[name] = np.asarray(values).astype(dtype)
    if specials and "x" in out and "t" in out and out["x"].shape == out["t"].shape:
        same = rng.random(out["x"].shape) < 0.1  # d == 0 and |d| == beta exactly
        out["t"] = np.where(same, out["x"], out["t"]).astype(out["t"].dtype)
        if r.beta > 0:
            with np.errstate(all="ignore"):
                edge = (out["t"].astype(np.float64) + r.beta).astype(out["x"].dtype)
            at_beta = rng.random(out["x"].shape) < 0.1
            out["x"] = np.where(at_beta, edge, out["x"]).astype(out["x"].dtype)
    out["t"] = out["t"].reshape(r.t_declared)
    return out


def special_values(dtype: Any, compute: Any, beta: float) -> np.ndarray:
    info = np.finfo(dtype)
    wide = np.finfo(compute)
    overflow = float(np.log(np.float64(wide.max)))  # exp's overflow edge in the compute type
    underflow = float(np.log(np.float64(wide.smallest_subnormal)))
    values = [
        np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        float(info.smallest_subnormal),
        -float(info.smallest_subnormal) * 3,
        float(info.tiny),
        float(info.max),
        -float(info.max) / 2,
        float(info.max) / 3,
        overflow,
        overflow - 1e-5,
        overflow + 1e-5,
        np.nextafter(np.float32(88.72283), np.float32(100)),
        88.72,
        underflow,
        underflow + 0.5,
        beta,
        -beta,
        1e-30,
        1e30,
        1.0,
        -1.0,
    ]
    return np.asarray(values, np.float64)
