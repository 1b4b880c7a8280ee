"""The loop nests' lane loops (backends/ort/lane_printer.py, cxx/lanes.h): the rows of a
classification kernel run 16 classes at a time with AVX-512, 8 with AVX2, the last partial
step masked, and the results are the scalar loop's bits. A process with
$LOSSGRAD_ORT_NEST_LANES=0 runs every row in the scalar loop alone (as a build without those
instruction sets does), and one with
$LOSSGRAD_ORT_STREAM_ABOVE=0 streams the lane stores of every call whose rows lie on 64-byte
boundaries; both must give this process's bits.

The class counts give a partial step alone (10), one whole step (16), two and a partial one
(37) and rows of whole lines for every type (64); the targets fall in the first step, on its
last lane, in the last step, on the row's last class and on ignore_index; log_prob holds NaN,
infinities, signed zeros and values whose exp overflows, underflows or is subnormal. The
grid's small classes (C <= 7) take one masked step, so the reference is checked here at these
sizes too."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ort.class_variants import all_class_variants
from lossgrad_compiler.runtime.ort_io import run_session
from lossgrad_compiler.targets.ort_library import kernel_library_source
from tests.helpers.class_cases import ClassCase, make_class_case
from tests.helpers.tolerances import TIGHT, assert_matches
from tests.ort.class_support import class_model, run_case
from tests.ort.support import native_session
from tests.ort.test_ort_classes_native import EXP_OPS, assert_agrees

ROOT = Path(__file__).resolve().parents[2]
OPS = (spec.CROSS_ENTROPY_LOSS_GRAD.name, spec.NLL_LOSS_BACKWARD.name)
CLASSES = (10, 16, 37, 64)
DTYPES = (np.float16, "bfloat16", np.float32, np.float64)
SPECIALS = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 89.5, -104.5, -90.0, -87.5, 1e-30, -1e-30, 3.0]
)
"""exp of these: NaN, inf, 0, 1, 1, overflow, underflow, subnormal (two), ~1, ~1, finite."""

pytestmark = pytest.mark.usefixtures("native_kernels")


def _dtype(name: object) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)  # type: ignore[call-overload]


def _targets(classes: int, ignore_index: int) -> np.ndarray:
    """The first lane, the last of the first step, the row's last class, an ignored row,
    the first of the second step, one in the tail where there is one, and 5."""
    wanted = np.array([0, 15, classes - 1, ignore_index, 16 % classes, 40, 5], np.int64)
    return np.where(wanted < classes, wanted, ignore_index)


def cases(specials: bool) -> list[ClassCase]:
    """Every reduction, weight present and absent, label smoothing 0 and 0.25 (cross
    entropy), both target types, over CLASSES and DTYPES; with `specials`, log_prob's
    first row holds SPECIALS, repeated."""
    found = []
    for k, (op, classes, dtype) in enumerate(
        (op, c, d) for op in OPS for c in CLASSES for d in DTYPES
    ):
        smoothings = (0.0, 0.25) if op == spec.CROSS_ENTROPY_LOSS_GRAD.name else (None,)
        for reduction in ("none", "mean", "sum"):
            for weighted in (False, True):
                for ls in smoothings:
                    ignore_index = -100 if weighted else 20
                    targets = _targets(classes, ignore_index)
                    case = make_class_case(
                        op, (len(targets), classes), _dtype(dtype), reduction=reduction,
                        ignore_index=ignore_index, weighted=weighted, seed=k,
                        target_dtype=np.int32 if weighted else np.int64,
                        targets=targets,
                        label_smoothing=ls,
                    )  # fmt: skip
                    if specials:
                        row = np.resize(SPECIALS, classes).astype(case.inputs["self"].dtype)
                        case.inputs["self"][0] = row
                    found.append(case)
    return found


def agrees(got: np.ndarray, case: ClassCase) -> None:
    """test_ort_classes_native.assert_agrees, but within TIGHT in the half types too where
    exp decides the bits: over thousands of elements, one whose float32 value lies within an
    exp ulp of a half's rounding boundary rounds the other way (the small grid has none)."""
    if case.op_type in EXP_OPS:
        assert_matches(got, case.expected(), *case.call, tolerance=TIGHT, context=case.label)
    else:
        assert_agrees(got, case)


def _results() -> dict[str, np.ndarray]:
    return {f"{k}-{case.label}": run_case(case) for k, case in enumerate(cases(specials=True))}


def _in_process_with(variable: str, tmp_path: Path) -> dict[str, np.ndarray]:
    saved = tmp_path / f"{variable}.npz"
    script = (
        "import numpy as np\n"
        "from tests.ort.test_ort_class_lanes import _results\n"
        f"np.savez({str(saved)!r}, **_results())\n"
    )
    env = {**os.environ, variable: "0"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    with np.load(saved) as loaded:
        return {k: loaded[k] for k in loaded.files}


@pytest.mark.parametrize("variable", ["LOSSGRAD_ORT_NEST_LANES", "LOSSGRAD_ORT_STREAM_ABOVE"])
def test_lanes_give_the_scalar_loop_s_bits(variable: str, tmp_path: Path) -> None:
    assert os.environ.get(variable) is None
    other = _in_process_with(variable, tmp_path)
    here = _results()
    assert sorted(other) == sorted(here)
    for key, value in here.items():
        # np.savez keeps bfloat16 as raw 2-byte records: compare shapes and bytes
        assert other[key].shape == value.shape, key
        assert other[key].tobytes() == value.tobytes(), key


@pytest.mark.parametrize("part", range(4))
def test_lane_rows_agree_with_the_reference(part: int) -> None:
    """A quarter of the cases each, the grid mixed (every fourth of its order)."""
    for case in cases(specials=False)[part::4]:
        agrees(run_case(case), case)


def test_every_float_and_half_kernel_has_its_lanes() -> None:
    """The lane loop is where the speed is (docs/benchmarks.md, "The classification
    operators"): the rank-2 classification kernels of every type but float64 print one; the
    batch sums and the target check (accumulations, whose order of addition is the
    reference's) none."""
    nest = r"\ninline OrtStatus\* (nest_\w+)\((.*?)\n\}\n"
    nests = re.findall(nest, kernel_library_source(), re.S)
    assert len(nests) == len(all_class_variants())
    for name, body in nests:
        rank = re.search(r"_r\d_n?w_(\d)", name)
        assert rank is not None, name
        lanes_expected = name.startswith(("nest_CrossEntropyLossGrad", "nest_NLLLossBackward"))
        if lanes_expected and rank[1] == "2":
            assert ("lanes::enabled()" in body) == ("float64" not in name), name
        for generic in re.findall(r"\n  \{\n(.*?)\n  \}\n", body, re.S):
            if re.search(r"plocal\d+\[0\] = ", generic):
                assert "lanes::enabled()" not in generic, name


@pytest.mark.parametrize("shape", [(3000, 37), (40, 4100)], ids=["many-rows", "long-rows"])
def test_threads_give_one_thread_s_bits(shape: tuple[int, int]) -> None:
    """The rows of a kernel's main nest run on the session's intra-op pool in tasks of whole
    rows (32K elements a task: several tasks at these shapes); the batch sums and the target
    check stay on one thread, so every thread count gives the same bits."""
    for op in OPS:
        for dtype in DTYPES:
            case = make_class_case(
                op, shape, _dtype(dtype), reduction="mean", weighted=True, ignore_index=3,
                label_smoothing=0.25 if op == spec.CROSS_ENTROPY_LOSS_GRAD.name else None,
            )  # fmt: skip
            model = class_model(case.op_type, case.inputs, case.attrs)
            one, three = (
                run_session(native_session(model, threads=t), dict(case.inputs))[0]
                for t in (1, 3)
            )
            assert one.tobytes() == three.tobytes(), case.label
            agrees(three, case)
