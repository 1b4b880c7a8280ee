"""The emulation's hardware checks fire: a kernel that breaks a rule stops the run with a
message naming the kernel, the instruction and the rule.

Two sources of broken kernels: emitted projects with one line changed (a copy that is not
32-byte aligned, a buffer never freed, a Compare count that is not a whole repeat, a tile
too big for the UB, a global tensor read past its end), and small hand-written kernels in
broken_kernels.cpp for the rules the generated code never comes near."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendc.build import build_executable, build_runner
from lossgrad_compiler.backends.ascendc.emulation import (
    VIOLATION_EXIT,
    CompiledSignature,
    EmulatorViolation,
    raw_case,
    run_raw,
)
from lossgrad_compiler.dialects.ascendc.soc import soc
from lossgrad_compiler.evaluation.ascendc import signature_project
from tests.ascendc.support import make_inputs

OP = spec.KL_DIV_TARGET_BACKWARD.name
ATTRS = {"reduction": "none", "log_target": 0}
SHAPES = ((), (13,), (13,))  # 13 float32: not a whole number of 32-byte blocks


def _checked(n: int = 13) -> tuple[spec.CheckedCall, dict[str, np.ndarray]]:
    inputs = make_inputs(OP, ATTRS, ((), (n,), (n,)), [np.float32] * 3, 1, 0.0)
    infos = {k: spec.TensorInfo(v.dtype, v.shape) for k, v in inputs.items()}
    return spec.validate(OP, infos, ATTRS), inputs


def _run_mutated(edit, n: int = 13, cores: int = 1) -> str:
    """Build the signature's runner with one source file edited; the violation message."""
    checked, inputs = _checked(n)
    project = signature_project(checked)
    name = project.info.kernel_name
    files = {
        "kernel": f"op_kernel/{name}.cpp",
        "host": f"op_host/{name}.cpp",
    }
    which, old, new = edit(project)
    path = files[which]
    source = project.files[path]
    assert old in source, f"{old!r} not in {path}"
    runner = build_runner([project], {f"p0/{path}": source.replace(old, new)})
    compiled = CompiledSignature(project, runner, 0, soc("ascend910b"))
    with pytest.raises(EmulatorViolation) as err:
        run_raw(runner, [raw_case(checked, inputs, compiled, cores)])
    return str(err.value)


def _assert_names(message: str, kernel: str, instruction: str, rule: str) -> None:
    """kernel, instruction and rule are regular expressions."""
    head = rf"^lossgrad ascendc emulator: kernel {kernel}\w*, block \d+: ({instruction}): "
    assert re.search(head, message), message
    assert re.search(rule, message), message


def test_misaligned_data_copy_is_rejected() -> None:
    def edit(project):
        return "kernel", "CopyGmToUbPadded(t", "DataCopy(t"

    message = _run_mutated(edit)
    _assert_names(message, "kl_div_target_backward_sig", "DataCopy \\(GM to UB\\)",
                  "count \\* sizeof\\(T\\) = 52 bytes is not a multiple of 32")  # fmt: skip


def test_leaked_buffer_is_rejected() -> None:
    def edit(project):
        kernel = project.files[f"op_kernel/{project.info.kernel_name}.cpp"]
        free = re.search(r"inQueue0\.FreeTensor\(t\d+\);", kernel).group(0)
        return "kernel", free, "// " + free

    message = _run_mutated(edit)
    _assert_names(message, "kl_div_target_backward_sig", "end of kernel",
                  "VECIN queue #0 buffer 0 is still DEQUE .*buffer leaked")  # fmt: skip


def test_leaked_buffer_blocks_the_next_tile() -> None:
    def edit(project):
        kernel = project.files[f"op_kernel/{project.info.kernel_name}.cpp"]
        free = re.search(r"inQueue0\.FreeTensor\(t\d+\);", kernel).group(0)
        return "kernel", free, "// " + free

    message = _run_mutated(edit, n=40_000)  # several tiles on one core
    _assert_names(message, "kl_div_target_backward_sig", "AllocTensor",
                  "all 2 buffers of the VECIN queue are in use")  # fmt: skip


def test_compare_count_must_fill_whole_repeats() -> None:
    def edit(project):
        return "kernel", "(count + 63) / 64 * 64", "count"

    message = _run_mutated(edit)
    _assert_names(message, "kl_div_target_backward_sig", "Compares",
                  "52 bytes is not a multiple of 256")  # fmt: skip


def test_tile_that_does_not_fit_the_ub_is_rejected() -> None:
    def edit(project):
        return "host", "static_cast<uint32_t>(tile);", "static_cast<uint32_t>(tile * 2);"

    message = _run_mutated(edit)
    _assert_names(message, "kl_div_target_backward_sig", "InitBuffer",
                  "buffers need \\d+ bytes of UB but the core has 196608")  # fmt: skip


def test_global_tensor_read_past_its_end_is_rejected() -> None:
    def edit(project):
        return (
            "kernel",
            "(__gm__ float*)target + start, length",
            "(__gm__ float*)target + start + 8",
        )

    message = _run_mutated(edit)
    _assert_names(message, "kl_div_target_backward_sig", "DataCopy \\(GM to UB\\)",
                  "runs past the end of its 52-byte tensor")  # fmt: skip


def test_block_dim_above_the_vector_cores_is_rejected() -> None:
    def edit(project):
        old = "SetBlockDim(static_cast<uint32_t>(usedCores))"
        return "host", old, old.replace("usedCores", "usedCores + coreNum")

    message = _run_mutated(edit, n=40, cores=3)
    _assert_names(message, "kl_div_target_backward_sig", "SetBlockDim",
                  "block dim 6 exceeds the 3 vector cores of the SoC")  # fmt: skip


@pytest.fixture(scope="module")
def broken_kernels() -> Path:
    source = (Path(__file__).parent / "broken_kernels.cpp").read_text()
    units = {"broken_kernels.cpp": "kernel"}
    return build_executable({"broken_kernels.cpp": source}, units, "broken kernels")


@pytest.mark.parametrize(
    ("kernel", "instruction", "rule"),
    [
        ("bf16_arithmetic", "Mul", "no bfloat16 arithmetic"),
        ("cast_to_bf16_without_rounding", "Cast", "float to bfloat16 needs CAST_RINT"),
        ("unaligned_operand", "Adds", "UB operand at byte 12 is not 32-byte aligned"),
        ("outside_its_buffer", "Muls", "accesses bytes up to 1280 of TBuf #0, which has 1024"),
        ("queue_depth", "EnQue", "queue depth 1 exceeded"),
        ("use_after_free", "Duplicate", "is used after FreeTensor"),
        ("deque_empty", "DeQue", "the queue is empty"),
        ("too_many_queue_buffers", "InitBuffer", "more than 8 queue buffers at VECIN"),
        ("select_without_scratch", "Select", "needs 8192 bytes of UB scratch"),
        ("global_out_of_bounds", "DataCopy \\(GM to UB\\)", "runs past the end of its 400-byte"),
        ("ub_overflow", "InitBuffer", "buffers need 200000 bytes of UB but the core has 196608"),
        ("select_partial_overlap", "Select", "overlap partially"),
        ("partial_overlap", "Add", "overlap partially"),
        ("duplicate_double", "Duplicate", "not one Duplicate supports"),
        ("exp_of_int32", "Exp", "not half or float"),
        ("compare_bf16", "Compares", "no bfloat16 arithmetic"),
        ("compare_mask_too_small", "Compares", "accesses bytes up to 64 of TBuf #1, which has 32"),
        ("select_wrong_mode", "Select", "tensor-scalar form needs VSEL_TENSOR_SCALAR_MODE"),
        ("negative_count", "Adds", "negative count -64"),
        ("widening_cast_with_rounding", "Cast", "widening casts take CAST_NONE"),
        ("widening_cast_overlap", "Cast", "widening Cast must not overlap its source"),
        ("sub_tensor_past_end", "LocalTensor::operator\\[\\]", "offset 264 is past the tensor"),
        ("tbuf_get_too_long", "TBuf::Get", "requested length does not fit the buffer"),
        ("double_free", "FreeTensor", "VECIN queue #0 buffer 0 is already free"),
        ("enque_free_buffer", "EnQue", "is FREE, not allocated"),
        ("foreign_tensor", "EnQue", "does not belong to this queue"),
        ("used_while_enqueued", "Duplicate", "is used while it is enqueued"),
        ("init_buffer_count", "InitBuffer", "buffer count is outside \\[1, 64\\]"),
        ("too_many_buffers", "InitBuffer", "more than 64 buffers in one TPipe"),
        ("two_pipes", "TPipe", "a kernel may create one TPipe"),
        ("copy_out_not_whole_blocks", "DataCopy \\(UB to GM\\)", "52 bytes is not a multiple"),
        ("copy_to_unaligned_ub", "DataCopy \\(GM to UB\\)", "UB operand at byte 12 is not 32-byte"),
        (
            "global_address_not_element_aligned",
            "DataCopy \\(GM to UB\\)",
            "not aligned to sizeof\\(T\\) = 4 bytes",
        ),
        ("pad_reserved_field", "DataCopyPad \\(GM to UB\\)", "rsv is reserved and must be 0"),
        (
            "pad_length_not_whole_elements",
            "DataCopyPad \\(GM to UB\\)",
            "blockLen 6 is not a multiple of sizeof\\(T\\) = 4",
        ),
        (
            "scalar_read_past_end",
            "GlobalTensor::GetValue",
            "elements \\[100, 101\\) are outside the GlobalTensor's 100 elements",
        ),
        (
            "scalar_read_past_allocation",
            "GlobalTensor::GetValue",
            "runs past the end of its 400-byte tensor",
        ),
    ],
)
def test_hand_written_kernels_break_one_rule_each(
    broken_kernels: Path, kernel: str, instruction: str, rule: str
) -> None:
    done = subprocess.run([str(broken_kernels), kernel], capture_output=True, text=True)
    assert done.returncode == VIOLATION_EXIT, done.stderr
    _assert_names(done.stderr.strip(), kernel, instruction, rule)
