"""Tests of the AscendNPU IR route: the HFusion form, bishengir-opt, the CPU runner, the
target. The element types it takes: f16, bf16, f32 and their mixes (no f64 on Ascend)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

F16, BF16, F32 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)

TYPE_GROUPS: dict[str, Any] = {
    "float32": F32,
    "float16": F16,
    "bfloat16": BF16,
    "mixed_half": (F16, BF16, F32),  # grad_output, self, target
    "mixed_narrow": (BF16, F32, F16),
}
"""A type, or a (grad_output, self, target) triple, by name."""
