"""The classification operators' level 2 on IREE's GPU targets, compiled without a device:
CUDA (int64 targets), ROCm and Vulkan (int64 and int32) compile it; CUDA refuses an int32
target before compiling, because IREE 3.13's CUDA codegen cannot compile the count of bad
targets that widens it (pinned below: a fixed IREE shows here)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler import spec
from lossgrad_compiler.backends.iree import IreeCompileError, IreeOptions, compile_text, module_text
from lossgrad_compiler.backends.iree import compiler as iree_compiler
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID, UnsupportedByBackendError
from tests.helpers.class_cases import CLASS_OP_TYPES, class_cases
from tests.iree.class_modules import lowered_module

F16, F32 = spec.FLOAT16.dtype, spec.FLOAT32.dtype


def module(target_dtype: type) -> tuple:
    """Both operators, f32 and f16, with and without a weight, reduction none and mean."""
    cases = [
        c
        for op in CLASS_OP_TYPES
        for dtype in (F32, F16)
        for c in class_cases(op, dtype, target_dtype=target_dtype)[:2]
    ]
    return lowered_module(cases, dynamic=True)


@pytest.mark.parametrize(
    ("backend", "target_dtype"),
    [("cuda", np.int64), ("rocm", np.int64), ("rocm", np.int32), ("vulkan", np.int32)],
)
def test_gpu_targets_compile_the_classification_functions(backend: str, target_dtype: type) -> None:
    level2, names = module(target_dtype)
    options = IreeOptions(backend)
    vmfb = compile_text(module_text(level2, options), options)
    rt = iree_compiler.iree_module("iree.runtime")
    loaded = rt.VmModule.copy_buffer(rt.VmInstance(), vmfb)  # loading needs no device
    assert set(names) <= set(loaded.function_names)


def test_cuda_refuses_an_int32_target_before_compiling() -> None:
    level2, _ = module(np.int32)
    with pytest.raises(UnsupportedByBackendError) as raised:
        module_text(level2, IreeOptions("cuda"))
    assert raised.value.code == ACLNN_ERR_PARAM_INVALID
    assert "int32 target" in str(raised.value) and "int64" in str(raised.value)


def test_iree_3_13_cuda_fails_to_distribute_an_int32_target_check() -> None:
    """Why CUDA refuses int32: the text as llvm-cpu compiles it, given to CUDA, fails."""
    level2, _ = module(np.int32)
    with pytest.raises(IreeCompileError, match="failed to distribute"):
        compile_text(module_text(level2), IreeOptions("cuda"))
