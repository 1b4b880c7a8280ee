"""Kernels with many inputs fit Ascend C's queue limits (issue 44, item 7): at most 8 queue
buffers per position and 64 buffers per TPipe. `ascendc-plan-buffers` derives each queue's
buffers from these limits (dialects/ascendc/ub.py), and every operator, called with all of
its inputs present and full-shaped (the most tiles a kernel of it reads), runs in the
emulator, which enforces the limits, and matches reference.evaluate; a classification
operator with every input present is refused before any queue is planned."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.utils.exceptions import DiagnosticException

from lossgrad_compiler import spec
from lossgrad_compiler.backends import ascendc as asc_backend
from lossgrad_compiler.backends.ascendc.project import lower_to_ascendc
from lossgrad_compiler.context import make_context, parse_module
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.dialects.ascendc.ub import (
    MAX_PIPE_BUFFERS,
    MAX_QUEUE_BUFFERS_PER_POSITION,
    queue_buffers,
)
from lossgrad_compiler.evaluation.ascendc import Call, emulate_calls, signature_project
from lossgrad_compiler.passes.ascendc_plan_buffers import AscendcPlanBuffersPass
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from tests.ascendc.support import DTYPES, EmulatedCase, check, make_inputs, tile_length
from tests.helpers.class_cases import CLASS_OP_TYPES, SHAPES, class_case_module, make_class_case

EMULATOR = Path(asc_backend.__file__).parent / "emulator"
BCE_LOGITS = spec.BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD.name


# --------------------------------------------------------------------------- the rule


def test_queue_buffers_double_buffer_while_every_queue_can() -> None:
    assert [queue_buffers(2, q) for q in range(1, 10)] == [2, 2, 2, 2, 1, 1, 1, 1, 0]
    for queues in range(1, MAX_QUEUE_BUFFERS_PER_POSITION + 1):
        assert queues * queue_buffers(2, queues) <= MAX_QUEUE_BUFFERS_PER_POSITION
    assert queue_buffers(1, 3) == 1  # never more than a queue asks for


def test_the_plan_and_the_emulator_enforce_the_same_limits() -> None:
    header = (EMULATOR / "lossgrad_emu" / "memory.h").read_text()
    limits = dict(re.findall(r"constexpr uint32_t (kMax\w+) = (\d+);", header))
    assert int(limits["kMaxQueueBuffersPerPosition"]) == MAX_QUEUE_BUFFERS_PER_POSITION
    assert int(limits["kMaxBuffers"]) == MAX_PIPE_BUFFERS


def _kernel(inputs: int, tbufs: int = 0) -> str:
    """A kernel adding `inputs` f32 tiles, each through its own VECIN queue, plus `tbufs`
    fixed-size TBufs (each one TPipe buffer)."""
    args = ", ".join(f"%a{i}: !ascendc.gm<f32>" for i in range(inputs))
    names = ", ".join(f'"in{i}"' for i in range(inputs))
    q, local = "!ascendc.queue<f32>", "!ascendc.local<f32>"
    lines = [
        f'ascendc.kernel @k attributes {{arg_names = [{names}, "out"], '
        f"num_inputs = {inputs} : i64}} {{",
        f"^bb0({args}, %out: !ascendc.gm<f32>):",
        *[f"  %q{i} = ascendc.queue VECIN depth 1 buffers 2 : {q}" for i in range(inputs)],
        f"  %qo = ascendc.queue VECOUT depth 1 buffers 2 : {q}",
        *[f"  %b{i} = ascendc.tbuf elements 64 : !ascendc.tbuf<f32>" for i in range(tbufs)],
        "  ascendc.tile_loop copy_in {",
        "  ^bb0(%off: index, %n: index):",
    ]
    for i in range(inputs):
        lines += [
            f"    %l{i} = ascendc.alloc %q{i} : {q} -> {local}",
            f"    ascendc.copy_in %l{i}, %a{i}[%off], %n pad : {local}, !ascendc.gm<f32>",
            f"    ascendc.enque %q{i}, %l{i} : {q}, {local}",
        ]
    lines += ["  } compute {", "  ^bb0(%off: index, %n: index):"]
    lines += [f"    %t{i} = ascendc.deque %q{i} : {q} -> {local}" for i in range(inputs)]
    lines += [
        f"    %o = ascendc.alloc %qo : {q} -> {local}",
        f"    ascendc.add %o, %t0, %t1, %n : {local}",
    ]
    lines += [f"    ascendc.add %o, %o, %t{i}, %n : {local}" for i in range(2, inputs)]
    lines += [f"    ascendc.enque %qo, %o : {q}, {local}"]
    lines += [f"    ascendc.free %q{i}, %t{i} : {q}, {local}" for i in range(inputs)]
    lines += [
        "  } copy_out {",
        "  ^bb0(%off: index, %n: index):",
        f"    %r = ascendc.deque %qo : {q} -> {local}",
        f"    ascendc.copy_out %out[%off], %r, %n pad : !ascendc.gm<f32>, {local}",
        f"    ascendc.free %qo, %r : {q}, {local}",
        "  }",
        "}",
    ]
    return "\n".join(lines)


def _planned_buffers(text: str) -> dict[asc.Position, list[int]]:
    ctx = make_context()
    ctx.load_dialect(asc.Ascendc)
    module = parse_module(text, ctx)
    AscendcPlanBuffersPass().apply(make_context(), module)
    return _queue_buffers(next(op for op in module.walk() if isinstance(op, asc.KernelOp)))


def _queue_buffers(kernel: asc.KernelOp) -> dict[asc.Position, list[int]]:
    queues = [op for op in kernel.entry.ops if isinstance(op, asc.QueueOp)]
    return {p: [q.buffers.value.data for q in queues if q.position.data is p] for p in asc.Position}


@pytest.mark.parametrize("inputs", range(2, MAX_QUEUE_BUFFERS_PER_POSITION + 1))
def test_plan_fits_every_input_count_into_the_position_limit(inputs: int) -> None:
    planned = _planned_buffers(_kernel(inputs))
    assert planned[asc.Position.VECIN] == [queue_buffers(2, inputs)] * inputs
    assert planned[asc.Position.VECOUT] == [2]


def test_plan_refuses_more_queues_than_a_position_holds() -> None:
    with pytest.raises(DiagnosticException, match="needs 9 VECIN queues, more than the 8"):
        _planned_buffers(_kernel(MAX_QUEUE_BUFFERS_PER_POSITION + 1))


def test_plan_refuses_more_buffers_than_a_pipe_holds() -> None:
    """Five inputs (one buffer each) and the output (two) take 7 of the TPipe's 64."""
    tbufs = MAX_PIPE_BUFFERS - 7
    assert sum(sum(b) for b in _planned_buffers(_kernel(5, tbufs)).values()) == 7
    with pytest.raises(DiagnosticException, match="needs 65 buffers, more than the 64"):
        _planned_buffers(_kernel(5, tbufs + 1))


# --------------------------------------------------------------------------- the operators


def _all_inputs_full(op: spec.OperatorSpec, n: int) -> dict[str, tuple[int, ...]]:
    return {name: (2, n) for name in op.optional_inputs}


def _full_cases(op_type: str, dtype: Any, seed: int) -> list[EmulatedCase]:
    """Every input present and full-shaped: a short tail on 3 cores, three tiles on one."""
    op = spec.operator(op_type)
    attrs = {"reduction": "none"}
    dtypes = [dtype] * 3
    tile = tile_length(op_type, attrs, ((2, 4),) * 3, dtypes, _all_inputs_full(op, 4))
    cases = []
    for k, (n, block_dim) in enumerate(((37, 3), (tile + 9, 1))):
        inputs = make_inputs(
            op_type, attrs, ((2, n),) * 3, dtypes, seed + k, 0.05 * k, _all_inputs_full(op, n)
        )
        assert set(inputs) == set(op.input_names)
        label = f"{op_type}-all-inputs-full-{np.dtype(dtype).name}-n{n}-blocks{block_dim}"
        cases.append(EmulatedCase(Call(op_type, inputs, attrs, block_dim), label))
    return cases


def _issue_cases(dtype: Any) -> list[EmulatedCase]:
    """The issue's example: self [3, 3], pos_weight [3], weight [3, 1], full grad_output."""
    optional = {"weight": (3, 1), "pos_weight": (3,)}
    cases = []
    for k, reduction in enumerate(("none", "mean")):
        attrs = {"reduction": reduction}
        inputs = make_inputs(BCE_LOGITS, attrs, ((3, 3),) * 3, [dtype] * 3, 44 + k, 0.0, optional)
        label = f"issue-44-7-{np.dtype(dtype).name}-{reduction}"
        cases.append(EmulatedCase(Call(BCE_LOGITS, inputs, attrs, None), label))
    return cases


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_every_operator_with_every_input_full_runs_in_the_emulator(dtype: str) -> None:
    cases = _issue_cases(DTYPES[dtype])
    for k, op_type in enumerate(spec.BROADCAST_OPERATORS):
        cases += _full_cases(op_type, DTYPES[dtype], 100 * k)
    vecin: dict[str, int] = {}
    for case in cases:
        call = case.call
        infos = {n: spec.TensorInfo(a.dtype, a.shape) for n, a in call.inputs.items()}
        kernel = signature_project(spec.validate(call.op_type, infos, call.attrs)).graph.kernel
        planned = _queue_buffers(kernel)
        for buffers in planned.values():
            assert sum(buffers) <= MAX_QUEUE_BUFFERS_PER_POSITION, case.label
        vecin[call.op_type] = max(vecin.get(call.op_type, 0), len(planned[asc.Position.VECIN]))
    # The largest input count reads more tiles than double buffering fits in one position.
    assert vecin[BCE_LOGITS] == len(spec.operator(BCE_LOGITS).inputs) == 5
    outputs = emulate_calls([c.call for c in cases])
    failures = [m for c, out in zip(cases, outputs, strict=True) if (m := check(c, out))]
    assert not failures, "\n".join(failures[:5])


@pytest.mark.parametrize("op_type", CLASS_OP_TYPES)
def test_every_class_operator_with_every_input_plans_one_output_queue(op_type: str) -> None:
    """Every input present (weight too): the element kernel reads its inputs with GetValue
    (test_ascendc_classes.py), so its only queue is the output's, double buffered, and the
    tile it plans fits the UB; an input whose exp the body takes (CrossEntropyLossGrad's
    log_prob) comes in tiles through one VECIN queue, for the vector unit's Exp."""
    case = make_class_case(op_type, SHAPES[op_type][0], np.float32, weighted=True)
    assert set(case.inputs) == set(spec.operator(op_type).input_names)
    module = class_case_module(case, dynamic=False)
    LowerLossgradPass().apply(make_context(), module)
    (kernel,) = [k for k in lower_to_ascendc(module).ops if isinstance(k, asc.KernelOp)]
    queues = [op for op in kernel.walk() if isinstance(op, asc.QueueOp)]
    exps = sum(isinstance(op, asc.ExpOp) for op in kernel.walk())
    assert [q.position.data for q in queues] == [asc.Position.VECIN] * exps + [asc.Position.VECOUT]
    assert all(q.buffers.value.data <= MAX_QUEUE_BUFFERS_PER_POSITION for q in queues)
    assert exps == (op_type == spec.CROSS_ENTROPY_LOSS_GRAD.name)
    assert 0 < kernel.ub_bytes.value.data <= kernel.ub_capacity.value.data
