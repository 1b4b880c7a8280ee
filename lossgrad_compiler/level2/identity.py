"""Functions say what they are: the attributes `lower-lossgrad` puts on every function with
one lossgrad op (the operator, its attributes, its run-time parameters) and how backends
read them. Builtin attributes only, so that upstream MLIR tools keep them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    StringAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute

from lossgrad_compiler import spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.level2.contract import Level2ContractError

OP_TYPE_ATTR = "lossgrad.op_type"
"""Function attribute: the ONNX op_type of the lossgrad op the function was lowered from."""
ATTRIBUTES_ATTR = "lossgrad.attributes"
"""Function attribute: the op's attributes, every one, as ONNX spells them."""
PARAMETERS_ATTR = "lossgrad.parameters"
"""Function attribute: the names of the trailing arguments that carry run-time parameters."""
INPUTS_ATTR = "lossgrad.inputs"
"""Function attribute: the names of the inputs the function's tensor arguments are, in order,
when an optional input is present; without it the arguments are the operator's required
inputs (grad_output, self, target)."""
DIVISOR_ATTR = "lossgrad.divisor"
"""Function attribute: what n of the reduction scale 1/n counts (a spec.Divisor value), on
every function whose body multiplies grad_output by a scale; absent where nothing is
scaled. lower-lossgrad writes the divisor spec.validate resolved, so no reader applies the
rule again."""

CHECKS_ATTR = "lossgrad.checks"
"""Function attribute: per result after the first, the check whose count of failing
elements it is (a messages rule key: `target_range`); a backend that runs with the values
raises that rule's error when a count is not 0."""

REDUCTIONS_ATTR = "lossgrad.reductions"
"""Function attribute: the reductions the function computes before its gradient, in order
(each a 0-d sum in the compute type that the gradient's generic reads after the inputs)."""
REDUCTION_KEPT_WEIGHT = "kept_weight"
"""The sum of w[t] over the kept rows (their count without a weight): CrossEntropyLossGrad's
mean divides by it."""
REDUCTION_CLASS_WEIGHT = "class_weight"
"""The sum of the weights of the classes: label smoothing's row sum reads it."""
REDUCTIONS = (REDUCTION_KEPT_WEIGHT, REDUCTION_CLASS_WEIGHT)

PARAMETER_N = "n"
"""Run-time parameter: the divisor n of the reduction scale 1/n (an `index`)."""
PARAMETER_IGNORE_INDEX = "ignore_index"
"""Run-time parameter: the classification operators' ignore_index (an `i64`)."""
PARAMETER_TYPES: dict[str, Attribute] = {PARAMETER_N: IndexType(), PARAMETER_IGNORE_INDEX: i64}
"""The type of every run-time parameter; float attributes travel as f64 (ONNX's float
widened exactly), named after the attribute; an INT attribute of any value (ignore_index)
as i64."""


def identity_attributes(
    op: spec.OperatorSpec,
    attrs: Mapping[str, Any],
    divisor: spec.Divisor | None = None,
    inputs: Sequence[str] | None = None,
) -> dict[str, Attribute]:
    """The function attributes that say which operator, with which attributes (and which
    divisor scales it, and which inputs it takes when an optional one is present), a
    function computes: builtin attributes only, so that upstream MLIR tools read them."""
    values: dict[str, Attribute] = {}
    for a in op.attributes:
        value = attrs[a.name]
        if a.kind is spec.AttrKind.STRING:
            values[a.name] = StringAttr(str(value))
        elif a.kind is spec.AttrKind.INT:
            values[a.name] = IntegerAttr(int(value), i64)
        else:
            values[a.name] = FloatAttr(float(value), f64)
    identity: dict[str, Attribute] = {
        OP_TYPE_ATTR: StringAttr(op.name),
        ATTRIBUTES_ATTR: DictionaryAttr(values),
    }
    if inputs is not None and tuple(inputs) != _required(op):
        identity[INPUTS_ATTR] = ArrayAttr(StringAttr(n) for n in inputs)
    if divisor is not None:
        identity[DIVISOR_ATTR] = StringAttr(divisor.value)
    return identity


def _required(op: spec.OperatorSpec) -> tuple[str, ...]:
    return tuple(i.name for i in op.inputs if not i.optional)


def read_inputs(function: func.FuncOp, op: spec.OperatorSpec) -> tuple[str, ...]:
    """The inputs a function's tensor arguments are (`lossgrad.inputs`, or the operator's
    required inputs): every required input, then optional ones, in the operator's order."""
    found = function.attributes.get(INPUTS_ATTR)
    if found is None:
        return _required(op)
    names = (
        tuple(n.data for n in found.data if isinstance(n, StringAttr))
        if isinstance(found, ArrayAttr)
        else ()
    )
    order = op.input_names
    valid = (
        isinstance(found, ArrayAttr)
        and len(names) == len(found.data)
        and set(_required(op)) <= set(names) <= set(order)
        and list(names) == sorted(set(names), key=order.index)
    )
    if not valid:
        raise Level2ContractError(
            function,
            f"'{INPUTS_ATTR}' lists inputs of {op.name} in its order ({', '.join(order)}), "
            "the required ones included",
            function.sym_name.data,
        )
    return names


def parameter_type(name: str) -> Attribute:
    return PARAMETER_TYPES.get(name, Float64Type())


def read_identity(function: func.FuncOp) -> tuple[spec.OperatorSpec, dict[str, Any]]:
    """The operator and checked attributes a function is marked with."""
    where = function.sym_name.data
    attributes = function.attributes
    op_type = attributes.get(OP_TYPE_ATTR)
    values = attributes.get(ATTRIBUTES_ATTR)
    if not isinstance(op_type, StringAttr) or not isinstance(values, DictionaryAttr):
        raise Level2ContractError(
            function,
            f"a lowered signature function carries '{OP_TYPE_ATTR}' and '{ATTRIBUTES_ATTR}' "
            "(lower-lossgrad adds them to every function with one lossgrad op)",
            where,
        )
    try:
        op = spec.operator(op_type.data)
        raw = {name: _attribute_value(v) for name, v in values.data.items()}
        return op, spec.check_attributes(op, raw)
    except LossGradError as err:
        raise Level2ContractError(function, f"'{ATTRIBUTES_ATTR}': {err.rule}", where) from None


def _attribute_value(attr: Attribute) -> Any:
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, IntegerAttr):
        return int(attr.value.data)
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    return attr


def read_divisor(function: func.FuncOp) -> spec.Divisor | None:
    """The divisor a function's scale counts (None: the function scales nothing)."""
    found = function.attributes.get(DIVISOR_ATTR)
    if found is None:
        return None
    known = [d.value for d in spec.Divisor]
    if not isinstance(found, StringAttr) or found.data not in known:
        raise Level2ContractError(
            function, f"'{DIVISOR_ATTR}' must be one of {', '.join(map(repr, known))}"
        )
    return spec.Divisor(found.data)


def read_parameters(function: func.FuncOp) -> tuple[str, ...]:
    found = function.attributes.get(PARAMETERS_ATTR)
    if found is None:
        return ()
    if not isinstance(found, ArrayAttr) or not all(isinstance(n, StringAttr) for n in found):
        raise Level2ContractError(function, f"'{PARAMETERS_ATTR}' must be an array of strings")
    return tuple(n.data for n in found.data)  # type: ignore[union-attr]


def read_reductions(function: func.FuncOp) -> tuple[str, ...]:
    """The names in `lossgrad.reductions` (none without it)."""
    attr = function.attributes.get(REDUCTIONS_ATTR)
    if attr is None:
        return ()
    if not isinstance(attr, ArrayAttr) or not all(
        isinstance(a, StringAttr) and a.data in REDUCTIONS for a in attr.data
    ):
        raise Level2ContractError(
            function, f"'{REDUCTIONS_ATTR}' must be an array of {', '.join(REDUCTIONS)}"
        )
    return tuple(a.data for a in attr.data)  # type: ignore[union-attr]


def read_checks(function: func.FuncOp) -> tuple[str, ...]:
    """The rule keys of `lossgrad.checks`, one per result after the first (none if absent)."""
    attr = function.attributes.get(CHECKS_ATTR)
    if attr is None:
        return ()
    if not isinstance(attr, ArrayAttr) or not all(isinstance(a, StringAttr) for a in attr.data):
        raise Level2ContractError(function, f"'{CHECKS_ATTR}' must be an array of strings")
    return tuple(a.data for a in attr.data)  # type: ignore[attr-defined]
