"""A bfloat16 rounding inside a body, kept through IREE.

Level 2 rounds a value to the result type in the middle of a body where PyTorch's kernel
computes in it: `arith.truncf %q : f32 to bf16` and then `arith.extf` back to f32. IREE's
llvm-cpu codegen (ConvertBf16ArithToF32Pass, IREE 3.13) rewrites bf16 arithmetic to f32 and
drops that round trip, so the rounding is lost (a result one bf16 ulp off). Every such
`extf(truncf)` pair becomes the same rounding written in f32 and i32, which no bf16 pass
touches: round to nearest even on the bit pattern, NaN kept as it is. The narrowing before
a result is stored is no round trip and stays as it is."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import BFloat16Type, Float32Type, ModuleOp, i32
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter


def _round_to_bf16(x: SSAValue) -> tuple[list[Operation], SSAValue]:
    """f32 → f32 holding the nearest bfloat16 (ties to even): bits + 0x7fff + bit 16,
    the low 16 bits cleared; NaN stays NaN (the sum could carry into the sign)."""
    bits = arith.BitcastOp(x, i32)
    sixteen = arith.ConstantOp.from_int_and_width(16, i32)
    one = arith.ConstantOp.from_int_and_width(1, i32)
    bias = arith.ConstantOp.from_int_and_width(0x7FFF, i32)
    mask = arith.ConstantOp.from_int_and_width(-0x10000, i32)
    shifted = arith.ShRUIOp(bits, sixteen)
    odd = arith.AndIOp(shifted, one)
    biased = arith.AddiOp(bits, bias)
    rounded_bits = arith.AddiOp(biased, odd)
    cleared = arith.AndIOp(rounded_bits, mask)
    rounded = arith.BitcastOp(cleared, Float32Type())
    is_nan = arith.CmpfOp(x, x, "uno")
    kept = arith.SelectOp(is_nan, x, rounded)
    ops: list[Operation] = [
        bits, sixteen, one, bias, mask, shifted, odd, biased, rounded_bits, cleared, rounded,
        is_nan, kept,
    ]  # fmt: skip
    return ops, kept.result


def keep_bf16_roundings(module: ModuleOp) -> int:
    """Rewrite every `extf(truncf(x : f32 to bf16))` of `module` in place; how many."""
    pairs = [
        (op, use.operation)
        for op in module.walk()
        if isinstance(op, arith.TruncFOp)
        and isinstance(op.result.type, BFloat16Type)
        and isinstance(op.input.type, Float32Type)
        for use in list(op.result.uses)
        if isinstance(use.operation, arith.ExtFOp)
        and isinstance(use.operation.result.type, Float32Type)
    ]
    for truncf, extf in pairs:
        ops, value = _round_to_bf16(SSAValue.get(truncf.input))
        Rewriter.insert_op(ops, InsertPoint.before(extf))
        extf.result.replace_all_uses_with(value)
        Rewriter.erase_op(extf)
        if not truncf.result.uses:
            Rewriter.erase_op(truncf)
    return len(pairs)
