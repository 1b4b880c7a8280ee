"""Dynamic sizes that disagree, on every public way to call a compiled IREE module: a module of
signatures loaded from disk (the ones `evaluate` caches) and `evaluate` itself. IREE checks
element types, ranks and static sizes, but not that two dynamic sizes on one loop agree:
unchecked, a self of 50,000 rows against a target of 5 gave a wrong result, and 4,000,000
rows read far enough past `target` to end the process with SIGSEGV. Each exported function
now compares the sizes first (backends/iree/guards.py) and the call fails with 161002. The
calls that could crash run in a child process, so that a crash fails the test instead of
ending pytest."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler import reference, spec
from lossgrad_compiler.backends.iree import compile_module, module_text
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID
from lossgrad_compiler.evaluation import iree as iree_evaluation
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import Signature, signature_of
from lossgrad_compiler.runtime import iree as iree_runtime
from tests.helpers.isolated import outcome, run_python
from tests.helpers.tolerances import TIGHT, assert_matches

CASES = [
    ("SmoothL1LossBackward", {"reduction": "none", "beta": 1.0}),
    ("SmoothL1LossBackward", {"reduction": "sum", "beta": 0.5}),
    ("KlDivBackward", {"reduction": "sum", "log_target": 0}),
    ("KlDivTargetBackward", {"reduction": "sum", "log_target": 0}),
    ("KlDivTargetBackward", {"reduction": "none", "log_target": 1}),
]
IDS = [f"{op}-{attrs['reduction']}" for op, attrs in CASES]


def inputs(rows_self: int, rows_target: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(rows_self)
    return {
        "grad_output": np.float32(1.0),
        "self": rng.uniform(0.1, 1.0, (rows_self, 3)).astype(np.float32),
        "target": rng.uniform(0.1, 1.0, (rows_target, 3)).astype(np.float32),
    }


def signature(op_type: str, attrs: dict[str, Any]) -> Signature:
    """The signature `evaluate` compiles for a call with rows x 3 inputs (every size dynamic)."""
    infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in inputs(5, 5).items()}
    return signature_of(spec.validate(op_type, infos, attrs))


def test_every_exported_function_is_checked() -> None:
    """No function of a module of signatures runs without the check: the level-2 functions
    are private, and what is exported under each signature's id is its guard."""
    signatures = [signature(op, attrs) for op, attrs in CASES]
    text = module_text(lower_signatures(signatures))
    module = iree_runtime.load(compile_module(lower_signatures(signatures)), device="local-sync")
    assert sorted(module.names) == sorted({s.id for s in signatures})
    for sig in signatures:
        assert f"func.func private @{sig.id}__unchecked(" in text
        assert f"func.func @{sig.id}(" in text
    assert text.count("cf.assert") >= len(signatures)


def test_a_broadcast_one_still_runs_against_a_large_dynamic_size() -> None:
    """The check compares sizes on one loop only: a static 1 is broadcast, never compared."""
    attrs = {"reduction": "sum", "log_target": 0}
    call = inputs(50_000, 1)
    got = iree_evaluation.evaluate("KlDivBackward", call, attrs, device="local-sync")
    want = reference.evaluate("KlDivBackward", call, attrs)
    assert_matches(got, want, "KlDivBackward", call, attrs, tolerance=TIGHT)


MISMATCHED = [(50_000, 5), (5, 50_000), (4_000_000, 5)]
"""(rows of self, rows of target): the wrong sum of issue 22, the other way round, and the
size whose reads past `target` ended the process."""

CALLS = """
import json, sys
import numpy as np
from lossgrad_compiler import spec
from lossgrad_compiler.backends.iree import compile_module
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import signature_of
from lossgrad_compiler.evaluation.iree import evaluate
from lossgrad_compiler.runtime import iree

op_type, attrs, way = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
small = {"grad_output": np.float32(1.0), "self": np.ones((5, 3), np.float32),
         "target": np.ones((5, 3), np.float32)}
infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in small.items()}
sig = signature_of(spec.validate(op_type, infos, attrs))
module = iree.load(compile_module(lower_signatures([sig]))) if way == "load" else None
for rows_self, rows_target in json.loads(sys.argv[4]):
    call = {**small, "self": np.ones((rows_self, 3), np.float32),
            "target": np.ones((rows_target, 3), np.float32)}
    try:
        if module is not None:
            result = module(sig.id, *(call[n] for n in spec.INPUT_NAMES))
        else:
            result = evaluate(op_type, call, attrs)
        print("computed", np.asarray(result).sum(), flush=True)
    except LossGradError as err:
        print("refused", err.code, err, flush=True)
"""


@pytest.mark.parametrize("way", ["load", "evaluate"])
@pytest.mark.parametrize(("op_type", "attrs"), CASES, ids=IDS)
def test_dynamic_sizes_that_differ_are_refused(
    op_type: str, attrs: dict[str, Any], way: str
) -> None:
    """Every mismatch fails with one line and 161002, in a child process (before the check,
    `load` computed garbage or ended with SIGSEGV)."""
    done = run_python(CALLS, None, op_type, json.dumps(attrs), way, json.dumps(MISMATCHED))
    assert done.returncode == 0, outcome(done)
    lines = done.stdout.splitlines()
    assert len(lines) == len(MISMATCHED), done.stdout
    for (rows_self, rows_target), line in zip(MISMATCHED, lines, strict=True):
        context = f"self {rows_self} rows, target {rows_target}: {line}"
        assert line.startswith(f"refused {ACLNN_ERR_PARAM_INVALID} {op_type}: "), context
        assert line.endswith("[aclnn 161002 ACLNN_ERR_PARAM_INVALID]"), context
        if way == "load":
            assert "self dimension 0 and target dimension 0" in line, context
            assert "must be equal at run time" in line, context


@pytest.mark.parametrize(("op_type", "attrs"), CASES, ids=IDS)
def test_a_loaded_module_still_computes_calls_whose_sizes_agree(
    op_type: str, attrs: dict[str, Any]
) -> None:
    sig = signature(op_type, attrs)
    module = iree_runtime.load(compile_module(lower_signatures([sig])), device="local-sync")
    for rows in (5, 50_000):
        fine = inputs(rows, rows)
        got = module(sig.id, *(fine[n] for n in spec.INPUT_NAMES))
        want = reference.evaluate(op_type, fine, attrs)
        assert_matches(got, want, op_type, fine, attrs, tolerance=TIGHT, context=f"{rows} rows")
