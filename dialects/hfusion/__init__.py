"""The HFusion form: the ops and attributes that AscendNPU IR's HFusion pipeline takes and
`convert-linalg-to-hfusion` emits.

Two dialects, named after the AscendNPU IR dialects they model:

* `hfusion`: `hfusion.cast`, `hfusion.compare`, `hfusion.select`, their enum attributes
  (`#hfusion.round_mode<rint>`, `#hfusion.compare_fn<vle>`), and linalg's named elementwise
  ops `linalg.elemwise_binary` / `linalg.elemwise_unary` with `#linalg.binary_fn<...>` /
  `#linalg.unary_fn<...>`, which upstream MLIR has and xDSL 0.74 does not;
* `hacc`: the function attributes of a kernel entry, `hacc.entry` (a unit attribute) and
  `hacc.function_kind = #hacc.function_kind<HOST>`, and `hacc.host_func_type`, which marks
  the one `host_entry` function the compiler's CPU runner starts from.

xDSL finds a registered dialect by the prefix of an op's name, and `linalg` is xDSL's own,
so `linalg.elemwise_*` can only be found once this dialect is loaded: the project's context
(lossgrad_compiler/context.py) and `lossgrad-opt` load it eagerly. Plain `xdsl-opt` runs the
pass but cannot read its output back.

The ops' syntax and semantics follow AscendNPU IR 1.2.0 (bishengir's HFusionOps.td,
HFusionNamedStructuredOps.yaml, HFusionEnums.td, HACCAttrs.td) and LLVM 19's linalg.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from lossgrad_compiler.dialects.hfusion.attributes import (
    BinaryFn,
    BinaryFnAttr,
    CompareFn,
    CompareFnAttr,
    FunctionKind,
    FunctionKindAttr,
    HfusionBinaryFn,
    HfusionBinaryFnAttr,
    HostFuncType,
    HostFuncTypeAttr,
    RoundMode,
    RoundModeAttr,
    UnaryFn,
    UnaryFnAttr,
)
from lossgrad_compiler.dialects.hfusion.ops import (
    COMPARE_FUNCTIONS,
    HFUSION_FORM_OPS,
    ArangeOp,
    BitcastOp,
    CastOp,
    CompareOp,
    ElementwiseNamedOp,
    ElemwiseBinaryOp,
    ElemwiseUnaryOp,
    HfusionElemwiseBinaryOp,
    SelectOp,
)

HACC_ENTRY = "hacc.entry"
"""Unit function attribute: the function is a kernel entry."""
HACC_FUNCTION_KIND = "hacc.function_kind"
"""Function attribute: `#hacc.function_kind<HOST>` for what the compiler is given."""
HACC_HOST_FUNC_TYPE = "hacc.host_func_type"
"""Function attribute: what a host function is for (`#hacc.host_func_type<host_entry>`)."""

Hfusion = Dialect(
    "hfusion",
    [*HFUSION_FORM_OPS, ArangeOp],
    [BinaryFnAttr, UnaryFnAttr, HfusionBinaryFnAttr, RoundModeAttr, CompareFnAttr],
)

Hacc = Dialect("hacc", [], [FunctionKindAttr, HostFuncTypeAttr])

__all__ = [
    "COMPARE_FUNCTIONS",
    "HACC_ENTRY",
    "HACC_FUNCTION_KIND",
    "HACC_HOST_FUNC_TYPE",
    "HFUSION_FORM_OPS",
    "ArangeOp",
    "BinaryFn",
    "BinaryFnAttr",
    "BitcastOp",
    "CastOp",
    "CompareFn",
    "CompareFnAttr",
    "CompareOp",
    "ElementwiseNamedOp",
    "ElemwiseBinaryOp",
    "ElemwiseUnaryOp",
    "FunctionKind",
    "FunctionKindAttr",
    "Hacc",
    "Hfusion",
    "HfusionBinaryFn",
    "HfusionBinaryFnAttr",
    "HfusionElemwiseBinaryOp",
    "HostFuncType",
    "HostFuncTypeAttr",
    "RoundMode",
    "RoundModeAttr",
    "SelectOp",
    "UnaryFn",
    "UnaryFnAttr",
]
