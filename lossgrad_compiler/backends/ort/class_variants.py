"""The classification operators' variants (spec.CLASS_OPERATORS): one loop-nest kernel per
(operator, float type, target type, reduction, weight given, self's rank), lowered in
level 2's run-time-parameter form, whose `%ignore_index` argument makes one kernel serve
every ignore_index.

Every dimension is dynamic except the one-element inputs (grad_output of a reduced loss,
total_weight), which are 0-d: a `[1]` one is read at position 0 all the same. The
functions are built here at lossgrad level (frontend/ir.py's signatures hold float inputs
only) and lowered by the same pass as every signature."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerType, ModuleOp, TensorType
from xdsl.ir import Block, Region

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.cxx import cxx_identifier
from lossgrad_compiler.context import make_context
from lossgrad_compiler.dialects.lossgrad import MLIR_FLOAT_TYPES, make_op
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass


@dataclass(frozen=True)
class ClassVariant:
    op: spec.OperatorSpec
    element: spec.FloatType
    index: spec.IndexType
    reduction: int  # index among the reduction attribute's choices
    weight: bool
    rank: int  # self's

    @property
    def name(self) -> str:
        weight = "w" if self.weight else "nw"
        return cxx_identifier(
            f"nest_{self.op.name}_{self.element.name}_{self.index.name}_r{self.reduction}_"
            f"{weight}_{self.rank}"
        )

    @property
    def label(self) -> str:
        """What the variant serves, in words (its comment in the library)."""
        weight = ", with weight" if self.weight else ""
        return (
            f"{self.op.name}, {self.element.name}, {self.index.name} target, "
            f"reduction={self.reduction_value}{weight}, self of rank {self.rank}"
        )

    @property
    def reduction_value(self) -> str:
        return str(reduction_attribute(self.op).choices[self.reduction])  # type: ignore[index]


def reduction_attribute(op: spec.OperatorSpec) -> spec.AttributeSpec:
    (found,) = [a for a in op.attributes if a.name == "reduction"]
    return found


def class_variants(op: spec.OperatorSpec) -> list[ClassVariant]:
    choices = reduction_attribute(op).choices or ()
    return [
        ClassVariant(op, element, index, r, weight, rank)
        for element, index, r, weight, rank in itertools.product(
            spec.FLOAT_TYPES, spec.INDEX_TYPES, range(len(choices)), (False, True), op.class_ranks
        )
    ]


def _function(v: ClassVariant) -> func.FuncOp:
    rows = v.rank - 1
    per_element = v.reduction_value == "none" and v.rank >= 2
    float_type = MLIR_FLOAT_TYPES[v.element.mlir]
    dynamic = [DYNAMIC_INDEX]
    shapes = {
        "grad_output": dynamic * rows if per_element else [],
        "self": dynamic * v.rank,
        "target": dynamic * rows,
        "total_weight": [],
    }
    if v.weight:
        shapes["weight"] = dynamic
    types = [
        TensorType(IntegerType(v.index.bits) if n == "target" else float_type, s)
        for n, s in shapes.items()
    ]
    block = Block(arg_types=types)
    attrs = spec.check_attributes(v.op, {"reduction": v.reduction_value})
    op = make_op(v.op.name, dict(zip(shapes, block.args, strict=True)), attrs)
    block.add_ops([op, func.ReturnOp(op.result)])
    return func.FuncOp(v.name, (types, [op.result.type]), Region(block))


def all_class_variants() -> list[ClassVariant]:
    return [v for op in spec.CLASS_OPERATORS.values() for v in class_variants(op)]


@cache
def lowered_class_functions() -> dict[str, level2.Level2Function]:
    """Every classification variant's level 2, by variant name."""
    module = ModuleOp([_function(v) for v in all_class_variants()])
    LowerLossgradPass(runtime_parameters=True).apply(make_context(), module)
    return {f.name: f for f in level2.signature_functions(module)}
