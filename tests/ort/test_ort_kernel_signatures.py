"""One set of native kernels per (compute type, result type) serves every combination of input
element types: the level-2 IR of a mixed-type signature differs from its representative's only
in the extf of the operands, which the kernels do at load time from the run-time type."""

from __future__ import annotations

import itertools

import pytest

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.ort.variant_printer import Variant
from lossgrad_compiler.backends.ort.variants import (
    LIBRARY_FORM,
    Inputs,
    kernel_signatures,
    kernel_types,
    lowered_variants,
    variant_signatures,
)
from lossgrad_compiler.frontend.lowering import lower_signatures

ALL_INPUTS = list(itertools.product(spec.FLOAT_TYPES, repeat=len(spec.INPUT_NAMES)))


def printed_variants(op: spec.OperatorSpec, inputs: Inputs) -> list[Variant]:
    """The variants of one op for inputs of these types, from their level 2 in the
    library's form (the pipeline's lowering, as targets.ort_library gets it)."""
    signatures = [v.signature for v in variant_signatures(op, inputs)]
    module = lower_signatures(signatures, LIBRARY_FORM)
    lowered = {f.name: f for f in level2.signature_functions(module)}
    return [v.variant for v in lowered_variants(op, inputs, lowered)]


@pytest.mark.parametrize("op", spec.BROADCAST_OPERATORS.values(), ids=lambda op: op.name)
def test_every_input_combination_has_a_kernel(op: spec.OperatorSpec) -> None:
    signatures = kernel_signatures(op)
    for inputs in ALL_INPUTS:
        types = kernel_types(op, inputs)
        assert types in signatures
        checked = spec.validate(
            op.name,
            {
                n: spec.TensorInfo(t.dtype, (2,))
                for n, t in zip(spec.INPUT_NAMES, inputs, strict=True)
            },
            {},
        )
        assert (types.compute, types.result) == (checked.compute, checked.result_type)


@pytest.mark.parametrize("op", spec.BROADCAST_OPERATORS.values(), ids=lambda op: op.name)
def test_mixed_signatures_print_their_representatives_kernels(op: spec.OperatorSpec) -> None:
    """For every kernel, the first and last other input combination that maps to it (lowering
    all 64 takes minutes)."""
    for types, representative in kernel_signatures(op).items():
        others = [i for i in ALL_INPUTS if kernel_types(op, i) == types and i != representative]
        expected = printed_variants(op, representative)
        for inputs in {others[0], others[-1]} if others else set():
            got = printed_variants(op, inputs)
            assert got == expected, f"{op.name} {[t.name for t in inputs]} vs {types.name}"
