"""Level 2 as code: docs/level2.md's op set, its verifier, the one analysis of a level-2
function, the arith.cmpf predicate table, and the scalar-op dispatch every backend subclasses.

Every reader of level 2 (the ONNX, ORT C++ and Ascend C translators, the IREE and AscendNPU
IR routes) goes through this package, so a fact about level 2 is written once:

* `verify_level2(module)` rejects IR outside the contract with `Level2ContractError`, the one
  error class for that fault; a backend that cannot run valid IR raises
  `UnsupportedByBackendError` instead.
* `analyze_function(function)` says what a lowered signature function is: the operator and
  attributes (read from the function's attributes, never from its symbol name), the run-time
  parameters, each operand with its storage type, indexing map and widening, the reduction
  scale and where it comes from, the per-element body, and how the result is summed and
  narrowed. `analyze_generic` gives the same for one `linalg.generic`.
* `ScalarOpDispatch` maps each scalar op to a method registered with `@rule(op_class)`; a
  subclass that misses an op of its `REQUIRED` set fails when it is defined.
"""

from lossgrad_compiler.level2.analysis import (
    Accumulation,
    Element,
    GenericOperand,
    IndexMap,
    Level2Check,
    Level2Function,
    Level2Generic,
    Level2Operand,
    Level2Reduction,
    Level2Scale,
    LoopSize,
    analyze_function,
    analyze_generic,
    captured_values,
    index_map,
    is_right_aligned,
    signature_functions,
    tensor_shape,
)
from lossgrad_compiler.level2.contract import (
    BODY_OPS,
    CLASS_OPS,
    CONTRACT_INTEGER_PREDICATES,
    CONTRACT_PREDICATES,
    COUNT_OPS,
    FUNCTION_OPS,
    GATHER_OPS,
    PREDICATES,
    SCALAR_OPS,
    TENSOR_OPS,
    Level2ContractError,
    Predicate,
    constant_value,
    predicate_of,
)
from lossgrad_compiler.level2.dispatch import ScalarOpDispatch, rule
from lossgrad_compiler.level2.identity import (
    ATTRIBUTES_ATTR,
    CHECKS_ATTR,
    DIVISOR_ATTR,
    INPUTS_ATTR,
    OP_TYPE_ATTR,
    PARAMETER_IGNORE_INDEX,
    PARAMETER_N,
    PARAMETERS_ATTR,
    REDUCTION_CLASS_WEIGHT,
    REDUCTION_KEPT_WEIGHT,
    REDUCTIONS,
    REDUCTIONS_ATTR,
    identity_attributes,
    parameter_type,
    read_checks,
    read_divisor,
    read_identity,
    read_inputs,
    read_parameters,
    read_reductions,
)
from lossgrad_compiler.level2.verify import verify_function, verify_level2

__all__ = [
    "ATTRIBUTES_ATTR",
    "BODY_OPS",
    "CHECKS_ATTR",
    "CLASS_OPS",
    "CONTRACT_INTEGER_PREDICATES",
    "CONTRACT_PREDICATES",
    "COUNT_OPS",
    "DIVISOR_ATTR",
    "FUNCTION_OPS",
    "GATHER_OPS",
    "INPUTS_ATTR",
    "OP_TYPE_ATTR",
    "PARAMETERS_ATTR",
    "PARAMETER_IGNORE_INDEX",
    "PARAMETER_N",
    "PREDICATES",
    "REDUCTIONS",
    "REDUCTIONS_ATTR",
    "REDUCTION_CLASS_WEIGHT",
    "REDUCTION_KEPT_WEIGHT",
    "SCALAR_OPS",
    "TENSOR_OPS",
    "Accumulation",
    "Element",
    "GenericOperand",
    "IndexMap",
    "Level2Check",
    "Level2ContractError",
    "Level2Function",
    "Level2Generic",
    "Level2Operand",
    "Level2Reduction",
    "Level2Scale",
    "LoopSize",
    "Predicate",
    "ScalarOpDispatch",
    "analyze_function",
    "analyze_generic",
    "captured_values",
    "constant_value",
    "identity_attributes",
    "index_map",
    "is_right_aligned",
    "parameter_type",
    "predicate_of",
    "read_checks",
    "read_divisor",
    "read_identity",
    "read_inputs",
    "read_parameters",
    "read_reductions",
    "rule",
    "signature_functions",
    "tensor_shape",
    "verify_function",
    "verify_level2",
]
