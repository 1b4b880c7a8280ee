"""The classification operators through the project's own ONNX Runtime entry point
(evaluation.ort: the model compiled for the functions mode, the kernel library registered):
the native kernels run them (a bad target raises their TARGET_RANGE, which the functions
could not), bit-identical to the reference; and without the library, the model-local
functions give the same result for valid targets."""

from __future__ import annotations

import numpy as np
import pytest

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import reference
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.evaluation.ort import run_native, session
from lossgrad_compiler.runtime.ort_io import run_session
from tests.helpers.class_cases import ClassCase, make_class_case, out_of_range_case

pytestmark = pytest.mark.usefixtures("native_kernels")


def builder_model(case: ClassCase) -> object:
    """The model as a user writes it with the project's builders."""
    node = lo.make_node(case.op_type, {n: n for n in case.present}, "out", **case.attrs)
    inputs = [(n, case.inputs[n].dtype, [None] * case.inputs[n].ndim) for n in case.present]
    graph = lo.make_graph([node], inputs, [("out", case.inputs["self"].dtype, None)])
    return lo.make_model(graph)


CASES = [
    make_class_case("NLLLossBackward", (6, 5), np.float16, weighted=True, ignore_index=1),
    make_class_case("NLLLossBackward", (5,), np.float32, reduction="sum", target_dtype=np.int32),
    make_class_case("NLLLoss2dBackward", (2, 3, 2, 2), np.float64, reduction="none"),
    make_class_case("NLLLoss2dBackward", (0, 3, 2, 2), np.float32, weighted=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_run_native_is_bit_identical(case: ClassCase) -> None:
    (got,) = run_native(builder_model(case), case.inputs)
    want = case.expected()
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_functions_path_agrees(case: ClassCase) -> None:
    (got,) = run_session(session(builder_model(case), native=False), case.inputs)
    assert got.tobytes() == case.expected().tobytes()


@pytest.mark.parametrize("op_type", ["NLLLossBackward", "NLLLoss2dBackward"])
def test_run_native_raises_target_range(op_type: str) -> None:
    case = out_of_range_case(op_type)
    with pytest.raises(LossGradError) as expected:
        reference.evaluate(*case.call)
    with pytest.raises(Exception, match="INVALID_ARGUMENT") as raised:
        run_native(builder_model(case), case.inputs)
    assert str(raised.value).endswith(str(expected.value))
