"""The classification operators' variants (spec.CLASS_OPERATORS): one loop-nest kernel per
(operator, float type, target type, reduction, weight given, self's rank, and per FLOAT
attribute its two level-2 forms: "== minimum" and "> minimum"), lowered in level 2's
run-time-parameter form, whose `%ignore_index` (and, in the "> minimum" form, the float
attribute's own argument, `%label_smoothing`) make one kernel serve every value.

The "== minimum" form is another structure, not the other form at the value 0
(CrossEntropyLossGrad without smoothing has no smoothing ops), so a FLOAT attribute doubles
the variants, as SmoothL1's beta does for the broadcast kernels.

Every dimension is dynamic except the one-element inputs (grad_output of a reduced loss,
total_weight), which are 0-d: a `[1]` one is read at position 0 all the same. The
signatures are lowered by the pipeline with the broadcast operators' variants
(variants.library_signatures); this module runs no lowering."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.cxx import cxx_identifier
from lossgrad_compiler.frontend.signature import Pattern, Signature


@dataclass(frozen=True)
class ClassVariant:
    op: spec.OperatorSpec
    element: spec.FloatType
    index: spec.IndexType
    reduction: int  # index among the reduction attribute's choices
    weight: bool
    rank: int  # self's
    above: tuple[bool, ...] = ()  # per float_attributes(op): the "> minimum" form

    @property
    def name(self) -> str:
        weight = "w" if self.weight else "nw"
        forms = "".join(
            f"_{a.name}_{'gt' if above else 'eq'}"
            for a, above in zip(float_attributes(self.op), self.above, strict=True)
        )
        return cxx_identifier(
            f"nest_{self.op.name}_{self.element.name}_{self.index.name}_r{self.reduction}_"
            f"{weight}_{self.rank}{forms}"
        )

    @property
    def label(self) -> str:
        """What the variant serves, in words (its comment in the library)."""
        weight = ", with weight" if self.weight else ""
        forms = "".join(
            f", {a.name}{'>' if above else '='}{a.minimum:g}"
            for a, above in zip(float_attributes(self.op), self.above, strict=True)
        )
        return (
            f"{self.op.name}, {self.element.name}, {self.index.name} target, "
            f"reduction={self.reduction_value}{weight}, self of rank {self.rank}{forms}"
        )

    @property
    def reduction_value(self) -> str:
        return str(reduction_attribute(self.op).choices[self.reduction])  # type: ignore[index]

    def float_values(self) -> dict[str, float]:
        """A value of each float attribute in its form: the minimum, or one above it
        (the kernel takes the node's value at run time; this one only picks the form)."""
        return {
            a.name: above_value(a) if above else float(a.minimum)  # type: ignore[arg-type]
            for a, above in zip(float_attributes(self.op), self.above, strict=True)
        }


def reduction_attribute(op: spec.OperatorSpec) -> spec.AttributeSpec:
    (found,) = [a for a in op.attributes if a.name == "reduction"]
    return found


def float_attributes(op: spec.OperatorSpec) -> tuple[spec.AttributeSpec, ...]:
    """The op's FLOAT attributes: each a run-time parameter with two level-2 forms."""
    found = tuple(a for a in op.attributes if a.kind is spec.AttrKind.FLOAT)
    for a in found:
        if a.minimum is None or a.exclusive:
            raise ValueError(f"{op.name}: '{a.name}' has no '== minimum' form")
    return found


def above_value(attribute: spec.AttributeSpec) -> float:
    """A valid value above the minimum: halfway to the maximum, or the minimum + 1."""
    low = float(attribute.minimum)  # type: ignore[arg-type]
    value = low + 1.0 if attribute.maximum is None else (low + attribute.maximum) / 2
    assert attribute.in_range(value) and value > low
    return value


def class_variants(op: spec.OperatorSpec) -> list[ClassVariant]:
    choices = reduction_attribute(op).choices or ()
    forms = list(itertools.product((False, True), repeat=len(float_attributes(op))))
    return [
        ClassVariant(op, element, index, r, weight, rank, above)
        for element, index, r, weight, rank, above in itertools.product(
            spec.FLOAT_TYPES,
            spec.INDEX_TYPES,
            range(len(choices)),
            (False, True),
            op.class_ranks,
            forms,
        )
    ]


def signature(v: ClassVariant) -> Signature:
    """The variant's signature: every dimension dynamic but the one-element inputs, which
    are 0-d (a `[1]` one is read at position 0 all the same); ignore_index and the float
    attributes are run-time parameters of the form the library lowers in, so their values
    here only pick the form."""
    rows = v.rank - 1
    per_element = v.reduction_value == "none" and v.rank >= 2
    dynamic: Pattern = (None,)
    patterns: dict[str, Pattern] = {
        "grad_output": dynamic * rows if per_element else (),
        "self": dynamic * v.rank,
        "target": dynamic * rows,
        "total_weight": (),
    }
    if v.weight:
        patterns["weight"] = dynamic
    types = tuple(
        (v.index if n == "target" else v.element) if n in patterns else None
        for n in v.op.input_names
    )
    attrs = spec.check_attributes(v.op, {"reduction": v.reduction_value, **v.float_values()})
    return Signature(
        v.op.name,
        types,  # type: ignore[arg-type]
        tuple(patterns.get(n) for n in v.op.input_names),
        tuple(attrs.items()),
    )


def all_class_variants() -> list[ClassVariant]:
    return [v for op in spec.CLASS_OPERATORS.values() for v in class_variants(op)]


def class_functions(
    lowered: Mapping[str, level2.Level2Function],
) -> dict[str, level2.Level2Function]:
    """Every classification variant's level 2, by variant name, from the library's lowered
    functions (`lowered`, by signature id: variants.library_signatures() lowered in the
    library's form by the pipeline)."""
    return {v.name: lowered[signature(v).id] for v in all_class_variants()}
