"""The kernels AscendNPU IR schedules, run on this CPU by the compiler's own CPU-runner
lowering (lossgrad_compiler/backends/ascendnpu_ir/cpu_runner.py), against reference.py.

* Every elementwise signature class (no sum over broadcast dimensions) in f16, bf16, f32 and
  mixed half types, every broadcast pattern (ranks 0-8, empty dimensions), as the dynamic
  signature: the scheduled kernel matches the reference with the native kernels'
  tolerance, bit for bit in f16/bf16.
* Sums (KL results smaller than B) with a half-type result: the scheduled kernel matches too.
* Sums with an f32 result: AscendNPU IR 1.2.0's reduction schedule (fusion kind ANY_PBR)
  accumulates the tiles into a buffer it initialises, then reduces that buffer into one it
  never initialises (`linalg.reduce ... outs(tensor.empty)`, `__final_reduction_op__`).
  The runner fills every allocation with NaN bits, so the defect shows as NaN; where the
  buffer is shared with a scalar load, the result is off by that scalar. The same HFusion
  form, lowered by the same CPU runner without the schedule, matches the reference (bit for
  bit but for exp/log, which the runner takes from libm): the form is right, the schedule
  is not. Pinned, so that a fixed compiler shows up here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ascendnpuir", reason="needs AscendNPU IR: pip install -e '.[ascend]'")
pytest.importorskip("llvmlite", reason="needs llvmlite: pip install -e '.[ascend]'")

from lossgrad_compiler import level2, reference
from lossgrad_compiler.backends.ascendnpu_ir import AscendNpuIrTarget, hfusion_module
from lossgrad_compiler.backends.ascendnpu_ir.cpu_runner import (
    CpuRunnerUnavailableError,
    mlir_translate,
    runner_module,
)
from lossgrad_compiler.backends.ascendnpu_ir.summary import functions
from lossgrad_compiler.backends.ascendnpu_ir.toolchain import run_opt
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import signature_of
from lossgrad_compiler.runtime import ascendnpu_ir as runner
from tests.helpers.cases import OP_TYPES, Case, make_case, standard_cases
from tests.helpers.tolerances import TIGHT, assert_matches, bits
from tests.hfusion import F16, F32
from tests.hfusion import TYPE_GROUPS as HFUSION_TYPES

try:
    mlir_translate()
except CpuRunnerUnavailableError as err:
    pytest.skip(str(err), allow_module_level=True)

TYPES = HFUSION_TYPES


def sums(case: Case) -> bool:
    (function,) = lower_signatures([signature_of(case.checked)]).ops
    return level2.analyze_function(function).reduces  # type: ignore[arg-type]


def check(cases: list[Case], *, schedule: bool = True, exact: bool = False) -> None:
    calls = [runner.Call(c.op_type, c.inputs, c.attrs) for c in cases]
    for case, got in zip(cases, runner.evaluate_calls(calls, schedule=schedule), strict=True):
        wanted = reference.evaluate(case.op_type, case.inputs, case.attrs)
        assert got.dtype == wanted.dtype and got.shape == wanted.shape, case.label
        assert_matches(
            got, wanted, case.op_type, case.inputs, case.attrs, tolerance=TIGHT,
            context=case.label,
        )  # fmt: skip
        if exact:
            assert (bits(got) == bits(wanted)).all(), f"{case.label}: not bit-identical"


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op_type", OP_TYPES)
def test_elementwise_kernels_match_the_reference(op_type: str, dtype: str) -> None:
    cases = [c for c in standard_cases(op_type, TYPES[dtype], seed=6) if not sums(c)]
    assert cases
    check(cases, exact=dtype in ("float16", "bfloat16"))


@pytest.mark.parametrize(
    ("op_type", "dtype"),
    [
        (op, dtype)
        for op, mixed in (("KlDivBackward", "mixed_half"), ("KlDivTargetBackward", "mixed_narrow"))
        for dtype in ("float16", "bfloat16", mixed)  # the mixed triple gives a half result
    ],
)
def test_half_type_sums_match_the_reference(op_type: str, dtype: str) -> None:
    cases = [
        c
        for c in standard_cases(op_type, TYPES[dtype], seed=6)
        if sums(c) and c.result_dtype.itemsize == 2
    ]
    assert cases
    check(cases)


@pytest.mark.parametrize("op_type", ["KlDivBackward", "KlDivTargetBackward"])
def test_float32_sums_of_the_unscheduled_form_match_the_reference(op_type: str) -> None:
    cases = [c for c in standard_cases(op_type, F32, seed=6) if sums(c)]
    check(cases, schedule=False)


def _origin(value: str, body: list[str]) -> str:
    """The op that defines a value, looking through tensor.extract_slice to its source."""
    definitions = {
        line.split("=", 1)[0].strip(): line.split("=", 1)[1].strip()
        for line in body
        if line.strip().startswith("%") and "=" in line
    }
    definition = definitions[value]
    while definition.startswith("tensor.extract_slice"):
        definition = definitions[definition.split()[1].split("[")[0]]
    return definition


def test_float32_sums_reduce_into_an_uninitialised_buffer_in_ascendnpu_ir_1_2() -> None:
    """The defect, in the IR and in the numbers: the final reduction's accumulator comes
    from a tensor.empty, and the poisoned allocation makes the sum NaN."""
    case = make_case("KlDivBackward", {"reduction": "sum"}, (3,), (4, 3), (4, 3), F32, seed=1)
    scheduled = run_opt(
        str(hfusion_module(lower_signatures([signature_of(case.checked)]))),
        AscendNpuIrTarget().hfusion_options,
    )
    finals = 0
    for function in functions(scheduled):
        for line in function.body:
            if "__final_reduction_op__" in line:
                accumulator = line.split("outs(")[1].split(":")[0].strip()
                assert _origin(accumulator, function.body).startswith("tensor.empty(")
                finals += 1
    assert finals > 0
    wanted = reference.evaluate(case.op_type, case.inputs, case.attrs)
    assert np.isfinite(wanted).all()
    assert np.isnan(runner.evaluate(case.op_type, case.inputs, case.attrs)).all()
    unscheduled = runner.evaluate(case.op_type, case.inputs, case.attrs, schedule=False)
    assert (bits(unscheduled) == bits(wanted)).all()


def test_a_shared_final_accumulator_adds_the_scalar_it_held() -> None:
    """KlDivTargetBackward summed into a 0-d target: the final reduction's buffer is the one
    the target was loaded into, so the scheduled sum is the true sum plus the target."""
    case = make_case("KlDivTargetBackward", {"reduction": "sum"}, (2, 3), (), (2, 3), F32, seed=5)
    wanted = reference.evaluate(case.op_type, case.inputs, case.attrs)
    got = runner.evaluate(case.op_type, case.inputs, case.attrs)
    np.testing.assert_allclose(got, wanted + case.inputs["target"], rtol=1e-6)


def test_kernels_that_need_no_tiling_run_too() -> None:
    """0-d kernels have no tiling function: the runner calls the kernel directly."""
    case = make_case("SmoothL1LossBackward", {"reduction": "none", "beta": 0.5}, (), (), (), F16)
    check([case], exact=True)


def test_float64_and_bad_calls_are_refused_before_anything_is_built() -> None:
    case = make_case("KlDivBackward", {"reduction": "sum"}, (3,), (3,), (), np.float64)
    with pytest.raises(UnsupportedByBackendError, match="float64 is not supported"):
        runner.evaluate(case.op_type, case.inputs, case.attrs)
    inputs: dict[str, Any] = {**case.inputs, "self": np.zeros((2, 5), np.float32)}
    with pytest.raises(ValueError, match="161002"):
        runner.evaluate(case.op_type, inputs, case.attrs)


def test_the_runner_module_has_one_host_entry_and_c_interfaces() -> None:
    case = make_case("KlDivBackward", {"reduction": "mean"}, (4, 3), (3,), (), F16)
    text = str(runner_module(lower_signatures([signature_of(case.checked)])))
    assert text.count("#hacc.host_func_type<host_entry>") == 1
    assert text.count("llvm.emit_c_interface") == 1
