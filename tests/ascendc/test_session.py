"""`evaluation.ascendc.session(model)`: a model's nodes run through the projects that
`compile_model(model, target="ascendc")` writes, with each call's launches (block dim and
tiling data) read back from the emulator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lossgrad_compiler import examples, reference, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.backends.ascendc.emulation import EmulatorRunnerError, decode_tiling
from lossgrad_compiler.demo_ascendc import core_lengths
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.errors import (
    ACLNN_ERR_PARAM_INVALID,
    InvalidArgumentError,
    LossGradError,
    UnsupportedByBackendError,
)
from lossgrad_compiler.evaluation import ascendc
from lossgrad_compiler.runtime.ascendc import AscendcSession


@pytest.fixture(scope="module")
def session() -> AscendcSession:
    return ascendc.session(examples.example_model())


def _inputs(node, values):
    """The node's inputs by the operator's input names; an empty name is an absent input."""
    names = spec.operator(node.op_type).input_names[: len(node.input)]
    return {n: values[v] for n, v in zip(names, node.input, strict=True) if v}


def test_the_session_runs_the_files_the_target_writes(session) -> None:
    written = compile_model(examples.example_model(), target="ascendc").artifact.files
    assert {k: v.encode() for k, v in session.files.items()} == written


@pytest.mark.parametrize("batch", [1, 5, 32])
def test_every_node_matches_the_reference(session, batch: int) -> None:
    """N=1 runs the model's `?x4` SmoothL1 signature, not the static one a lone call would
    get: the project written for the model serves every batch size."""
    model = examples.example_model()
    feeds = examples.example_feeds(batch, seed=batch)
    runs = session.trace(feeds)
    assert [r.node for r in runs] == [n.name for n in model.graph.node]
    for node, run in zip(model.graph.node, runs, strict=True):
        want = reference.evaluate(
            node.op_type, _inputs(node, feeds), lo.attributes_from_node(node)
        )
        assert run.output.dtype == want.dtype and run.output.shape == want.shape
        np.testing.assert_allclose(
            run.output.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-7
        )
        assert run.project in {p.info.project for p in session.projects}
    outputs = session.run(None, feeds)
    assert [o.shape for o in outputs] == [r.output.shape for r in runs]
    (box,) = session.run(["grad_box_pred"], feeds)
    (box_run,) = [r for r in runs if r.node == "box_l1"]
    np.testing.assert_array_equal(box, box_run.output)


@pytest.mark.parametrize("batch", [1, 5, 32, 1000])
def test_the_launches_carry_the_tiling_the_host_chose(session, batch: int) -> None:
    """The tiling data read back: the iteration space, a core split that covers it with no
    idle core, the planned tile, and the host-computed scale of each mean (kl_prior's 1/n,
    tags_bce's n: BCE with logits divides by n at the end, value_mse's 1/n)."""
    model = examples.example_model()
    feeds = examples.example_feeds(batch, seed=batch)
    planned = {p.info.op_type: p.graph.kernel.tile_length.value.data for p in session.projects}
    for node, run in zip(model.graph.node, session.trace(feeds), strict=True):
        (launch,) = run.launches
        tiling = launch.tiling
        op = spec.operator(node.op_type)
        if op.has_classes:  # the formula runs over self's shape
            iteration = np.shape(feeds[node.input[1]])
        else:
            iteration = np.broadcast_shapes(*(np.shape(feeds[v]) for v in node.input if v))
        assert tiling["totalLength"] == math.prod(iteration)
        lengths = core_lengths(tiling, launch.block_dim)
        assert sum(lengths) == tiling["totalLength"] and min(lengths) > 0
        assert 1 <= launch.block_dim <= 48
        block = tiling["bigCoreDataNum"] - tiling["smallCoreDataNum"]
        assert block in (8, 16)  # one 32-byte block of float32 / of a half type
        assert tiling["tileLength"] == planned[launch.op_type]
        mean = lo.attributes_from_node(node).get("reduction") == "mean"
        if mean and not op.has_classes:  # over the whole space (NLL: by its total_weight)
            n = math.prod(iteration)  # a divisor operator takes n itself, the others 1/n
            divides = op.scaling is spec.Scaling.DIVISOR
            assert tiling["scale"] == pytest.approx(n if divides else 1 / n, rel=1e-7)


def test_block_dim_limits_the_launch() -> None:
    limited = ascendc.session(examples.example_model(), block_dim=4)
    feeds = examples.example_feeds(32, seed=1)
    for run in limited.trace(feeds):
        (launch,) = run.launches
        assert launch.block_dim <= 4
        assert sum(core_lengths(launch.tiling, launch.block_dim)) == launch.tiling["totalLength"]


def test_block_dim_out_of_range_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="block_dim") as info:
        ascendc.session(examples.example_model(), block_dim=49)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID


def test_a_standard_node_is_refused_in_one_line() -> None:
    with pytest.raises(UnsupportedByBackendError, match=r"node 'log_softmax' is ai\.onnx"):
        ascendc.session(examples.training_step_model())


def test_a_missing_feed_is_named(session) -> None:
    feeds = examples.example_feeds(2)
    del feeds["box_anchor"]
    with pytest.raises(InvalidArgumentError, match="no value for input 'box_anchor'"):
        session.trace(feeds)


def test_a_feed_of_another_type_is_refused_by_the_aclnn_api(session) -> None:
    feeds = examples.example_feeds(2)
    feeds["box_anchor"] = feeds["box_anchor"].astype(np.float32)
    with pytest.raises(LossGradError, match="box_l1") as info:
        session.trace(feeds)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID


def test_short_tiling_data_is_an_error(session) -> None:
    project = session.projects[0]
    with pytest.raises(EmulatorRunnerError, match="tiling data"):
        decode_tiling(project, b"\0" * 8)


def test_a_model_read_from_a_file(tmp_path) -> None:
    path = tmp_path / "model.onnx"
    model = lo.make_model(
        lo.make_graph(
            [lo.make_node("KlDivBackward", ["g", "x", "t"], "y", reduction="sum")],
            [("g", "float16", []), ("x", "float16", ["N", 3]), ("t", "float16", ["N", 3])],
            ["y"],
        )
    )
    path.write_bytes(model.SerializeToString())
    feeds = {"g": np.float16(2), "x": np.ones((2, 3), np.float16),
             "t": np.full((2, 3), 0.5, np.float16)}  # fmt: skip
    (y,) = ascendc.session(path).run(None, feeds)
    want = reference.evaluate(
        "KlDivBackward", {"grad_output": feeds["g"], "self": feeds["x"], "target": feeds["t"]},
        {"reduction": "sum"},
    )  # fmt: skip
    np.testing.assert_array_equal(y, want)
