"""benchmarks/bench_operand_placement.py and bench_ort_native.on_lines: the arrays sit where
they say, and the native kernels' results do not depend on where their operands and result sit
(off the result's lines, just below it modulo 4 KiB, 16 bytes apart), whether a call writes its
result with ordinary stores or streams it ($LOSSGRAD_ORT_STREAM_ABOVE=0)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_operand_placement as placement
from benchmarks.bench_ort_native import OPS, make_inputs, on_lines
from lossgrad_compiler import spec

ROOT = Path(__file__).resolve().parents[2]
# not a multiple of 16 lanes: each result has a partial last step
N = 4099
TYPES = (np.dtype(np.float32), np.dtype(np.float16))


def test_on_lines_copies_to_its_offset() -> None:
    array = np.arange(10, dtype=np.float32)
    for offset in (0, 4, 16, 60):
        placed = on_lines(array, offset)
        assert placed.ctypes.data % 64 == offset
        assert placed.tobytes() == array.tobytes()
    zero_d = on_lines(np.array(2.5, np.float16), 16)
    assert zero_d.shape == () and zero_d.ctypes.data % 64 == 16 and zero_d == 2.5


def test_placed_arrays_sit_at_their_offsets() -> None:
    # 4,000 bytes an array: no multiple of a line, so the slots must round up to their page
    inputs = make_inputs("MseLossBackward", 1000, np.dtype(np.float32), form="full")
    for offsets in placement.PLACEMENTS.values():
        placed, out = placement.placed_arrays(inputs, offsets)
        arrays = [*(placed[name] for name in spec.INPUT_NAMES), out]
        for array, offset in zip(arrays, offsets, strict=True):
            assert array.ctypes.data % 4096 == offset % 4096
        assert all(a.ctypes.data < b.ctypes.data for a, b in itertools.pairwise(arrays))
        for name, array in placed.items():
            assert array.tobytes() == inputs[name].tobytes()
        assert out.shape == inputs["self"].shape and out.dtype == inputs["self"].dtype


def _results() -> dict[str, bytes]:
    results = {}
    for op in OPS:
        for dtype in TYPES:
            for form in ("full", "0-d"):
                by_placement = placement.placement_results(op, dtype, form, N)
                for name, value in by_placement.items():
                    results[f"{op}-{dtype}-{form}-{name}"] = value
    return results


@pytest.fixture(scope="module")
def ordinary() -> dict[str, bytes]:
    return _results()


def test_results_are_the_same_at_every_placement(ordinary: dict[str, bytes]) -> None:
    for op in OPS:
        for dtype in TYPES:
            for form in ("full", "0-d"):
                cell = f"{op}-{dtype}-{form}-"
                values = {k: v for k, v in ordinary.items() if k.startswith(cell)}
                assert len(values) == len(placement.PLACEMENTS), cell
                assert len(set(values.values())) == 1, cell


def test_streamed_results_are_the_same_at_every_placement(
    ordinary: dict[str, bytes], tmp_path: Path
) -> None:
    saved = tmp_path / "streamed.npz"
    script = (
        "import numpy as np\n"
        "from tests.benchmarks.test_bench_operand_placement import _results\n"
        f"np.savez({str(saved)!r}, **{{k: np.frombuffer(v, np.uint8) "
        "for k, v in _results().items()})\n"
    )
    env = {**os.environ, "LOSSGRAD_ORT_STREAM_ABOVE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with np.load(saved) as streamed:
        assert sorted(streamed.files) == sorted(ordinary)
        for key, value in ordinary.items():
            assert streamed[key].tobytes() == value, key
