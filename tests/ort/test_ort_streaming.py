"""Streaming stores (cxx/stream.h): calls that move more bytes than
$LOSSGRAD_ORT_STREAM_ABOVE write their result with non-temporal stores, from a staged block
or, with AVX-512, straight from the 16-lane loop of a float body (cxx/iteration.h's
kStreamsInLoop) and from the fused half path (kStreamsFusedHalves): the blocks that start on
a 64-byte boundary. A process with the threshold at 0 streams every call; its results must be
the bits of this process, which streams none of these small calls. The shapes give unaligned
heads and tails (sizes that are no multiple of 64 bytes, so that a task's first block is
staged and the rest are stored from the loop), several blocks per task, an odd number of
half chunks and broadcast operands. test_only_float_bodies_without_exp_or_log_stage_their_stream
checks which kernels may stream through a staged block."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.cases import DTYPES, OP_TYPES, make_case
from tests.ort.support import (
    case_model,
    kernel_structs,
    native_session,
    run,
)

ROOT = Path(__file__).resolve().parents[2]
SHAPES = [((), (3, 1111), (3, 1111)), ((1111,), (3, 1111), (1111,)), ((7,), (7,), (7,))]


def _results() -> dict[str, np.ndarray]:
    results = {}
    for op_type in OP_TYPES:
        for dtype in DTYPES:
            for k, (go, x, t) in enumerate(SHAPES):
                reduction = "mean" if go == () else "none"
                case = make_case(op_type, {"reduction": reduction}, x, t, go, dtype, seed=k)
                key = f"{case.label}-{k}"
                results[key] = run(native_session(case_model(case), threads=2), case.inputs)
    return results


pytestmark = pytest.mark.usefixtures("native_kernels")


def test_streamed_results_are_the_cached_ones(tmp_path: Path) -> None:
    saved = tmp_path / "streamed.npz"
    script = (
        "import numpy as np, sys\n"
        "from tests.ort.test_ort_streaming import _results\n"
        f"np.savez({str(saved)!r}, **_results())\n"
    )
    env = {**os.environ, "LOSSGRAD_ORT_STREAM_ABOVE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert os.environ.get("LOSSGRAD_ORT_STREAM_ABOVE") is None
    cached = _results()
    with np.load(saved) as streamed:
        assert sorted(streamed.files) == sorted(cached)
        for key, value in cached.items():
            # np.savez keeps bfloat16 as raw 2-byte records: compare shapes and bytes
            assert streamed[key].shape == value.shape, key
            assert streamed[key].tobytes() == value.tobytes(), key


def test_only_float_bodies_without_exp_or_log_stage_their_stream() -> None:
    """Kernels bound by their arithmetic (a body calling exp or log) and kernels with a half
    result never stream through a staged block as a whole: the staging pass made both slower
    (variant_printer.streams_its_result). A float body with exp or log streams only from the
    16-lane loop, and a half result only from the fused path, which need no staging."""
    kernels = kernel_structs()
    assert kernels
    for name, body in kernels:
        transcendental = "lossgrad::exp(" in body or "lossgrad::log(" in body
        wide = "using Out = float;" in body or "using Out = double;" in body
        streams = wide and not transcendental
        assert f"kStreams = {'true' if streams else 'false'};" in body, name
    for half in ("float16", "bfloat16"):
        assert any(f"using Out = {half};" in body for _, body in kernels)
    assert any("kStreams = false;" in body for _, body in kernels)
    assert any("kStreams = true;" in body for _, body in kernels)
