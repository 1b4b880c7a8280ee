"""CrossEntropyLossGrad through the Ascend C target, run in the CPU emulator: the batch
reductions (D = sum of w[t] over the kept rows for mean, W = sum of the weights with label
smoothing) computed by every core in Init (`ascendc.sum_loop`), the gather w[t] at the
verifier's safe index, exp on the vector unit over log_prob's tiles; the results against
reference.evaluate (bit-identical in the half types; float32 TIGHT, see _assert_result);
label_smoothing's [0, 1] range checked by the wrapper like spec.validate; and the cost
model's counters (emulator/lossgrad_emu/cost.h) for both batch-sum strategies."""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest

from lossgrad_compiler import errors, spec
from lossgrad_compiler.backends.ascendc import emulation as em
from lossgrad_compiler.backends.ascendc.project import lower_to_ascendc, print_projects
from lossgrad_compiler.evaluation.ascendc import Call, compile_signature, emulate_calls
from lossgrad_compiler.evaluation.ascendc import signature_project as checked_project
from lossgrad_compiler.pipeline import calls_level2
from tests.helpers.class_cases import ClassCase, make_class_case
from tests.helpers.tolerances import TIGHT, assert_matches, bits

CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
DTYPES = (np.float32, np.float16, ml_dtypes.bfloat16)


def _assert_result(got: np.ndarray, case: ClassCase) -> int:
    """TIGHT, and the number of elements whose bits differ from the reference. The kernel's
    Exp is the emulator's libm expf (correctly rounded nearly always), numpy's float32 exp
    an approximation within an ulp: they differ in about a third of the arguments, so
    float32 results differ by an ulp there. The half types compute exp in float32 too and
    round once to the half type, which hides that ulp nearly always: their bits must agree
    but for a rare rounding boundary (test_results_match_the_reference counts them)."""
    expected = case.expected()
    assert got.dtype == expected.dtype and got.shape == expected.shape, case.label
    assert_matches(got, expected, *case.call, tolerance=TIGHT, context=case.label)
    return int(np.count_nonzero(bits(got) != bits(expected)))


def _grid() -> list[ClassCase]:
    """Every dtype x reduction x weight x label smoothing 0 / 0.25 / 1, ignore_index a class
    (rows ignored) or not, over a batch, one row and an empty batch."""
    cases = []
    seed = 0
    for dtype in DTYPES:
        for reduction in ("none", "mean", "sum"):
            for weighted in (False, True):
                for ls in (0.0, 0.25, 1.0):
                    for shape in ((6, 5), (1, 3), (0, 4)):
                        seed += 1
                        cases.append(make_class_case(
                            CE, shape, dtype, reduction=reduction, weighted=weighted,
                            ignore_index=1 if seed % 2 else -100, label_smoothing=ls, seed=seed,
                        ))  # fmt: skip
    return cases


def test_results_match_the_reference() -> None:
    """TIGHT everywhere; in the half types at most 1 element in 200 off the reference's bits
    (each such element checked against a reference with a correctly rounded exp by hand:
    the exp ulp, nothing else)."""
    cases = _grid()
    outputs = emulate_calls([Call(*c.call) for c in cases])
    differing = elements = 0
    for case, got in zip(cases, outputs, strict=True):
        off = _assert_result(got, case)
        if got.dtype != np.float32:
            differing += off
            elements += got.size
    assert elements > 1000 and differing * 200 <= elements, (differing, elements)


def test_every_core_computes_the_same_sums() -> None:
    """D and W are recomputed by each core in level 2's order: any split over the cores
    (several tiles on one core, a share per core, a core per block) gives the same bits."""
    base = make_class_case(CE, (333, 7), np.float16, weighted=True, ignore_index=2,
                           label_smoothing=0.25, seed=7)  # fmt: skip
    wide = make_class_case(CE, (40, 900), ml_dtypes.bfloat16, weighted=True, reduction="sum",
                           label_smoothing=0.25, seed=8)  # fmt: skip
    calls = [Call(*c.call, block_dim=b) for c in (base, wide) for b in (1, 5, None)]
    outputs = emulate_calls(calls)
    for k, case in enumerate((base, wide)):
        runs = outputs[3 * k : 3 * k + 3]
        _assert_result(runs[0], case)
        assert all(r.tobytes() == runs[0].tobytes() for r in runs[1:]), case.label


def test_a_bad_target_is_target_range() -> None:
    case = make_class_case(CE, (4, 3), np.float32, weighted=True, label_smoothing=0.25)
    bad = dataclasses.replace(
        case, inputs={**case.inputs, "target": np.array([0, 3, -1, 2**40], np.int64)}
    )
    compiled = compile_signature(bad.checked)
    (result,) = em.run_raw(compiled.runner, [em.raw_case(bad.checked, bad.inputs, compiled, None)])
    with pytest.raises(errors.LossGradError) as caught:
        bad.expected()
    assert (result.status, result.message) == (caught.value.code, str(caught.value))
    assert caught.value.code == 161002 and "holds 3 value(s)" in result.message
    assert (result.output.view(np.uint8) == em.UNTOUCHED).all()


@pytest.mark.parametrize("value", [1.5, -0.25, math.nan, math.inf])
def test_label_smoothing_outside_its_range_is_refused(value: float) -> None:
    """The wrapper's range check (spec's minimum and maximum) words it as spec.validate."""
    case = make_class_case(CE, (3, 4), np.float32, label_smoothing=0.25)
    compiled = compile_signature(case.checked)
    raw = em.raw_case(case.checked, case.inputs, compiled, None)
    names = [a.name for a in spec.operator(CE).attributes]
    attributes = list(raw.attributes)
    attributes[names.index("label_smoothing")] = value
    (result,) = em.run_raw(compiled.runner, [dataclasses.replace(raw, attributes=attributes)])
    infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in case.inputs.items()}
    with pytest.raises(errors.LossGradError) as caught:
        spec.validate(CE, infos, {**case.attrs, "label_smoothing": value})
    assert (result.status, result.message) == (caught.value.code, str(caught.value))


def test_the_gather_reads_the_safe_index() -> None:
    """The weight is read at w[select(valid, t, 0)] (an index the verifier bounds) and at
    the class position; everything else at positions (the element loop's, the sum's i)."""
    case = make_class_case(CE, (6, 5), np.float16, weighted=True, label_smoothing=0.25)
    kernel = next(
        text for name, text in checked_project(case.checked).files.items()
        if name.startswith("op_kernel/") and name.endswith(".cpp") and "tiling" not in name
    )  # fmt: skip
    assert "Exp(" in kernel and "sumsGm" not in kernel and "SyncAll" not in kernel
    gathers = re_findall(r"weightGm\.GetValue\((\w+)\)", kernel)
    safe = [g for g in gathers if g not in ("pos1", "i")]
    assert safe and len(gathers) == len(safe) + 2, gathers
    for index in safe:
        cast = re_findall(rf"uint64_t {index} = static_cast<uint64_t>\((\w+)\);", kernel)
        assert cast and re_findall(rf"int64_t {cast[0]} = \w+ \? \w+ : 0;", kernel), index


def re_findall(pattern: str, text: str) -> list[str]:
    import re

    return re.findall(pattern, text)


# ------------------------------------------------------------------ the cost model


def _costs(case: ClassCase, batch_sums: str, block_dim: int | None) -> em.RawLaunch:
    em._RUNNERS.clear()  # a runner per strategy: both have the same OpType
    level2 = calls_level2([case.checked])
    (project,) = print_projects(lower_to_ascendc(level2, batch_sums=batch_sums))
    (compiled,) = em.compile_projects([project])
    (result,) = em.run_raw(
        compiled.runner, [em.raw_case(case.checked, case.inputs, compiled, block_dim)]
    )
    em._RUNNERS.clear()
    assert result.status == 0, result.message
    (launch,) = result.launches
    assert len(launch.costs) == launch.block_dim
    return dataclasses.replace(launch, tiling=b"")  # keep only what the tests read


N, C = 40, 6


@pytest.fixture(scope="module")
def weighted_mean() -> ClassCase:
    return make_class_case(CE, (N, C), np.float32, weighted=True, label_smoothing=0.25, seed=3)


def test_counters_on_one_core(weighted_mean: ClassCase) -> None:
    """One core: GetValue of grad_output once; D reads each target and gathers its weight
    (2N), W reads every weight (C); each element reads its target, its class's weight and
    w[t] (3NC). log_prob comes in and the result goes out by DataCopy(Pad): 2NC floats."""
    (core,) = _costs(weighted_mean, "per_core", 1).costs
    assert core.gm_scalar == 1 + 2 * N + C + 3 * N * C
    assert core.copy_bytes == 2 * N * C * 4
    targets, weights = N + N * C, N + C + 2 * N * C  # int64 and float32 scalar reads
    assert core.gm_bytes == core.copy_bytes + 8 * targets + 4 * weights + 4
    assert core.ub_scalar == 2 * N * C  # exp(lp) read and the result written per element
    assert core.vector_instructions > 0 and core.sync_alls == 0 and core.sync_wait_cycles == 0
    assert core.cycles >= core.gm_scalar * 100


def test_per_core_sums_cost_every_core_the_whole_batch(weighted_mean: ClassCase) -> None:
    """The chosen strategy: every core reads all N targets and C weights for the sums."""
    launch = _costs(weighted_mean, "per_core", 4)
    elements = [core.ub_scalar // 2 for core in launch.costs]  # its share of the N*C
    assert sum(elements) == N * C
    for core, share in zip(launch.costs, elements, strict=True):
        assert core.gm_scalar == 1 + 2 * N + C + 3 * share
        assert core.sync_alls == 0


def test_workspace_sums_split_the_batch_and_wait(weighted_mean: ClassCase) -> None:
    """The measured alternative: each core a share of the sums, a SyncAll per sum, every
    partial sum read back by every core; the result within TIGHT (another order)."""
    launch = _costs(weighted_mean, "workspace", 4)
    per_core = _costs(weighted_mean, "per_core", 4)
    for core, other in zip(launch.costs, per_core.costs, strict=True):
        assert core.sync_alls == 2
        assert core.gm_scalar < other.gm_scalar
    assert sum(c.sync_wait_cycles for c in launch.costs) > 0
    assert launch.cycles == max(c.cycles for c in launch.costs)


def test_no_classes_is_refused_before_the_gather() -> None:
    """C = 0: an invalid row's gather reads class 0, which an empty weight does not have;
    the wrapper refuses it with spec's classes rule, wording and code."""
    case = make_class_case(CE, (3, 4), np.float32, weighted=True, label_smoothing=0.25)
    compiled = compile_signature(case.checked)
    empty = {
        **case.inputs,
        "self": np.zeros((3, 0), np.float32),
        "weight": np.zeros(0, np.float32),
        "target": np.full(3, -100, np.int64),
    }
    (result,) = em.run_raw(compiled.runner, [em.raw_case(case.checked, empty, compiled, None)])
    with pytest.raises(errors.ClassShapeError) as caught:
        spec.validate(CE, {n: spec.TensorInfo(a.dtype, a.shape) for n, a in empty.items()}, {})
    assert (result.status, result.message) == (caught.value.code, str(caught.value))
