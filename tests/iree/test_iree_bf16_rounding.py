"""backends/iree/rounding.py: a bfloat16 round trip in a body (`extf(truncf(x))`), which
IREE's llvm-cpu codegen would drop, written as integer arithmetic that IREE keeps: ties to
even, overflow to infinity, NaN kept, as ml_dtypes rounds (normal values: IREE's CPU
runtime flushes subnormals)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler.backends.iree import IreeOptions, compile_text
from lossgrad_compiler.backends.iree.rounding import keep_bf16_roundings
from lossgrad_compiler.context import parse_module
from lossgrad_compiler.runtime import iree as iree_runtime

ROUND_TRIP = """
func.func @round(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %init = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%x : tensor<?xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.truncf %a : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  } -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}
"""

BITS = [
    0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF, 0xBF808000, 0xBF818000,
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FFFFFFF,
    0xFFFFFFFF, 0x00800000, 0x00000000, 0x80000000, 0x3EAAAAAB, 0x4049_0FDB,
]  # fmt: skip
"""1, ties (to even down and up), just above a tie, max finite (rounds to inf), inf, NaNs
with full payloads (a carry would reach the sign), the smallest normal, zeros, 1/3, pi."""


def test_a_bf16_round_trip_rounds_like_ml_dtypes() -> None:
    module = parse_module(ROUND_TRIP)
    assert keep_bf16_roundings(module) == 1
    text = str(module)
    assert "bf16" not in text
    x = np.array(BITS, np.uint32).view(np.float32)
    vmfb = compile_text(text, IreeOptions())
    rt = iree_runtime.iree_module("iree.runtime")
    config = rt.Config("local-sync")
    context = rt.SystemContext(config=config)
    context.add_vm_module(rt.VmModule.copy_buffer(config.vm_instance, vmfb))
    got = np.asarray(context.modules.module["round"](x))
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert got[~nan].tobytes() == want[~nan].tobytes()
