"""AscendNPU IR's own compiler reads the HFusion form: for every signature class (operator ×
reduction × log_target × beta form (0, > 0, inf) × f16/bf16/f32 and mixed half types ×
every broadcast pattern, static shapes and the dynamic signature), `bishengir-opt
--lower-hfusion-pipeline --convert-to-hivm-pipeline` accepts the pass output, outlines
device kernels made of HIVM vector ops, and leaves no linalg/hfusion compute op behind.

One bishengir-opt run per group of functions; a failing group is rerun function by function
so that the message names the signature class. By default each (operator, type group) pair
is compiled with static shapes or as its dynamic signature, in turn, so that every operator
and every type group meets both, and takes half of the cases, in turn, so that each case
meets two of the four groups, static and dynamic; LOSSGRAD_FULL_MATRIX=1 compiles every case
of every pair both ways."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

pytest.importorskip("ascendnpuir", reason="needs AscendNPU IR: pip install -e '.[ascend]'")

from lossgrad_compiler.backends.ascendnpu_ir import (
    AscendNpuIrSoc,
    BishengirError,
    HivmSummary,
    hivm_text,
    summarize,
)
from lossgrad_compiler.context import make_context
from lossgrad_compiler.passes.convert_linalg_to_hfusion import ConvertLinalgToHfusionPass
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.helpers.cases import (
    OP_TYPES,
    Case,
    in_turn,
    make_case,
    operator_type_variant_matrix,
    standard_cases,
)
from tests.helpers.modules import cases_module
from tests.hfusion import F16, F32
from tests.hfusion import TYPE_GROUPS as HFUSION_TYPES

TYPE_GROUPS = {k: v for k, v in HFUSION_TYPES.items() if k != "mixed_narrow"}
TARGET = AscendNpuIrSoc()


def hfusion_functions(cases: list[Case], *, dynamic: bool) -> list[ModuleOp]:
    module = cases_module(cases, dynamic=dynamic)
    context = make_context()
    LowerLossgradPass().apply(context, module)
    ConvertLinalgToHfusionPass().apply(context, module)
    return [ModuleOp([f.clone()]) for f in module.ops]


def compiled(functions: list[ModuleOp]) -> HivmSummary:
    """The HIVM summary of the functions: one bishengir-opt run for all of them, or, where
    that run fails, one per function (the target compiles one signature per run; bishengir
    1.2.0 crashes on some modules holding two functions with the same body, see
    test_two_identical_functions_crash_bishengir_1_2). A function that fails alone fails."""
    whole = ModuleOp([f.clone() for m in functions for f in m.ops])
    try:
        return summarize(hivm_text(str(whole), TARGET))
    except BishengirError:
        pass
    kernels, leftover, failures = [], {}, []
    for module in functions:
        try:
            summary = summarize(hivm_text(str(module), TARGET))
        except BishengirError as err:
            name = next(iter(module.ops)).sym_name.data  # type: ignore[attr-defined]
            failures.append(f"@{name}: {str(err).splitlines()[0]}")
            continue
        kernels += summary.kernels
        leftover.update(summary.leftover_compute_ops)
    assert not failures, "bishengir-opt rejected:\n" + "\n".join(failures)
    return HivmSummary(tuple(kernels), leftover)


def check(cases: list[Case], *, dynamic: bool) -> None:
    summary = compiled(hfusion_functions(cases, dynamic=dynamic))
    assert summary.leftover_compute_ops == {}, summary.leftover_compute_ops
    for k, case in enumerate(cases):
        label = f"{case.label} ({'dynamic' if dynamic else 'static'})"
        kernels = summary.kernels_of(f"f{k}")
        empty = not dynamic and 0 in case.checked.iteration_shape
        if empty:  # nothing to compute: bishengir folds the kernel away
            continue
        assert kernels, f"{label}: no device kernel"
        for kernel in kernels:
            assert kernel.vector_op_count > 0, f"{label}: {kernel.name} has no vector op"
            assert kernel.fusion_kind is not None, f"{label}: {kernel.name}"
            if case.checked.iteration_shape:  # a 0-d kernel is not tiled over blocks
                assert kernel.block_dim == TARGET.block_dim, f"{label}: {kernel.name}"


@pytest.mark.parametrize(
    ("op_type", "group", "dynamic"),
    [
        pytest.param(op, group, dynamic, id=f"{op}-{group}-{'dynamic' if dynamic else 'static'}")
        for op, group, dynamic in operator_type_variant_matrix(
            OP_TYPES, list(TYPE_GROUPS), [False, True]
        )
    ],
)
def test_every_signature_class_reaches_hivm(op_type: str, group: str, dynamic: bool) -> None:
    # groups 0 and 1 take one half of the cases, 2 and 3 the other: each half meets the
    # static and the dynamic form (the variant alternates from group to group)
    turn = list(TYPE_GROUPS).index(group) // 2
    cases = in_turn(standard_cases(op_type, TYPE_GROUPS[group], seed=4), turn)
    if op_type == "SmoothL1LossBackward":
        cases += [
            make_case(op_type, {"reduction": r, "beta": np.inf}, (4, 3), (3,), (), F16)
            for r in ("none", "mean", "sum")
        ]
    check(cases, dynamic=dynamic)


def test_dynamic_batch_with_static_features() -> None:
    """The training-step shape: `?x40` inputs with a broadcast `40` row, every operator."""
    cases = [
        make_case(op, {"reduction": "mean"}, (6, 40), (40,), go, dtype, seed=k)
        for k, (op, go, dtype) in enumerate(
            (op, go, dtype) for op in OP_TYPES for go in ((), (6, 40)) for dtype in (F16, F32)
        )
    ]
    summary = compiled(hfusion_functions(cases, dynamic=True))
    assert summary.leftover_compute_ops == {}
    assert all(summary.kernels_of(f"f{k}") for k in range(len(cases)))


def test_the_vector_ops_are_the_body_of_level_2() -> None:
    """SmoothL1LossBackward in f16 (beta 0.5, 0-d grad_output, broadcast target): three
    casts (two inputs widened, the result rounded once), the broadcast, sub, div, two
    compares and two selects, and the multiply by grad_output."""
    case = make_case(
        "SmoothL1LossBackward", {"reduction": "none", "beta": 0.5}, (6, 40), (40,), (), F16
    )
    (kernel, *_) = compiled(hfusion_functions([case], dynamic=True)).kernels
    assert kernel.vector_ops == {
        "hivm.hir.vbrc": 1,
        "hivm.hir.vcast": 3,
        "hivm.hir.vcmp": 2,
        "hivm.hir.vdiv": 1,
        "hivm.hir.vmul": 1,
        "hivm.hir.vsel": 2,
        "hivm.hir.vsub": 1,
    }
    assert kernel.loads == 3 and kernel.stores == 1


def test_two_identical_functions_crash_bishengir_1_2() -> None:
    """AscendNPU IR 1.2.0's bishengir-opt dies of a segmentation fault on a module holding
    the HFusion form of SmoothL1LossBackward with beta = inf for reductions none and sum
    (the same body under two names); each alone compiles. Pinned, so that a fixed compiler
    shows up here; the target never puts two signatures in one run."""
    cases = [
        make_case("SmoothL1LossBackward", {"reduction": r, "beta": np.inf}, (4, 3), (3,), (), F16)
        for r in ("none", "sum")
    ]
    functions = hfusion_functions(cases, dynamic=True)
    for module in functions:
        hivm_text(str(module), TARGET)
    with pytest.raises(BishengirError, match="killed by signal 11"):
        hivm_text(str(ModuleOp([f.clone() for m in functions for f in m.ops])), TARGET)
