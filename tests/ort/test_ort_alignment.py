"""A result at any offset in its cache line: the ORT kernels' first block ends where the result
reaches a 64-byte boundary (cxx/iteration.h), and the bits must be those of a result ORT
allocates itself. numpy's own arrays start 16 bytes into a line. The shapes span several
tasks (32K elements each, every one with its own first block), a 0-d and a full grad_output,
and rows shorter than a block."""

from __future__ import annotations

import numpy as np
import pytest

from lossgrad_compiler.runtime.ort_io import to_ort_value
from tests.helpers.cases import DTYPES, make_case
from tests.ort.support import case_model, feeds_of, native_session, run

SHAPES = [((), (70001,), (70001,)), ((3, 1, 301), (3, 5, 301), (301,))]
# a plain body, one with a log (16 lanes with AVX-512), and one that reads optional inputs
OPS = ("SmoothL1LossBackward", "KlDivTargetBackward", "BinaryCrossEntropyWithLogitsBackward")


pytestmark = pytest.mark.usefixtures("native_kernels")


def _placed(like: np.ndarray, offset: int) -> np.ndarray:
    """An array shaped and typed like `like` whose data start `offset` bytes into a line."""
    room = np.zeros(like.nbytes + 128, np.uint8)
    start = (-room.ctypes.data) % 64 + offset
    return room[start : start + like.nbytes].view(like.dtype).reshape(like.shape)


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_result_anywhere_in_its_line_has_the_same_bits(op_type: str, dtype: np.dtype) -> None:
    for k, (go, x, t) in enumerate(SHAPES):
        reduction = "mean" if go == () else "none"
        case = make_case(op_type, {"reduction": reduction}, x, t, go, dtype, seed=k)
        session = native_session(case_model(case), threads=2)
        want = run(session, case.inputs)
        for offset in range(0, 64, want.itemsize):
            binding = session.io_binding()
            for name, value in feeds_of(case.inputs).items():
                binding.bind_ortvalue_input(name, to_ort_value(value))
            out = _placed(want, offset)
            binding.bind_ortvalue_output("out", to_ort_value(out))
            session.run_with_iobinding(binding)
            assert binding.get_outputs()[0].data_ptr() == out.ctypes.data, (k, offset)
            assert out.tobytes() == want.tobytes(), (k, offset)
