"""Pinned: IREE 3.13's llvm-cpu code fuses `addf(a, mulf(s, w))` into one fused multiply-add
(one rounding, not two), although the arith ops carry no fastmath flag and no iree-compile
flag turns it off. Why CrossEntropyLossGrad's float32 and float64 results are compared
within TIGHT (class_agreement.py); a fixed or changed IREE shows here."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="needs IREE: pip install -e '.[iree]'")
pytest.importorskip("iree.runtime", reason="needs IREE: pip install -e '.[iree]'")

from lossgrad_compiler.backends.iree import IreeOptions, compile_text
from lossgrad_compiler.runtime import iree as iree_runtime

MULTIPLY_ADD = """
func.func @f(%a: tensor<?xf32>, %s: tensor<?xf32>, %w: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %init = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
      affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%a, %s, %w : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>)
      outs(%init : tensor<?xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %o: f32):
    %p = arith.mulf %y, %z : f32
    %q = arith.addf %x, %p : f32
    linalg.yield %q : f32
  } -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}
"""


def test_iree_3_13_fuses_a_product_into_the_sum_it_feeds() -> None:
    rt = iree_runtime.iree_module("iree.runtime")
    config = rt.Config("local-sync")
    context = rt.SystemContext(config=config)
    vmfb = compile_text(MULTIPLY_ADD, IreeOptions())
    context.add_vm_module(rt.VmModule.copy_buffer(config.vm_instance, vmfb))
    rng = np.random.default_rng(0)
    a, s, w = (rng.standard_normal(4099).astype(np.float32) for _ in range(3))
    got = np.asarray(context.modules.module["f"](a, s, w))
    # the exact product (24 + 24 bits fit in float64's 53) added in float64 and rounded to
    # float32: an FMA's result (the double rounding never differs for these values)
    fused = (a.astype(np.float64) + s.astype(np.float64) * w.astype(np.float64)).astype(np.float32)
    assert got.tobytes() == fused.tobytes()
    assert got.tobytes() != (a + s * w).tobytes()  # two roundings differ somewhere
