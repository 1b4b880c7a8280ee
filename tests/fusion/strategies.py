"""Hypothesis strategies for the differential fuzzer (test_fuse_differential.py): graphs in
the exporter's forms and this project's inline forms, perturbed, and the perturbations that
apply to any model (Cast attribute order, extra readers, names that subgraphs define).

Structure comes from hypothesis; values come from numpy generators seeded by it (graphs.feeds),
with the special values where forms part ways mixed in."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import helper

from lossgrad_compiler import spec
from tests.fusion.ce_graphs import CE_MUTATIONS, CeRecipe
from tests.fusion.graphs import F16, F32, F64, FORMS, LOG_TARGET, SCALES, Recipe
from tests.fusion.nll_graphs import NllRecipe

FLOATS = (F16, F32, F64)
# thresholds: powers of two (exact scaling), 1 (no division), others, tiny and large ones
BETAS = (0.5, 1.0, 2.0, 0.25, 4.0, 0.3, 3.0, 1e-3, 0.125, 7.5, 1e-20)


@st.composite
def shapes(draw: st.DrawFn) -> tuple[int, ...]:
    """Mostly a few dozen elements (each is a trial of the values), now and then a 0-d
    shape or an empty one."""
    rank = draw(st.sampled_from([2, 3, 1, 0]))
    dims = draw(st.lists(st.integers(2, 6), min_size=rank, max_size=rank))
    ones = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
    dims = [
        1 if one and draw(st.integers(0, 3)) == 0 else d for d, one in zip(dims, ones, strict=True)
    ]
    if rank and draw(st.integers(0, 9)) == 0:
        dims[draw(st.integers(0, rank - 1))] = 0
    return tuple(dims)


@st.composite
def smaller(draw: st.DrawFn, b: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to `b` without enlarging it."""
    drop = draw(st.integers(0, len(b)))
    kept = b[drop:]
    ones = draw(st.lists(st.booleans(), min_size=len(kept), max_size=len(kept)))
    return tuple(1 if one else d for d, one in zip(kept, ones, strict=True))


@st.composite
def recipes(draw: st.DrawFn) -> Recipe:
    """A hand-written form (tests/fusion/graphs.py), perturbed."""
    form = draw(st.sampled_from(sorted(FORMS)))
    op = FORMS[form]
    inline = "inline" in form
    modern = [13, 14, 15, 16, 17, 18, 19, 20, 21]
    opset = draw(st.sampled_from(modern if inline else [*modern, *modern, 9, 10, 11, 12]))
    compute = draw(st.sampled_from([F32, F32, F64, F64, F16]))
    # inputs of other types than the computation, mostly narrower ones Cast to it (a wider
    # computation between Casts must stay wider in the fused node)
    others = {F64: [F32, F32, F16], F32: [F16, F16, F64], F16: [F32, F64]}[compute]
    if draw(st.booleans()):  # one type for every input, as exporters write graphs
        types = [draw(st.sampled_from([*others, compute, compute]))] * 3
    else:
        types = [draw(st.sampled_from([*others, compute, compute])) for _ in range(3)]
    out_type = draw(st.sampled_from([types[0], None, None, *FLOATS]))
    b = draw(shapes())
    x_shape, t_shape = b, b
    sum_back = ""
    if op == SMOOTH_L1:
        x_shape, t_shape = draw(smaller(b)), draw(smaller(b))
        if draw(st.booleans()):
            x_shape = b
        else:
            t_shape = b
    elif op == KL:
        if b and draw(st.integers(0, 2)) == 0:
            x_shape = draw(smaller(b))
            if x_shape != b:
                sum_back = draw(st.sampled_from(["squeeze", "reshape", "drop"]))
                if sum_back == "drop":  # keepdims 0 removes the summed axes: leading ones
                    x_shape = b[draw(st.integers(1, len(b))) :]
    else:
        x_shape = draw(smaller(b))
    # grad_output itself, and a seed of ones (issue 44), more often
    scale = draw(st.sampled_from(["input", "one", "ones", *SCALES]))
    numel = int(np.prod(b))
    scale_value = draw(
        st.sampled_from([1.0 / max(numel, 1), 1.0 / (numel + 1), 0.25, 1.0, 3.0, 1e-30, -0.5])
    )
    go_shape = draw(smaller(b))
    swap = draw(st.sampled_from([""] * 12 + ["outer", "inner", "ones"]))
    if swap in ("inner", "ones") and not inline:
        swap = "outer"
    if not form.startswith("sl1") and form != "klt_inline_log":
        swap = ""
    beta = draw(st.sampled_from(BETAS))
    divisor = draw(st.sampled_from([None] * 8 + [beta * 2, beta + 1e-3]))
    return Recipe(
        form=form,
        beta=float(np.float32(beta)),
        divisor=None if divisor is None else float(np.float32(divisor)),
        compute=compute,
        x_type=types[0],
        t_type=types[1],
        go_type=types[2],
        out_type=out_type,
        scale=scale,
        scale_value=scale_value,
        x_shape=x_shape,
        t_shape=t_shape,
        go_shape=go_shape,
        symbolic_batch=draw(st.booleans()),
        swap=swap,
        spelling=draw(st.sampled_from(["less", "less", "less_equal"])),
        sum_back=sum_back,
        cast_saturate_first=draw(st.booleans()),
        opset=opset,
        extra_reader=draw(st.sampled_from([-1] * 10 + [0, 1, 2])),
        subgraph=draw(st.sampled_from([""] * 6 + ["collide", "collide", "branch"])),
        mid_cast=draw(st.sampled_from([-1] * 16 + [0, 1, 2])),
        reshape=draw(st.sampled_from([False, False, False, True])),
    )


@st.composite
def ce_recipes(draw: st.DrawFn) -> CeRecipe:
    """The exporter's cross_entropy backward (tests/fusion/ce_graphs.py): mostly forms the
    pass can prove (constant scales, finite constant weights, label_smoothing 0), with what
    it must leave mixed in: input grad_outputs and weights, constants that overflow or hold
    inf, label smoothing, and the near misses of the log_softmax backward."""
    classes = draw(st.integers(2, 5))
    scale = draw(st.sampled_from(["constant"] * 4 + ["rows", "input", "dropped"]))
    weight = draw(st.sampled_from(["", "", "input", "constant", "constant"]))
    if scale == "dropped" and not weight:
        weight = "constant"  # v is the weight alone
    values = [draw(st.sampled_from([0.5, 1.0, 2.0, -3.0, 0.0, 0.1])) for _ in range(classes)]
    if draw(st.integers(0, 4)) == 0:
        values[draw(st.integers(0, classes - 1))] = draw(
            st.sampled_from([6e4, 3e38, float("inf"), float("nan")])
        )
    dtype = draw(st.sampled_from(["float32", "float32", "float64", "float16"]))
    mutations = [m for m in CE_MUTATIONS if m != "no_cast_back" or dtype == "float16"]
    mutation = draw(st.sampled_from([""] * 8 + mutations))
    batch = classes if mutation == "keepdims0" else draw(st.integers(1, 4))
    nll = NllRecipe(
        rank=2,
        batch=batch,
        classes=classes,
        dtype=dtype,
        scale=scale,
        scale_value=draw(st.sampled_from([1.0, 0.25, -1.5, 3.5, 3e38, 1e-45])),
        weight=weight,
        weight_values=tuple(values),
        ignore_index=draw(st.sampled_from([-100, -1, 0, classes - 1])),
        dynamic=mutation != "keepdims0" and draw(st.booleans()),
    )
    return CeRecipe(nll, mutation)


SMOOTH_L1, KL, KL_TARGET = (
    spec.SMOOTH_L1_LOSS_BACKWARD.name,
    spec.KL_DIV_BACKWARD.name,
    spec.KL_DIV_TARGET_BACKWARD.name,
)
assert set(LOG_TARGET) <= set(FORMS)


# --------------------------------------------------------------------------- any model


def saturate_first(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every Cast lists `saturate` (valid from opset 19) before `to`."""
    for node in model.graph.node:
        if node.op_type == "Cast":
            kept = [a for a in node.attribute if a.name != "saturate"]
            node.ClearField("attribute")
            node.attribute.extend([helper.make_attribute("saturate", 1), *kept])
    return model


def read_intermediate(model: onnx.ModelProto, position: int) -> onnx.ModelProto:
    """The float intermediate at `position` (among node outputs) also becomes a graph output."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in inferred.graph.value_info}
    floats = [
        name
        for node in model.graph.node
        for name in node.output
        if name in types
        and types[name].tensor_type.elem_type in (F16, F32, F64)
        and types[name].tensor_type.HasField("shape")  # a graph output needs one
        and name not in {o.name for o in model.graph.output}
    ]
    if not floats:
        return model
    name = floats[position % len(floats)]
    model.graph.node.append(helper.make_node("Identity", [name], ["also"]))
    info = onnx.ValueInfoProto(name="also")
    info.type.CopyFrom(types[name])
    model.graph.output.append(info)
    return model


def colliding_branch(model: onnx.ModelProto, output: str, op_type: str) -> onnx.ModelProto:
    """An If whose branches define the names the pass may invent for `output`."""
    first = model.graph.input[0]
    names = [f"{output}_grad_output", f"{output}_self", f"{output}_grad_output_2"]
    names.append(f"{op_type}_fused")
    nodes = [helper.make_node("Identity", [first.name], [names[0]])]
    nodes += [helper.make_node("Identity", [a], [b]) for a, b in itertools.pairwise(names)]

    def typed(name: str) -> onnx.ValueInfoProto:
        info = onnx.ValueInfoProto(name=name)
        info.type.CopyFrom(first.type)
        return info

    then_branch = helper.make_graph(nodes, "then", [], [typed(names[-1])])
    else_branch = helper.make_graph(
        [helper.make_node("Identity", [first.name], ["else_y"])], "else", [], [typed("else_y")]
    )
    model.graph.input.append(helper.make_tensor_value_info("flag", onnx.TensorProto.BOOL, []))
    model.graph.node.append(
        helper.make_node(
            "If", ["flag"], ["chosen"], then_branch=then_branch, else_branch=else_branch
        )
    )
    model.graph.output.append(typed("chosen"))
    return model


def nudge_constant(model: onnx.ModelProto, pick: int, factor: float) -> onnx.ModelProto:
    """One float constant (an initializer or a Constant node's value) times `factor`: a
    near miss of the form it belonged to."""
    tensors: list[Any] = [i for i in model.graph.initializer if i.data_type in (F16, F32, F64)]
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type in (F16, F32, F64):
                    tensors.append(attr.t)
    if not tensors:
        return model
    tensor = tensors[pick % len(tensors)]
    value = onnx.numpy_helper.to_array(tensor)
    with np.errstate(all="ignore"):
        changed = (value.astype(np.float64) * factor).astype(value.dtype)
    tensor.CopyFrom(onnx.numpy_helper.from_array(changed, tensor.name))
    return model
