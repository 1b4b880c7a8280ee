"""The kernel library built with -fsanitize=address,undefined, driven from a Python
subprocess (libasan preloaded) over hypothesis-drawn shapes, broadcasts, element types and
attributes (arbitrary reduction bytes among them), including rejected calls; and over every
placement of benchmarks/bench_operand_placement.py with each call streamed (the shifted rows
of cxx/iteration.h): no sanitizer report, exit status 0."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lossgrad_compiler.backends.ort import build
from lossgrad_compiler.targets.ort_library import kernel_library_source as library_source

# -O0: every load and store stays in the code and is checked (at -O1 the optimiser removes
# some), and g++ 12 compiles the instrumented library in about a quarter of -O1's time
# (1.5 minutes against 6 on one core here)
SANITIZE_FLAGS = (
    "-O0",
    "-g",
    "-fno-omit-frame-pointer",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-trapping-math",
)

DRIVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from hypothesis import given, settings, strategies as st, HealthCheck
    from lossgrad_compiler import reference, spec
    from lossgrad_compiler.errors import LossGradError
    import tests.ort.support as support

    support.native_library = lambda: sys.argv[1]

    # ranks up to 4, and above the limit of 8: rejected, and read only as a count (rank
    # 64: written in place, its extents would run past the kernel's input records)
    dims = st.one_of(st.lists(st.integers(0, 3), max_size=4).map(tuple),
                     st.sampled_from([9, 64]).map(lambda rank: (1,) * rank))

    @settings(max_examples=int(sys.argv[2]), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(op=st.sampled_from(list(spec.BROADCAST_OPERATORS)), go=dims, x=dims, t=dims,
           dtype=st.sampled_from([t.dtype for t in spec.FLOAT_TYPES]),
           reduction=st.one_of(st.sampled_from(["none", "mean", "sum", "batchmean"]),
                               st.binary(max_size=8)),
           flag=st.sampled_from([0, 1]), threads=st.sampled_from([1, 2]))
    def run(op, go, x, t, dtype, reduction, flag, threads):
        attrs = {"reduction": reduction}
        if op == "SmoothL1LossBackward":
            attrs["beta"] = float(flag) * 0.5
        else:
            attrs["log_target"] = flag
        rng = np.random.default_rng(0)
        inputs = {n: rng.normal(size=s).astype(dtype)
                  for n, s in zip(spec.INPUT_NAMES, (go, x, t))}
        model = support.node_model(op, {}, (dtype,) * 3, (go, x, t), write_attributes=False)
        model.graph.node[0].ClearField("attribute")
        from onnx import helper
        model.graph.node[0].attribute.extend(
            helper.make_attribute(k, v) for k, v in attrs.items())
        try:
            expected = reference.evaluate(op, inputs, attrs)
        except LossGradError:
            expected = None
        try:
            got = support.run(support.native_session(model, threads), inputs)
        except Exception as err:
            assert expected is None, (op, go, x, t, attrs, str(err))
            return
        assert expected is not None and got.shape == expected.shape

    run()
    print("driver done")
    """
)


# Every placement of bench_operand_placement (operands off the result's lines: the shifted
# rows of cxx/iteration.h), each call streamed, rows long enough for whole lines and a tail.
PLACEMENTS_DRIVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from benchmarks.bench_operand_placement import placement_results
    from benchmarks.bench_ort_native import OPS

    for op in OPS:
        for form in ("full", "0-d"):
            results = placement_results(op, np.dtype(np.float32), form, 4099, sys.argv[1])
            assert len(set(results.values())) == 1, (op, form)
    print("driver done")
    """
)


# The classification operators' loop nests: every case of tests/helpers/class_cases.py in
# float32 and float16, int64 and int32 targets (CrossEntropyLossGrad's float32 results within
# TIGHT: its exp is cxx/vmath.h's, not numpy's), targets far outside [0, C) (counted, never
# used as an address, nor as the index of the weight gathered at the target), a weight or
# target of the wrong size (rejected before any read), label smoothing outside [0, 1] or NaN
# (rejected when the kernel is created), and no classes at all (rejected before the gather
# of every row, ignored or not, reads class 0).
CLASS_DRIVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from lossgrad_compiler.errors import LossGradError
    import tests.ort.support as support
    from tests.helpers.class_cases import CLASS_OP_TYPES, all_class_cases, make_class_case
    from tests.ort.class_support import run_case, run_class
    from tests.ort.test_ort_classes_native import assert_agrees

    support.native_library = lambda: sys.argv[1]
    for case in all_class_cases([np.float32, np.float16]):
        assert_agrees(run_case(case), case)
    for op_type in CLASS_OP_TYPES:
        shape = (4, 3) if op_type != "NLLLoss2dBackward" else (4, 3, 1, 1)
        for t in ([2**62, -(2**62), 3, 0], [2**31 - 1, -(2**31), -1, 1]):
            dtype = np.int64 if abs(t[0]) > 2**31 else np.int32
            for reduction in ("sum", "mean"):
                case = make_class_case(
                    op_type, shape, np.float32, weighted=True, reduction=reduction,
                    targets=np.array(t, dtype).reshape((4,) + shape[2:]), target_dtype=dtype,
                )
                try:
                    run_case(case)
                    raise AssertionError("no TARGET_RANGE")
                except Exception as err:
                    assert "161002" in str(err), str(err)
    wrong = [
        ("NLLLoss2dBackward", (2, 3, 2, 2), "weight", np.ones(1, np.float32)),
        ("NLLLoss2dBackward", (2, 3, 2, 2), "target", np.zeros((2, 1, 2), np.int64)),
        ("CrossEntropyLossGrad", (5, 4), "weight", np.ones(3, np.float32)),
        ("CrossEntropyLossGrad", (5, 4), "weight", np.ones(9, np.float32)),
        ("CrossEntropyLossGrad", (5, 4), "target", np.zeros(2, np.int64)),
        ("CrossEntropyLossGrad", (5, 4), "target", np.zeros(7, np.int64)),
    ]
    for op_type, shape, name, bad in wrong:
        good = make_class_case(op_type, shape, np.float32, weighted=True)
        try:
            run_class(op_type, {**good.inputs, name: bad}, good.attrs)
            raise AssertionError("accepted")
        except Exception as err:
            assert "INVALID_ARGUMENT" in str(err), str(err)
    good = make_class_case("CrossEntropyLossGrad", (5, 4), np.float32, weighted=True)
    for ls in (-0.5, 1.5, float("nan")):
        try:
            run_class(good.op_type, good.inputs, {**good.attrs, "label_smoothing": ls})
            raise AssertionError("accepted")
        except Exception as err:
            assert "label_smoothing" in str(err), str(err)
    empty = {
        "grad_output": np.ones((), np.float32),
        "self": np.zeros((3, 0), np.float32),
        "target": np.full(3, -100, np.int64),
        "weight": np.ones(0, np.float32),
    }
    for ls in (0.0, 0.25):
        try:
            run_class(good.op_type, empty, {"label_smoothing": ls})
            raise AssertionError("accepted")
        except Exception as err:
            assert "C >= 1" in str(err), str(err)
    print("driver done")
    """
)


def _sanitizer_runtime(tools: build.Toolchain, name: str) -> str | None:
    done = subprocess.run(
        [*tools.compiler, f"-print-file-name={name}"], capture_output=True, text=True
    )
    path = done.stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def _sanitized_run(driver: str, *args: str, stream_above: str | None = None) -> None:
    """Runs `driver` with the sanitized library (its first argument) preloaded with the
    sanitizer runtimes: exit status 0, no report."""
    try:
        tools = build.toolchain()
    except build.NativeUnavailableError as err:
        pytest.skip(str(err))
    asan = _sanitizer_runtime(tools, "libasan.so")
    ubsan = _sanitizer_runtime(tools, "libubsan.so")
    if asan is None or ubsan is None:
        pytest.skip("the compiler has no sanitizer runtimes")
    library = build.build_shared_library(
        library_source(), "liblossgrad_ort_asan", flags=SANITIZE_FLAGS
    )
    env = {
        **os.environ,
        "LD_PRELOAD": f"{asan}:{ubsan}",
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=23",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=24",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    if stream_above is not None:
        env["LOSSGRAD_ORT_STREAM_ABOVE"] = stream_above
    done = subprocess.run(
        [sys.executable, "-c", driver, str(library), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    report = done.stdout[-3000:] + done.stderr[-6000:]
    assert done.returncode == 0, report
    assert "driver done" in done.stdout, report
    assert "ERROR: AddressSanitizer" not in done.stderr, report
    assert "runtime error:" not in done.stderr, report


def test_kernels_under_address_and_undefined_sanitizers() -> None:
    _sanitized_run(DRIVER, "150")


def test_streamed_placements_under_address_and_undefined_sanitizers() -> None:
    _sanitized_run(PLACEMENTS_DRIVER, stream_above="0")


def test_classification_kernels_under_address_and_undefined_sanitizers() -> None:
    _sanitized_run(CLASS_DRIVER)
