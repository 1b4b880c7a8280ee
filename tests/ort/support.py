"""Shared helpers of the native ORT kernel tests: single-node models and sessions that use
the built kernel library (tests skip when no compiler or headers are available).

With LOSSGRAD_TEST_ORT_LIBRARY=<path> the tests run another build of the library (a
prebuilt level, tests/ort/test_ort_prebuilt.py): native_library() and the runtime's
library_path() both return that path."""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from onnx import ModelProto

from lossgrad_compiler import onnx as lo
from lossgrad_compiler import spec
from lossgrad_compiler.backends.ort.build import NativeUnavailableError, toolchain
from lossgrad_compiler.runtime.ort_io import run_session
from lossgrad_compiler.targets import ort_library
from lossgrad_compiler.targets.ort_library import kernel_library_source, library_path

FEED_NAMES = ("go", "x", "t")
FEEDS: dict[str, str] = {
    "grad_output": "go",
    "self": "x",
    "target": "t",
    "weight": "w",
    "pos_weight": "pw",
}
"""The graph input of each operator input (FEED_NAMES: the three every operator takes)."""

ENV_LIBRARY = "LOSSGRAD_TEST_ORT_LIBRARY"

if os.environ.get(ENV_LIBRARY):
    _library = os.environ[ENV_LIBRARY]
    ort_library.library_path = lambda: _library  # what session() and run_native() load
    library_path = ort_library.library_path


def native_library() -> str:
    """The kernel library's path, or skip the test when it cannot be built here."""
    try:
        return str(library_path())
    except NativeUnavailableError as err:
        pytest.skip(f"native ORT kernels unavailable: {err}")


def build_macros(arch_flags: tuple[str, ...]) -> set[str]:
    """The macros the library's compiler defines with `arch_flags`."""
    done = subprocess.run(
        [*toolchain().compiler, *arch_flags, "-dM", "-E", "-x", "c++", "-"],
        input="",
        capture_output=True,
        text=True,
        check=True,
    )
    return {line.split()[1] for line in done.stdout.splitlines() if line.startswith("#define")}


def kernel_structs() -> list[tuple[str, str]]:
    """(name, body) of every kernel struct K<N> in the library's source, as printed."""
    return re.findall(r"struct (K\d+) \{(.*?)\n\};", kernel_library_source(), re.S)


def builds_vector_log(arch_flags: tuple[str, ...]) -> bool:
    """Whether the library's compiler with `arch_flags` defines what cxx/vmath.h asks of the
    float log's vector variant (g++, AVX-512F, FMA)."""
    macros = build_macros(arch_flags)
    return {"__AVX512F__", "__FMA__", "__GNUC__"} <= macros and "__clang__" not in macros


def node_model(
    op_type: str,
    attrs: dict[str, Any],
    dtypes: tuple[Any, ...],
    shapes: tuple[tuple, ...],
    result: tuple[Any, tuple] | None = None,
    *,
    write_attributes: bool = True,
    node_name: str = "node",
    names: tuple[str, ...] | None = None,
) -> ModelProto:
    """One ai.lossgrad node over graph inputs go, x, t (and w, pw for the optional inputs
    in `names`, the inputs given, in the op's order); output `out`.

    With write_attributes=False the attributes are put on the node as given (wrong types
    and values included), bypassing the builders' checks."""
    names = names or spec.INPUT_NAMES
    feeds = [FEEDS[n] for n in names]
    by_name = {n: FEEDS[n] for n in names}
    if write_attributes:
        node = lo.make_node(op_type, by_name, "out", name=node_name, **attrs)
    else:
        from onnx import helper

        order = spec.operator(op_type).input_names if op_type in spec.OPERATORS else names
        listed = [by_name.get(n, "") for n in order]
        while listed and not listed[-1]:
            listed.pop()
        node = helper.make_node(
            op_type, listed, ["out"], name=node_name, domain=spec.DOMAIN, **attrs
        )
    if result is None:  # symbolic sizes of the largest input's rank
        rank = max(len(shape) for shape in shapes)
        result = (dtypes[1], tuple(f"o{i}" for i in range(rank)))
    out_dtype, out_shape = result
    inputs = [(n, d, s) for n, d, s in zip(feeds, dtypes, shapes, strict=True)]
    graph = lo.make_graph([node], inputs, [("out", out_dtype, out_shape)])
    return lo.make_model(graph)


def case_model(case: Any) -> ModelProto:
    """The single-node model of a tests.helpers.cases.Case."""
    names = case.checked.present
    dtypes = tuple(case.inputs[n].dtype for n in names)
    shapes = tuple(case.inputs[n].shape for n in names)
    return node_model(
        case.op_type,
        case.attrs,
        dtypes,
        shapes,
        (case.result_dtype, case.result_shape),
        names=names,
    )


def native_session(
    model: ModelProto, threads: int = 1, library: str | None = None
) -> ort.InferenceSession:
    """A session of `model` as it is, with the kernel library (or `library`) registered."""
    so = ort.SessionOptions()
    so.register_custom_ops_library(library or native_library())
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def feeds_of(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {FEEDS[n]: a for n, a in inputs.items() if a is not None}


def run(session: ort.InferenceSession, inputs: dict[str, np.ndarray]) -> np.ndarray:
    return run_session(session, feeds_of(inputs))[0]


TWO_NATIVE_RUNS = textwrap.dedent(
    """
    import warnings
    from lossgrad_compiler import reference
    from lossgrad_compiler.evaluation import ort as native
    from tests.helpers.cases import make_case
    from tests.helpers.tolerances import assert_close
    from tests.ort.support import case_model, feeds_of

    case = make_case("KlDivTargetBackward", {"reduction": "mean"}, (2, 3), (2, 3), ())
    want = reference.evaluate(case.op_type, case.inputs, case.attrs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            (got,) = native.run_native(case_model(case), feeds_of(case.inputs))
            assert_close(got, want, compute=case.compute_dtype, tight=True)
    for w in caught:
        print("WARNING", w.category.__name__, w.message)
    """
)
"""A child process's script: one KlDivTargetBackward call through run_native, twice,
checked against the reference, and every warning printed as `WARNING <category> <message>`
(what the fallback and full-disk tests read)."""
