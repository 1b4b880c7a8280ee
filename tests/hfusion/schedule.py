"""Reading what AscendNPU IR's HFusion stage schedules: where each final reduction (the one
that adds the tiles' partial sums, `__final_reduction_op__`) accumulates, and the HFusion
form with the pass's `max(s, s)` after a float32 sum taken out again (the form bishengir
1.2.0 schedules wrongly)."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.rewriter import Rewriter

from lossgrad_compiler.backends.ascendnpu_ir.summary import functions
from lossgrad_compiler.dialects.hfusion import BinaryFn, ElemwiseBinaryOp


def _origin(value: str, body: list[str]) -> str:
    """The op that defines a value, looking through tensor.extract_slice to its source."""
    definitions = {
        line.split("=", 1)[0].strip(): line.split("=", 1)[1].strip()
        for line in body
        if line.strip().startswith("%") and "=" in line
    }
    definition = definitions[value]
    while definition.startswith("tensor.extract_slice"):
        definition = definitions[definition.split()[1].split("[")[0]]
    return definition


def final_accumulators(scheduled: str) -> list[str]:
    """Per final reduction of the scheduled text, the op that made the buffer it adds into
    (seen through slices): `linalg.fill ...` when the sum starts from 0, `tensor.empty ...`
    when it starts from whatever the buffer held."""
    found = []
    for function in functions(scheduled):
        for line in function.body:
            if "__final_reduction_op__" in line:
                accumulator = line.split("outs(")[1].split(":")[0].strip()
                found.append(_origin(accumulator, function.body))
    return found


def without_identity_max(module: ModuleOp) -> ModuleOp:
    """The module with every `max(s, s)` replaced by `s`: the sum returned straight from its
    linalg.reduce, as convert-linalg-to-hfusion wrote it before it worked around bishengir."""
    removed = 0
    for op in list(module.walk()):
        if (
            isinstance(op, ElemwiseBinaryOp)
            and op.fun.data == BinaryFn.MAX_SIGNED
            and op.inputs[0] == op.inputs[1]
        ):
            op.results[0].replace_all_uses_with(op.inputs[0])
            Rewriter.erase_op(op)
            removed += 1
    assert removed, "no max(s, s) in the module"
    return module
