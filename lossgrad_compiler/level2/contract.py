"""The level-2 contract as data: the one error class for IR outside docs/level2.md, the op
sets, and the arith.cmpf predicate table (MLIR's, as xDSL's arith dialect lists it)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, func, math, tensor
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.dialects.linalg.ops import FillOp, GenericOp, IndexOp, YieldOp
from xdsl.ir import Operation

from lossgrad_compiler.errors import InvalidArgumentError


class Level2ContractError(InvalidArgumentError):
    """IR outside docs/level2.md. The message names the function, the op and the rule."""

    def __init__(self, op: Operation | str | None, rule: str, where: str | None = None) -> None:
        name = op if isinstance(op, str) else (op.name if op is not None else "IR")
        if where is None:
            where = _function_name(op) if isinstance(op, Operation) else None
        super().__init__(f"level 2 @{where}" if where else "level 2", f"'{name}'", rule)


def _function_name(op: Operation) -> str | None:
    current: Operation | None = op
    while current is not None:
        if isinstance(current, func.FuncOp):
            return current.sym_name.data
        current = current.parent_op()
    return None


# --------------------------------------------------------------------------- the op set

SCALAR_OPS: frozenset[type[Operation]] = frozenset(
    {
        arith.ConstantOp,
        arith.AddfOp,
        arith.SubfOp,
        arith.MulfOp,
        arith.DivfOp,
        arith.NegfOp,
        arith.CmpfOp,
        arith.SelectOp,
        arith.ExtFOp,
        arith.TruncFOp,
        math.ExpOp,
        math.LogOp,
    }
)
"""Scalar float ops: a body is made of these and `linalg.yield`."""

CLASS_OPS: frozenset[type[Operation]] = frozenset(
    {
        IndexOp,
        arith.IndexCastOp,
        arith.CmpiOp,
        arith.AndIOp,
        arith.XOrIOp,
        arith.ExtSIOp,
        arith.ExtUIOp,
        arith.AddiOp,
    }
)
"""Integer and index ops of the classification operators' bodies (docs/level2.md, "Beyond
elementwise"): the class position (`linalg.index`, `index_cast` to i64), comparisons of
i64 targets (`cmpi`), i1 logic (`andi`, `xori` with true), `extsi` of an i32 target, and
the target check's count (`extui` i1 to i64, `addi`)."""

GATHER_OPS: frozenset[type[Operation]] = frozenset({tensor.ExtractOp})
"""A gather in a body: `tensor.extract` of a rank-1 tensor from above at a safe index
(docs/level2.md, "A gather"; the verifier checks the index)."""

COUNT_OPS: frozenset[type[Operation]] = frozenset({arith.MuliOp, arith.IndexCastOp, arith.UIToFPOp})
"""Index arithmetic of an element count (the n of a dynamic reduction scale)."""

TENSOR_OPS: frozenset[type[Operation]] = frozenset(
    {tensor.DimOp, tensor.EmptyOp, FillOp, GenericOp}
)

BODY_OPS: frozenset[type[Operation]] = SCALAR_OPS | CLASS_OPS | GATHER_OPS | {YieldOp}
"""Everything a `linalg.generic` body may hold."""

FUNCTION_OPS: frozenset[type[Operation]] = SCALAR_OPS | COUNT_OPS | TENSOR_OPS | {func.ReturnOp}
"""Everything a level-2 function may hold outside bodies."""


# --------------------------------------------------------------------------- predicates


_RELATION_NEGATION = {"eq": "ne", "ne": "eq", "gt": "le", "le": "gt", "ge": "lt", "lt": "ge"}
_RELATION_SWAP = {"eq": "eq", "ne": "ne", "gt": "lt", "lt": "gt", "ge": "le", "le": "ge"}
_SPECIAL_NEGATION = {"ord": "uno", "uno": "ord", "true": "false", "false": "true"}


@dataclass(frozen=True)
class Predicate:
    """One arith.cmpf predicate. `code` and `name` are MLIR's CmpFPredicate, taken from
    xDSL's arith dialect; the rest is derived from the name: an `o` predicate is false when
    an operand is NaN, a `u` predicate is true."""

    name: str
    code: int

    @property
    def relation(self) -> str | None:
        """eq, ne, gt, ge, lt or le; None for ord, uno, true and false."""
        rest = self.name[1:]
        return rest if self.name[0] in "ou" and rest in _RELATION_NEGATION else None

    @property
    def ordered(self) -> bool:
        """False when either operand is NaN (the `o` predicates and `ord`)."""
        return self.name.startswith("o")

    @property
    def negated(self) -> Predicate:
        """The predicate that holds exactly when this one does not, NaN included."""
        if self.relation is None:
            return PREDICATES[_SPECIAL_NEGATION[self.name]]
        prefix = "u" if self.ordered else "o"
        return PREDICATES[prefix + _RELATION_NEGATION[self.relation]]

    @property
    def swapped(self) -> Predicate:
        """The predicate of `b ? a` for this predicate of `a ? b`."""
        if self.relation is None:
            return self
        return PREDICATES[self.name[0] + _RELATION_SWAP[self.relation]]


PREDICATES: dict[str, Predicate] = {
    name: Predicate(name, code) for code, name in enumerate(arith.CMPF_COMPARISON_OPERATIONS)
}
"""Every arith.cmpf predicate by name, in MLIR's order."""

CONTRACT_PREDICATES: frozenset[str] = frozenset(
    {
        p
        for name in ("oeq", "ogt", "oge", "olt", "ole")
        for p in (name, PREDICATES[name].negated.name)
    }
)
"""The predicates level 2 may hold: the ordered comparisons `lower-lossgrad` emits and their
negations (`une`, `ule`, ...), which canonicalization may produce."""


CONTRACT_INTEGER_PREDICATES: frozenset[str] = frozenset({"eq", "ne", "slt", "sle", "sgt", "sge"})
"""The arith.cmpi predicates level 2 may hold: the signed comparisons of class indices that
`lower-lossgrad` emits (eq, ne, sge, slt) and what canonicalization may turn them into."""


def predicate_of(op: arith.CmpfOp) -> Predicate:
    return PREDICATES[arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]]


def constant_value(op: arith.ConstantOp) -> float | int:
    """The value of a scalar arith.constant (Level2ContractError for anything else)."""
    value = op.value
    if isinstance(value, FloatAttr):
        return float(value.value.data)
    if isinstance(value, IntegerAttr):
        return int(value.value.data)
    raise Level2ContractError(op, f"only scalar constants are level 2, got {value}")
