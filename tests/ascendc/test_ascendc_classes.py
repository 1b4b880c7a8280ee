"""The classification operators through the Ascend C target, run in the CPU emulator: every
result bit-identical to reference.evaluate (float32, float16, bfloat16; int64 and int32
targets; each reduction; weight or none; ignore_index; [C], [N, C], [N, C, H, W]; an empty
batch; dynamic and static signatures; several tiles and cores), a bad target refused with
TARGET_RANGE (aclnn 161002) by the wrapper, the wrapper's class checks worded as
spec.validate's, and float64 refused before anything is built.

The cases are grouped so that one runner build holds many signatures (each signature
fixes the reduction, the weight, ignore_index and the ranks; its calls vary the shapes)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects import arith, func, math
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.ops import GenericOp

from lossgrad_compiler import errors, reference, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.backends.ascendc.emulation import (
    UNTOUCHED,
    AclnnError,
    RawCase,
    aclnn_attributes,
    compile_projects,
    raw_case,
    run_raw,
    signature_project,
)
from lossgrad_compiler.backends.ascendc.project import lower_to_ascendc
from lossgrad_compiler.context import make_context
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.evaluation import ascendc as ascendc_evaluation
from lossgrad_compiler.evaluation.ascendc import Call, compile_signature, emulate_calls
from lossgrad_compiler.passes.ascendc_level2 import kernel_source, untranslated_constructs
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from lossgrad_compiler.targets.ascendc import AscendC
from tests.helpers.class_cases import (
    CLASS_OP_TYPES,
    SHAPES,
    ClassCase,
    class_case_function,
    class_case_module,
    make_class_case,
    out_of_range_case,
)
from tests.helpers.tolerances import TIGHT, assert_matches

VARIANTS = (("mean", True, 1), ("none", False, -100), ("sum", True, -100))
"""(reduction, weighted, ignore_index) of the signatures each type combination compiles."""
COMBOS = (
    (np.float32, np.int64),
    (np.float16, np.int64),
    (ml_dtypes.bfloat16, np.int64),
    (np.float32, np.int32),
)
"""(float type, target type): every float type with int64 targets, and int32 targets."""


def _assert_bits(got: np.ndarray, case: ClassCase) -> None:
    """Bit identity, but for an operator with exp: the kernel's Exp (the emulator's libm
    expf, correctly rounded nearly always) and numpy's float32 exp (its own SIMD
    approximation, within an ulp) differ by an ulp in a third of the arguments, so those
    results are compared TIGHT (4 ulps of their terms); a half result rounds that ulp away
    nearly always (test_ascendc_cross_entropy counts the exceptions)."""
    expected = case.expected()
    assert got.dtype == expected.dtype and got.shape == expected.shape, case.label
    if _has_exp(case):
        assert_matches(got, expected, *case.call, tolerance=TIGHT, context=case.label)
        return
    assert got.tobytes() == expected.tobytes(), (case.label, got, expected)


def _has_exp(case: ClassCase) -> bool:
    """Whether the operator's level 2 computes exp (CrossEntropyLossGrad's softmax)."""
    return any(isinstance(op, math.ExpOp) for op in _lowered_function(case).walk())


def _sweep(op_type: str) -> list[ClassCase]:
    """Each type combination x each variant x every shape of SHAPES (the empty batch and,
    for NLLLossBackward, the no-batch [C] included)."""
    return [
        make_class_case(
            op_type, shape, dtype, reduction=r, weighted=w, ignore_index=ii,
            target_dtype=target, seed=10 * k + j,
        )
        for dtype, target in COMBOS
        for k, (r, w, ii) in enumerate(VARIANTS)
        for j, shape in enumerate(SHAPES[op_type])
    ]  # fmt: skip


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_results_are_bit_identical_to_the_reference(op_type: str) -> None:
    cases = _sweep(op_type)
    outputs = emulate_calls([Call(*c.call) for c in cases])
    for case, got in zip(cases, outputs, strict=True):
        _assert_bits(got, case)


BOUNDARY = [  # (case, block_dim): several tiles on one core, a split over many cores
    (make_class_case(CLASS_OP_TYPES[0], (700, 50), np.float32, reduction="none"), 1),
    (make_class_case(CLASS_OP_TYPES[0], (333, 7), np.float16, weighted=True, ignore_index=2), None),
    (make_class_case(CLASS_OP_TYPES[1], (3, 7, 11, 13), ml_dtypes.bfloat16, weighted=True), 5),
    (
        make_class_case(
            CLASS_OP_TYPES[1], (2, 5, 90, 170), np.float32, reduction="none",
            target_dtype=np.int32, ignore_index=3,
        ),
        1,
    ),
]  # fmt: skip


def test_tiles_and_cores() -> None:
    """Positions decomposed across tile and core boundaries (tails of 32-byte blocks too)."""
    outputs = emulate_calls([Call(*c.call, block_dim=b) for c, b in BOUNDARY])
    for (case, _), got in zip(BOUNDARY, outputs, strict=True):
        _assert_bits(got, case)


STATIC = [
    make_class_case(CLASS_OP_TYPES[0], (6, 5), np.float16, weighted=True, ignore_index=1),
    make_class_case(CLASS_OP_TYPES[0], (5,), np.float32, reduction="sum", target_dtype=np.int32),
    make_class_case(CLASS_OP_TYPES[1], (1, 3, 1, 5), ml_dtypes.bfloat16, reduction="none"),
]


def test_static_signatures() -> None:
    """Static shapes (class_case_module(dynamic=False)): the class count a constant."""
    projects = []
    for k, case in enumerate(STATIC):  # each its own name: the OpType digests it
        module = ModuleOp([class_case_function(case, dynamic=False, name=f"static{k}")])
        LowerLossgradPass().apply(make_context(), module)
        projects.append(signature_project(module))
    compiled = compile_projects(projects)
    raws = [raw_case(c.checked, c.inputs, co, None) for c, co in zip(STATIC, compiled, strict=True)]
    results = run_raw(compiled[0].runner, raws)
    for case, result in zip(STATIC, results, strict=True):
        assert result.status == 0, result.message
        _assert_bits(result.output, case)


def _reference_error(case: ClassCase) -> errors.LossGradError:
    with pytest.raises(errors.LossGradError) as caught:
        case.expected()
    return caught.value


def _with_targets(case: ClassCase, targets: list[int]) -> ClassCase:
    """`case` with other target values (same shape and type: the same signature)."""
    t = case.inputs["target"]
    new = np.array(targets, dtype=np.int64).astype(t.dtype).reshape(t.shape)
    return dataclasses.replace(case, inputs={**case.inputs, "target": new})


BAD_TARGETS = [
    out_of_range_case(CLASS_OP_TYPES[0]),
    out_of_range_case(CLASS_OP_TYPES[1], ml_dtypes.bfloat16),
    _with_targets(
        make_class_case(CLASS_OP_TYPES[0], (4, 3), np.float32, ignore_index=1),
        [0, 2**40, 1, -(2**40)],
    ),
    _with_targets(
        make_class_case(
            CLASS_OP_TYPES[1], (2, 3, 1, 2), np.float16, target_dtype=np.int32, reduction="none"
        ),
        [2**31 - 1, 0, -(2**31), 2],
    ),
    _with_targets(make_class_case(CLASS_OP_TYPES[0], (3,), np.float32), [3]),
]  # fmt: skip


def test_a_bad_target_is_target_range() -> None:
    """The wrapper counts the bad targets before it launches anything: 161002 with the
    reference's message, out untouched, whatever the values (int64 far outside int32)."""
    compiled = [compile_signature(c.checked) for c in BAD_TARGETS]
    for case, co in zip(BAD_TARGETS, compiled, strict=True):
        (result,) = run_raw(co.runner, [raw_case(case.checked, case.inputs, co, None)])
        expected = _reference_error(case)
        assert (result.status, result.message) == (expected.code, str(expected)), case.label
        assert expected.code == 161002 and "target: holds" in result.message
        assert (result.output.view(np.uint8) == UNTOUCHED).all()
    with pytest.raises(AclnnError, match="outside"):
        emulate_calls([Call(*BAD_TARGETS[0].call)])


def test_kernel_addresses_only_positions() -> None:
    """Every GlobalTensor read of a class kernel is at a position in the iteration space
    (pos<j>, iterDim<j>), never at a value read from an input: no target can make the
    kernel read out of bounds, and it writes only its tile."""
    for case in (BOUNDARY[0][0], BOUNDARY[3][0]):
        kernel = next(
            text for name, text in _project(case).files.items()
            if name.startswith("op_kernel/") and name.endswith(".cpp")
        )  # fmt: skip
        reads = re.findall(r"Gm\.GetValue\(([^;]*)\);", kernel)
        assert reads, kernel
        for index in reads:
            tokens = set(re.findall(r"[A-Za-z_]\w*", index))
            assert tokens <= {f"pos{j}" for j in range(4)} | {f"iterDim{j}" for j in range(4)}
        assert "SetValue(k," in kernel and "Gm.SetValue" not in kernel


def _project(case: ClassCase) -> Any:
    from lossgrad_compiler.evaluation.ascendc import signature_project as checked_project

    return checked_project(case.checked)


# ------------------------------------------------------------------ the wrapper's checks


def _raw(op_type: str, inputs: dict[str, np.ndarray | None], attrs: dict[str, Any],
         out: np.ndarray) -> RawCase:  # fmt: skip
    op = spec.operator(op_type)
    given = [inputs.get(n) for n in op.input_names]
    return RawCase(
        inputs=[np.zeros((), np.float32) if a is None else a for a in given],
        flags=sum(1 << (2 + k) for k, a in enumerate(given) if a is None),
        out_dtype=out.dtype,
        out_shape=out.shape,
        attributes=aclnn_attributes(op, spec.check_attributes(op, attrs)),
    )


def _invalid(case: ClassCase, **changes: np.ndarray | None) -> tuple[str, dict, dict]:
    return case.op_type, {**case.inputs, **changes}, case.attrs


_NLL = make_class_case(CLASS_OP_TYPES[0], (4, 3), np.float32, weighted=True, reduction="none")
_NLL2D = make_class_case(CLASS_OP_TYPES[1], (2, 3, 2, 2), np.float16)
INVALID = [
    ("float target", _invalid(_NLL, target=np.zeros(4, np.float32))),
    ("int16 target", _invalid(_NLL2D, target=np.zeros((2, 2, 2), np.int16))),
    ("f16 weight", _invalid(_NLL, weight=np.ones(3, np.float16))),
    ("f32 total_weight", _invalid(_NLL2D, total_weight=np.ones((), np.float32))),
    ("rank 9 self", _invalid(_NLL, self=np.zeros((1,) * 9, np.float32))),
    ("rank 3 self", _invalid(_NLL, self=np.zeros((4, 3, 1), np.float32))),
    ("target rows", _invalid(_NLL, target=np.zeros(5, np.int64))),
    ("target 4-d", _invalid(_NLL2D, target=np.zeros((2, 2, 3), np.int64))),
    ("grad_output none", _invalid(_NLL, grad_output=np.ones((), np.float32))),
    ("grad_output mean", _invalid(_NLL2D, grad_output=np.ones((2,), np.float16))),
    ("total_weight", _invalid(_NLL, total_weight=np.ones((2,), np.float32))),
    ("weight size", _invalid(_NLL, weight=np.ones(4, np.float32))),
    ("missing target", _invalid(_NLL, target=None)),
]


@pytest.mark.parametrize(("label", "call"), INVALID, ids=[c[0] for c in INVALID])
def test_the_wrapper_rejects_like_spec(label: str, call: tuple[str, dict, dict]) -> None:
    op_type, inputs, attrs = call
    base = _NLL if op_type == _NLL.op_type else _NLL2D
    compiled = compile_signature(base.checked)
    out = base.expected()
    (result,) = run_raw(compiled.runner, [_raw(op_type, inputs, attrs, out)])
    infos = {n: None if a is None else spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}
    with pytest.raises(errors.LossGradError) as caught:
        spec.validate(op_type, infos, attrs)
    expected = caught.value
    assert (result.status, result.message) == (expected.code, str(expected))
    assert (result.output.view(np.uint8) == UNTOUCHED).all()


# ------------------------------------------------------------------ refusals


def test_float64_is_refused_before_building() -> None:
    """A float64 class function is refused for its element type, as every operator."""
    case = make_class_case(CLASS_OP_TYPES[1], SHAPES[CLASS_OP_TYPES[1]][0], np.float64)
    with pytest.raises(UnsupportedByBackendError, match="float64 is not supported"):
        AscendC().evaluate(*case.call)
    module = class_case_module(case, dynamic=True)
    LowerLossgradPass().apply(make_context(), module)
    with pytest.raises(UnsupportedByBackendError, match="float64 is not supported"):
        signature_project(module)


def _lowered_function(case: ClassCase) -> func.FuncOp:
    module = class_case_module(case, dynamic=True)
    LowerLossgradPass().apply(make_context(), module)
    (function,) = [f for f in module.ops if isinstance(f, func.FuncOp)]
    return function


def test_a_value_check_without_a_host_rule_is_named() -> None:
    """What the wrapper cannot count stays refused by name (ascendc_level2.HOST_CHECKS)."""
    source = kernel_source(_lowered_function(_NLL))
    assert source is not None and [c.rule for c in source.checks] == ["target_range"]
    assert untranslated_constructs(source, lambda op: True) == []
    found = untranslated_constructs(source, lambda op: True, host_checks=())
    assert [construct for construct, _ in found] == ["check target_range"]


def _with_unary(op_class: type[math.ExpOp] | type[math.LogOp]) -> func.FuncOp:
    """NLL's gradient with `op_class` applied to its negated quotient (made up here)."""
    function = _lowered_function(_NLL)
    gradient = next(op for op in function.walk() if isinstance(op, GenericOp))
    neg = next(op for op in gradient.body.block.ops if isinstance(op, arith.NegfOp))
    unary = op_class(neg.result)
    gradient.body.block.insert_op_after(unary, neg)
    for use in [u for u in neg.result.uses if u.operation is not unary]:
        use.operation.operands[use.index] = unary.result
    return function


def test_an_element_body_op_without_a_rule_is_refused_by_name() -> None:
    """A class body with an op the element form has no rule for (log) is refused naming
    that op, never the operator, and never half translated."""
    function = _with_unary(math.LogOp)
    with pytest.raises(UnsupportedByBackendError, match=r"no element rule for math\.log") as caught:
        lower_to_ascendc(function.parent_op())  # type: ignore[arg-type]
    assert _NLL.op_type not in str(caught.value)


def test_exp_of_a_computed_value_is_refused() -> None:
    """exp runs on the vector unit over an input's tiles (CrossEntropyLossGrad's exp(lp));
    exp of a value the element loop computes has no rule, and is refused by name."""
    function = _with_unary(math.ExpOp)
    with pytest.raises(UnsupportedByBackendError, match=r"math\.exp.*exp only of an input"):
        lower_to_ascendc(function.parent_op())  # type: ignore[arg-type]


def test_a_model_session_runs_and_refuses_a_bad_target() -> None:
    """An ONNX model's NLLLossBackward node through AscendcSession (the projects
    `--target ascendc` writes): the reference's result, and TARGET_RANGE for a bad target."""
    node = lo.make_node(
        "NLLLossBackward", ["g", "x", "t", "tw", "w"], "y", reduction="mean", ignore_index=1
    )
    graph = lo.make_graph(
        [node],
        [("g", "float32", []), ("x", "float32", ["N", 4]), ("t", "int64", ["N"]),
         ("tw", "float32", []), ("w", "float32", [4])],
        ["y"],
    )  # fmt: skip
    run = ascendc_evaluation.session(lo.make_model(graph))
    feeds = {"g": np.float32(2), "x": np.ones((3, 4), np.float32), "t": np.array([0, 1, 3]),
             "tw": np.float32(1.5), "w": np.arange(1, 5, dtype=np.float32)}  # fmt: skip
    names = dict(zip(spec.operator("NLLLossBackward").input_names, feeds.values(), strict=True))
    want = reference.evaluate("NLLLossBackward", names, {"reduction": "mean", "ignore_index": 1})
    (y,) = run.run(None, feeds)
    assert y.dtype == want.dtype and y.tobytes() == want.tobytes()
    with pytest.raises(AclnnError, match=r"target: holds 1 value\(s\) outside \[0, 4\)"):
        run.run(None, {**feeds, "t": np.array([0, 9, 3])})
