"""The set of variants the kernel library needs: their signatures, which the pipeline lowers
in the run-time-parameter form (`LIBRARY_FORM`), and what each lowered one becomes.

Attributes are run-time values of a node, so the library holds one variant per
(op, kernel types, attribute class, shape pattern) and the glue picks one per call:

* kernel types: the (compute type, result type) pair of a signature. Operands are loaded by
  their run-time storage type and widened to the compute type (the extf of the level-2 IR), so
  one set of variants, printed from one representative signature, serves every combination of
  input element types with that pair;

* attribute classes, from spec's table: every choice of a STRING or INT attribute, and for a
  FLOAT attribute with a minimum its two level-2 forms, "== minimum" and "> minimum" (judged
  after rounding to the compute type, as docs/level2.md rules for beta). Variants are lowered
  in level 2's run-time-parameter form, so the "> minimum" form takes the value as a function
  argument (and the scale its divisor n), and one variant serves every value;
* shape patterns, at representative rank 2 with every size dynamic except:
  `full` (self and target of rank 2), `self0`/`target0`/`both0` (those operands 0-d: the
  scale takes another form there) and, for ops whose result is summed into an operand's
  shape, `sum` (that operand broadcast on its last axis: the IR sums into it); only the
  patterns the op takes (a target that fits into self is never larger than it).
  grad_output is always 0-d in the IR; at run time it broadcasts like any operand;
* which optional inputs are given: one variant per subset (an absent input takes no
  operand; one given has self's pattern and the compute type, so it is loaded widened).

The glue selects the pattern from the run-time shapes: which of self/target are 0-d, and
whether the result is summed (the rule of docs/level2.md and reference.sum_to_shape), and
which optional inputs are given.

This module runs no lowering: `library_signatures()` is the backend's request, and
targets/ort_library.py hands back their level 2 (the pipeline, the cache every target shares).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.cxx import cxx_identifier
from lossgrad_compiler.backends.ort.class_variants import all_class_variants
from lossgrad_compiler.backends.ort.class_variants import signature as class_signature
from lossgrad_compiler.backends.ort.errors import OrtBackendError
from lossgrad_compiler.backends.ort.variant_printer import Variant, print_variant
from lossgrad_compiler.frontend.lowering import LoweringForm
from lossgrad_compiler.frontend.signature import Pattern, Signature

LIBRARY_FORM = LoweringForm.RUNTIME_PARAMETERS
"""The level-2 form the library's variants are printed from."""

_D = None  # a dynamic dimension (frontend/signature.py's Pattern)
PATTERNS: dict[str, tuple[Pattern, Pattern]] = {
    # name: (self pattern, target pattern); grad_output is 0-d
    "full": ((_D, _D), (_D, _D)),
    "self0": ((), (_D, _D)),
    "target0": ((_D, _D), ()),
    "both0": ((), ()),
}
_SUM_SHAPE: Pattern = (_D, 1)
OPERAND_INDEX = {name: i for i, name in enumerate(spec.INPUT_NAMES)}
"""The operand index of the inputs every operator takes first (and never moves)."""


@dataclass(frozen=True)
class AttrClass:
    """One level-2 form of one attribute: the value lowered with and how glue tests for it."""

    attribute: spec.AttributeSpec
    value: str | int | float
    index: int  # position among the attribute's classes


def attribute_classes(attribute: spec.AttributeSpec) -> list[AttrClass]:
    if attribute.choices is not None:
        return [AttrClass(attribute, c, i) for i, c in enumerate(attribute.choices)]
    if attribute.kind is spec.AttrKind.FLOAT and attribute.minimum is not None:
        # Any value above the minimum selects the "> minimum" form; the value itself is a
        # run-time parameter of the lowered function. An exclusive minimum has that form only.
        above = attribute.minimum + 1.0
        if attribute.exclusive:
            return [AttrClass(attribute, above, 0)]
        return [AttrClass(attribute, attribute.minimum, 0), AttrClass(attribute, above, 1)]
    raise ValueError(f"attribute '{attribute.name}' has no finite set of level-2 forms")


def patterns(op: spec.OperatorSpec) -> dict[str, tuple[Pattern, Pattern]]:
    """The patterns the op takes: with a target that must fit into self, not a 0-d self
    beside a larger target."""
    found = dict(PATTERNS)
    if op.input("target").broadcast is spec.Broadcast.FITS:
        del found["self0"]
    if op.sums_result and op.differentiates == "self":
        found["sum"] = (_SUM_SHAPE, (_D, _D))
    elif op.sums_result and op.differentiates == "target":
        found["sum"] = ((_D, _D), _SUM_SHAPE)
    return found


def optional_subsets(op: spec.OperatorSpec) -> list[tuple[str, ...]]:
    """Every subset of the op's optional inputs, none first, in the op's order."""
    names = op.optional_inputs
    return [c for k in range(len(names) + 1) for c in itertools.combinations(names, k)]


def given_bits(given: tuple[str, ...]) -> int:
    """The slot bits of the optional inputs given (glue_printer.given_constant)."""
    return sum(GIVEN_BITS[name] for name in given)


GIVEN_BITS: dict[str, int] = {
    name: 8 << k
    for k, name in enumerate(
        dict.fromkeys(n for op in spec.OPERATORS.values() for n in op.optional_inputs)
    )
}
"""One slot bit per optional input any operator takes (after the pattern bits 1, 2, 4)."""


Inputs = tuple[spec.FloatType, ...]  # one per required input: grad_output, self, target


@dataclass(frozen=True)
class KernelTypes:
    """What a kernel is specialised for: the compute and result types of its signatures."""

    compute: spec.FloatType
    result: spec.FloatType

    @property
    def name(self) -> str:
        return f"{self.compute.name}_{self.result.name}"


def kernel_types(op: spec.OperatorSpec, inputs: Inputs) -> KernelTypes:
    """The kernel a node with required inputs of these element types runs (spec's promotion
    rules; given optional inputs may widen the compute type, which the glue decides at run
    time: `compute_type_choices`)."""
    promoted = spec.promote_types(inputs)
    result = op.result_type(dict(zip(spec.INPUT_NAMES, inputs, strict=True)))
    return KernelTypes(spec.compute_type(promoted), result)


def kernel_signatures(op: spec.OperatorSpec) -> dict[KernelTypes, Inputs]:
    """Every KernelTypes the op's input combinations need, with the input types it is printed
    from: the same-type signature where there is one, else the first combination found."""
    combinations = list(itertools.product(spec.FLOAT_TYPES, repeat=len(spec.INPUT_NAMES)))
    combinations.sort(key=lambda inputs: len(set(inputs)))  # stable: same-type ones first
    found: dict[KernelTypes, Inputs] = {}
    for inputs in combinations:
        found.setdefault(kernel_types(op, inputs), inputs)
    return found


@dataclass(frozen=True)
class VariantSignature:
    """One variant the library needs: its attribute classes, pattern and the optional inputs
    given, as a signature."""

    op: spec.OperatorSpec
    inputs: Inputs
    classes: tuple[AttrClass, ...]
    pattern: str
    signature: Signature
    given: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoweredVariant:
    op: spec.OperatorSpec
    inputs: Inputs
    classes: tuple[AttrClass, ...]
    pattern: str
    function: level2.Level2Function
    variant: Variant
    given: tuple[str, ...] = ()


def variant_signatures(op: spec.OperatorSpec, inputs: Inputs) -> list[VariantSignature]:
    """Every (attribute classes, pattern, optional inputs given) variant of one op for
    required inputs of these types; a given optional input has self's pattern and the
    compute type."""
    per_attribute = [attribute_classes(a) for a in op.attributes]
    compute = spec.compute_type(spec.promote_types(inputs))
    found = []
    for given in optional_subsets(op):
        for classes in itertools.product(*per_attribute):
            attrs = spec.check_attributes(op, {c.attribute.name: c.value for c in classes})
            for name, (self_pattern, target_pattern) in patterns(op).items():
                types = [*inputs, *(compute if n in given else None for n in op.optional_inputs)]
                shapes = [
                    (),
                    self_pattern,
                    target_pattern,
                    *(self_pattern if n in given else None for n in op.optional_inputs),
                ]
                signature = Signature(op.name, tuple(types), tuple(shapes), tuple(attrs.items()))
                found.append(VariantSignature(op, inputs, tuple(classes), name, signature, given))
    return found


def library_signatures() -> list[Signature]:
    """The signatures of every variant, to be lowered in LIBRARY_FORM: the broadcast
    operators' and the classification operators' loop nests (class_variants.py)."""
    broadcast = [
        v.signature
        for op in spec.BROADCAST_OPERATORS.values()
        for inputs in kernel_signatures(op).values()
        for v in variant_signatures(op, inputs)
    ]
    return broadcast + [class_signature(v) for v in all_class_variants()]


def lowered_variants(
    op: spec.OperatorSpec, inputs: Inputs, lowered: Mapping[str, level2.Level2Function]
) -> Iterator[LoweredVariant]:
    """Every variant of one op for inputs of these types, printed from its level 2
    (`lowered`: the LIBRARY_FORM functions of library_signatures(), by name)."""
    for v in variant_signatures(op, inputs):
        function = lowered.get(v.signature.id)
        if function is None:
            raise OrtBackendError(f"the library's level 2 has no function @{v.signature.id}")
        yield LoweredVariant(
            op, inputs, v.classes, v.pattern, function, print_variant(function), v.given
        )


def parameter_arguments(lowered: LoweredVariant) -> tuple[str, ...]:
    """The glue's C++ argument for each run-time parameter of a variant: n as the divisor
    its level 2 scales by (`Level2Scale.divisor`) computes it from the call's shapes
    (`c.shapes`), an attribute from the node's attributes (`a.<name>`)."""
    arguments = []
    for name in lowered.variant.parameter_names:
        if name == level2.PARAMETER_N:
            scale = lowered.function.scale
            if scale is None:
                raise OrtBackendError(f"@{lowered.function.name} takes n but scales nothing")
            arguments.append(divisor_expression(scale.divisor))
        else:
            arguments.append(f"a.{cxx_identifier(name)}")
    return tuple(arguments)


SELF_AND_TARGET = "kSelfAndTarget"
"""The glue's name of the operand mask {self, target} (glue_printer.print_constants)."""


def operand_constant(name: str) -> str:
    """The glue's name of an input's operand index: `self` → `kSelf`."""
    return "k" + "".join(word.capitalize() for word in name.split("_"))


def divisor_expression(divisor: spec.Divisor) -> str:
    """n as the C++ of cxx/iteration.h's Shapes."""
    if divisor is spec.Divisor.NUMEL:
        return f"c.shapes.broadcast_numel({SELF_AND_TARGET})"
    if divisor is spec.Divisor.BATCH:
        return f"c.shapes.dim({operand_constant('self')}, 0)"
    raise OrtBackendError(f"no C++ for the divisor {divisor}")


def class_label(op: spec.OperatorSpec, classes: tuple[AttrClass, ...] | tuple[int, ...]) -> str:
    """An attribute class in words: `reduction=mean log_target=0`, `beta>0`."""
    parts = []
    for attribute, found in zip(op.attributes, classes, strict=True):
        chosen = found if isinstance(found, AttrClass) else attribute_classes(attribute)[found]
        if attribute.choices is None and attribute.minimum is not None:
            relation = "=" if chosen.index == 0 else ">"
            parts.append(f"{attribute.name}{relation}{attribute.minimum:g}")
        else:
            parts.append(f"{attribute.name}={chosen.value}")
    return " ".join(parts)
