"""A fused node whose kernel would meet a dynamic dimension broadcast at run time (issue 44,
item 8): lossgrad_compiler/fusion/broadcasting.py.

The differential fuzzer's graph: grad_output `Expand(1, Shape(x)) / n`, whose dims ONNX shape
inference without data propagation (the compiler's) does not know, and a target reshaped
from [1, 2] to [2, 1], so that the graph broadcasts [1, 2] against [2, 1]. Fused into a
KlDivBackward it was compiled with a dynamic grad_output of size 1 on an axis of size 2, and
the size check failed ("a dynamic dimension is never broadcast") where the original runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lossgrad_compiler import fuse, spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.frontend.signature import signature_of
from lossgrad_compiler.fusion.broadcasting import unproved_broadcast
from tests.fusion.contract import Subject, check_fusion
from tests.fusion.graphs import Recipe, build, feeds, np_type

# the runtimes that compile the fused node: onnx's ReferenceEvaluator with the operators'
# reference kernels, and compile_model's standard-ONNX function bodies (with the size check)
RUNTIMES = ["reference", "functions"]


def _issue_recipe(t_shape: tuple[int, ...]) -> Recipe:
    """-(s*t) summed back to x's shape [1, 2], s = Expand(1, Shape(x)) / 3, t declared with
    its dims reversed and reshaped to `t_shape` in the graph."""
    return Recipe(
        "kl_plain",
        scale="ones",
        scale_value=1 / 3,
        x_shape=(1, 2),
        t_shape=t_shape,
        sum_back="reshape" if t_shape != (1, 2) else "",  # nothing to sum for [1, 2]
        reshape=True,
    )


def _contract(recipe: Recipe) -> tuple[list[str], list[str]]:
    built = build(recipe)
    fused, report = fuse(built.model)
    subject = Subject(built.model, built.op_type, built.attrs, built.terms, np_type(recipe.compute))
    inputs = feeds(built, np.random.default_rng(0), specials=False)
    problems = check_fusion(subject, fused, inputs, runtimes=RUNTIMES, original_in_ort=False)
    return report.lines(), problems


def test_the_fuzzers_graph_is_left_and_runs() -> None:
    lines, problems = _contract(_issue_recipe((2, 1)))
    assert not problems, "\n".join([*lines, *problems])
    assert lines[0].startswith("fused nothing"), lines
    assert any("a dynamic dimension is never broadcast" in line for line in lines), lines


def test_the_same_graph_without_the_broadcast_is_fused() -> None:
    """Target [1, 2] (reshaped from [2, 1]): every dimension on each axis is the same at
    run time, and the node runs."""
    lines, problems = _contract(_issue_recipe((1, 2)))
    assert not problems, "\n".join([*lines, *problems])
    assert lines[0].startswith("fused 1 KlDivBackward"), lines


KL, SL1, BCE = "KlDivBackward", "SmoothL1LossBackward", "BinaryCrossEntropyBackward"


@pytest.mark.parametrize(
    ("op_type", "compiled", "known", "proved"),
    [
        # the issue's: grad_output [?, ?] to the compiler, [1, 2] to the pass
        (KL, {"grad_output": (None, None), "self": (1, 2), "target": (2, 1)},
         {"grad_output": (1, 2), "self": (1, 2), "target": (2, 1)}, False),
        (KL, {"grad_output": (None, None), "self": (1, 2), "target": (1, 2)},
         {"grad_output": (1, 2), "self": (1, 2), "target": (1, 2)}, True),
        # a static 1 against a named size is a broadcast 1 in the kernel
        (KL, {"grad_output": (), "self": ("N", 3), "target": (1, 3)},
         {"grad_output": (), "self": ("N", 3), "target": (1, 3)}, True),
        (KL, {"grad_output": (), "self": ("N", 3), "target": ("N", 3)},
         {"grad_output": (), "self": ("N", 3), "target": ("N", 3)}, True),
        # two names may be 1 and 5 at run time
        (KL, {"grad_output": (), "self": ("N", 3), "target": ("M", 3)},
         {"grad_output": (), "self": ("N", 3), "target": ("M", 3)}, False),
        # a named size against a static 3 may be 1 at run time
        (SL1, {"grad_output": ("N",), "self": (4, 3), "target": (4, 3)},
         {"grad_output": ("N",), "self": (4, 3), "target": (4, 3)}, False),
        (SL1, {"grad_output": (None,), "self": (4, 3), "target": (4, 3)},
         {"grad_output": (3,), "self": (4, 3), "target": (4, 3)}, True),
        (SL1, {"grad_output": (None,), "self": (4, 3), "target": (4, 3)},
         {"grad_output": (None,), "self": (4, 3), "target": (4, 3)}, False),
        # alone on its axis, an unknown size is the loop's
        (SL1, {"grad_output": (None, 1), "self": (3,), "target": (1,)},
         {"grad_output": (None, 1), "self": (3,), "target": (1,)}, True),
        # an optional input is on the loops too
        (BCE, {"grad_output": (), "self": (4, 3), "target": (4, 3), "weight": (None, 3)},
         {"grad_output": (), "self": (4, 3), "target": (4, 3), "weight": (1, 3)}, False),
        (BCE, {"grad_output": (), "self": (4, 3), "target": (4, 3), "weight": (1, 3)},
         {"grad_output": (), "self": (4, 3), "target": (4, 3), "weight": (1, 3)}, True),
        # a rank the compiler does not know: the node would not compile
        (KL, {"grad_output": None, "self": (2,), "target": (2,)},
         {"grad_output": (2,), "self": (2,), "target": (2,)}, False),
    ],
)  # fmt: skip
def test_which_broadcasts_are_proved(
    op_type: str,
    compiled: dict[str, spec.Shape | None],
    known: dict[str, spec.Shape],
    proved: bool,
) -> None:
    assert (unproved_broadcast(op_type, compiled, known) == "") is proved


DIMS = st.sampled_from([1, 1, 2, 3, "N", "M", None])
SHAPES = st.lists(DIMS, min_size=0, max_size=3).map(tuple)


@settings(max_examples=300, deadline=None)
@given(
    op_type=st.sampled_from(sorted(spec.OPERATORS)),
    shapes=st.lists(SHAPES, min_size=5, max_size=5),
    attrs=st.dictionaries(st.just("reduction"), st.sampled_from(["none", "sum"])),
)
def test_the_pattern_is_the_compilers(
    op_type: str, shapes: list[spec.Shape], attrs: dict[str, str]
) -> None:
    """The pass reads a call's broadcast 1s by the rule the compiler's signatures are made
    by (spec.broadcast_dims: the pass sits below the frontend): a signature's patterns are
    exactly those 1s."""
    names = [i.name for i in spec.operator(op_type).inputs]
    infos = {
        n: spec.TensorInfo(np.dtype(np.float32), s) for n, s in zip(names, shapes, strict=False)
    }
    try:
        call = spec.validate(op_type, infos, attrs)
    except LossGradError:
        assume(False)
        return
    signature = signature_of(call)
    compiler = {
        n: tuple(d == 1 for d in p)
        for n, p in zip(names, signature.patterns, strict=True)
        if p is not None
    }
    known = {n: s for n, s in call.shapes.items() if s is not None}
    assert spec.broadcast_dims(spec.operator(op_type), known) == compiler
