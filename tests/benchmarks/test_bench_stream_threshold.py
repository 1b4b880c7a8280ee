"""The streaming-threshold benchmark times what it says: its second node reads the first
node's result, and it counts the bytes a call moves as the kernels do."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from benchmarks import bench_stream_threshold as bench
from benchmarks.bench_ort_native import attrs_for
from lossgrad_compiler import reference
from lossgrad_compiler.runtime.ort import session_options
from tests.ort.support import native_library


@pytest.mark.parametrize("form", ["0-d", "full"])
def test_chain_feeds_the_first_result_to_the_second_node(form: str) -> None:
    op = "SmoothL1LossBackward"
    inputs = bench.make_inputs(op, 64, np.dtype(np.float32), form=form)
    attrs = attrs_for(op, form)
    model = bench.chain_model(op, np.dtype(np.float32), form, 2)
    sess = ort.InferenceSession(model.SerializeToString(), session_options(native_library()))
    feeds = {"go": inputs["grad_output"], "x": inputs["self"], "t": inputs["target"]}
    (got,) = sess.run(None, feeds)
    first = reference.evaluate(op, inputs, attrs)
    expected = reference.evaluate(op, {**inputs, "self": first}, attrs)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize(
    ("cell", "moved"),
    [
        (("SmoothL1LossBackward", "float32", 20, "0-d"), 12 << 20),
        (("SmoothL1LossBackward", "bfloat16", 21, "full"), 16 << 20),
        (("KlDivBackward", "float16", 22, "0-d"), 16 << 20),  # KL never reads self
    ],
)
def test_bytes_moved(cell: tuple[str, str, int, str], moved: int) -> None:
    assert bench.bytes_moved(*cell) == moved


def test_child_times_both_chains_warm_and_flushed() -> None:
    times = bench.measure_child("KlDivBackward", "float32", 6, "0-d", threads=1, reps=2)
    assert len(times) == 4 and all(t > 0 for t in times)
