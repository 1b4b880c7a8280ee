"""The set of variants the kernel library needs, built by lowering level-1 functions.

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
  scale takes another form there) and, for ops whose result takes an operand's shape, `sum`
  (that operand broadcast on its last axis: the IR sums into it). grad_output is always 0-d
  in the IR; at run time it broadcasts like any operand.

The glue selects the pattern from the run-time shapes: which of self/target are 0-d, and
whether the result is summed (the rule of docs/level2.md and reference.sum_to_shape).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.builder import ImplicitBuilder
from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, ModuleOp, TensorType
from xdsl.ir import Attribute

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.cxx import cxx_identifier
from lossgrad_compiler.backends.ort.errors import OrtBackendError
from lossgrad_compiler.backends.ort.variant_printer import Variant, print_variant
from lossgrad_compiler.context import make_context
from lossgrad_compiler.dialects.lossgrad import MLIR_FLOAT_TYPES, make_op
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass

_D = DYNAMIC_INDEX
PATTERNS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    # name: (self shape, target shape); grad_output is 0-d
    "full": ((_D, _D), (_D, _D)),
    "self0": ((), (_D, _D)),
    "target0": ((_D, _D), ()),
    "both0": ((), ()),
}
_SUM_SHAPE = (_D, 1)
OPERAND_INDEX = {name: i for i, name in enumerate(spec.INPUT_NAMES)}


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
        # run-time parameter of the lowered function.
        above = attribute.minimum + 1.0
        return [AttrClass(attribute, attribute.minimum, 0), AttrClass(attribute, above, 1)]
    raise ValueError(f"attribute '{attribute.name}' has no finite set of level-2 forms")


def patterns(op: spec.OperatorSpec) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    found = dict(PATTERNS)
    if op.differentiates == "self":
        found["sum"] = (_SUM_SHAPE, (_D, _D))
    elif op.differentiates == "target":
        found["sum"] = ((_D, _D), _SUM_SHAPE)
    return found


Inputs = tuple[spec.FloatType, spec.FloatType, spec.FloatType]  # grad_output, self, target


@dataclass(frozen=True)
class KernelTypes:
    """What a kernel is specialised for: the compute and result types of its signatures."""

    compute: spec.FloatType
    result: spec.FloatType

    @property
    def name(self) -> str:
        return f"{self.compute.name}_{self.result.name}"


def kernel_types(op: spec.OperatorSpec, inputs: Inputs) -> KernelTypes:
    """The kernel a node with inputs of these element types runs (spec's promotion rules)."""
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
class LoweredVariant:
    op: spec.OperatorSpec
    inputs: Inputs
    classes: tuple[AttrClass, ...]
    pattern: str
    variant: Variant


def level2_function(
    op: spec.OperatorSpec,
    inputs: Inputs,
    attrs: dict[str, object],
    self_shape: tuple[int, ...],
    target_shape: tuple[int, ...],
) -> func.FuncOp:
    """A level-1 function with one op of `op` on inputs of these element types, lowered by
    lower-lossgrad in the run-time-parameter form."""
    shapes = ((), self_shape, target_shape)
    types = [TensorType(_mlir_float(e), s) for e, s in zip(inputs, shapes, strict=True)]
    function = func.FuncOp("variant", (types, []))
    with ImplicitBuilder(function.body) as (go, x, t):
        result = make_op(op.name, go, x, t, spec.check_attributes(op, attrs))
        func.ReturnOp(result)
    function.function_type = func.FunctionType.from_lists(types, [result.results[0].type])
    module = ModuleOp([function])
    LowerLossgradPass(runtime_parameters=True).apply(make_context(), module)
    return function


def _mlir_float(element: spec.FloatType) -> Attribute:
    return MLIR_FLOAT_TYPES[element.mlir]


def lowered_variants(op: spec.OperatorSpec, inputs: Inputs) -> Iterator[LoweredVariant]:
    """Every (attribute classes, pattern) variant of one op for inputs of these types."""
    per_attribute = [attribute_classes(a) for a in op.attributes]
    for classes in itertools.product(*per_attribute):
        attrs = {c.attribute.name: c.value for c in classes}
        for name, (self_shape, target_shape) in patterns(op).items():
            function = level2_function(op, inputs, attrs, self_shape, target_shape)
            variant = print_variant(function)
            yield LoweredVariant(op, inputs, tuple(classes), name, variant)


def parameter_arguments(lowered: LoweredVariant) -> tuple[str, ...]:
    """The glue's C++ argument for each run-time parameter of a variant: n by
    spec.divisor_rule from the call's shapes (`c.shapes`), an attribute from the node's
    attributes (`a.<name>`)."""
    attrs = {c.attribute.name: c.value for c in lowered.classes}
    self_rank = 0 if lowered.pattern in ("self0", "both0") else 1
    arguments = []
    for name in lowered.variant.parameter_names:
        if name == level2.PARAMETER_N:
            arguments.append(_divisor_expression(spec.divisor_rule(attrs["reduction"], self_rank)))
        else:
            arguments.append(f"a.{cxx_identifier(name)}")
    return tuple(arguments)


def _divisor_expression(divisor: spec.Divisor | None) -> str:
    """n as the C++ of cxx/iteration.h's Shapes."""
    if divisor is spec.Divisor.NUMEL:
        mask = (1 << OPERAND_INDEX["self"]) | (1 << OPERAND_INDEX["target"])
        return f"c.shapes.broadcast_numel({mask}u)"
    if divisor is spec.Divisor.BATCH:
        return f"c.shapes.dim({OPERAND_INDEX['self']}, 0)"
    raise OrtBackendError("a variant takes n where spec.divisor_rule scales nothing")
