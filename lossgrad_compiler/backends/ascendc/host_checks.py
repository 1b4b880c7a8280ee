"""The value checks of a converted function (docs/level2.md, the target check), counted by
the aclnn wrapper before it records the kernel.

`convert-linalg-to-ascendc` leaves each check generic in the function. Here its body becomes
host C++, one rule per op, run over every element of its input: the input is copied to the
host (aclrtMemcpy, device to host) and the count accumulates as the generic's body says.
A count other than 0 fails the call with the check's rule (TARGET_RANGE, aclnn 161002) and
nothing is launched, so a bad target never reaches a kernel (which cannot address memory
with it anyway: see passes/ascendc_element_kernel.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import IntegerAttr, IntegerType, TensorType
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import BlockArgument, Operation, SSAValue

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.cxx import cxx_integer_comparison
from lossgrad_compiler.passes.ascendc_level2 import HOST_CHECKS


@dataclass(frozen=True)
class HostCheck:
    """One value check: its rule and the C++ that counts it into `count<k>`."""

    rule: str
    input_index: int  # the function argument it reads
    lines: tuple[str, ...]  # after `values` holds the input's elements on the host
    count: str
    values: str


def host_checks(function: func.FuncOp, positions: Sequence[int]) -> list[HostCheck]:
    """The function's check generics (those left after the conversion), as C++;
    `positions[i]` is argument i's index in the wrapper's `shapes.inputs`."""
    rules = [a.data for a in function.attributes[level2.CHECKS_ATTR].data] if (
        level2.CHECKS_ATTR in function.attributes
    ) else []  # fmt: skip
    generics = [op for op in function.body.block.ops if isinstance(op, GenericOp)]
    if len(generics) != len(rules):
        raise level2.Level2ContractError(function, "one value-check generic per lossgrad.checks")
    return [
        _check(function, g, rule, k, positions)
        for k, (g, rule) in enumerate(zip(generics, rules, strict=True))
    ]


def _check(
    function: func.FuncOp, generic: GenericOp, rule: str, k: int, positions: Sequence[int]
) -> HostCheck:
    if rule not in HOST_CHECKS:
        raise level2.Level2ContractError(generic, f"no host rule for the value check {rule}")
    g = level2.analyze_generic(generic)
    (operand,) = g.inputs
    source = operand.value
    if not isinstance(source, BlockArgument) or source.owner is not function.body.block:
        raise level2.Level2ContractError(generic, "a value check reads a function argument")
    printer = _HostCheckPrinter(function, positions)
    element = operand.element
    assert isinstance(element, spec.IndexType)
    printer.names[operand.block_arg] = f"values{k}[i]"
    printer.names[g.output.block_arg] = f"count{k}"
    body = [printer.expr_line(op) for op in g.body_ops]
    value = printer.operand(g.value)
    yielded = f"count{k} + {value}" if g.accumulation is not None else value
    lines = [
        *printer.lines,
        f"int64_t count{k} = 0;",
        f"for (size_t i = 0; i < values{k}.size(); ++i) {{",
        *["    " + line for line in body if line],
        f"    count{k} = {yielded};",
        "}",
    ]
    return HostCheck(rule, source.index, tuple(lines), f"count{k}", f"values{k}")


class _HostCheckPrinter(level2.ScalarOpDispatch[str]):
    """The check body's ops as C++ expressions; values from above (the class count, from a
    dim of an input; ignore_index, a constant) become consts before the loop."""

    BACKEND = "Ascend C host check"
    REQUIRED = frozenset(
        {arith.ConstantOp, arith.CmpiOp, arith.AndIOp, arith.XOrIOp, arith.ExtSIOp,
         arith.ExtUIOp, arith.AddiOp, arith.IndexCastOp, tensor.DimOp}
    )  # fmt: skip

    def __init__(self, function: func.FuncOp, positions: Sequence[int]) -> None:
        self.function = function
        self.positions = positions
        self.names: dict[SSAValue, str] = {}
        self.lines: list[str] = []  # consts from above the generic
        self.counter = 0

    def operand(self, value: SSAValue) -> str:
        if value in self.names:
            return self.names[value]
        owner = value.owner
        if not isinstance(owner, Operation):
            raise level2.Level2ContractError(self.function, "a check reads only its input")
        self.lines.append(self.expr_line(owner, declare_above=True))
        return self.names[value]

    def expr_line(self, op: Operation, declare_above: bool = False) -> str:
        if isinstance(op, tensor.DimOp):
            expr = self.dim(op, [])
        else:
            expr = self.translate(op, [self.operand(v) for v in op.operands])
        name = f"c{self.counter}" if declare_above else f"v{self.counter}"
        self.counter += 1
        self.names[op.results[0]] = name
        return f"const {_ctype(op.results[0].type)} {name} = {expr};"

    @level2.rule(arith.ConstantOp)
    def constant(self, op: Operation, a: Sequence[str]) -> str:
        assert isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr)
        value = op.value.value.data
        if _ctype(op.result.type) == "bool":
            return "true" if value else "false"
        return f"INT64_C({value})"

    @level2.rule(tensor.DimOp)
    def dim(self, op: Operation, a: Sequence[str]) -> str:
        assert isinstance(op, tensor.DimOp)
        index = op.index.owner
        source = op.source
        if (
            not isinstance(index, arith.ConstantOp)
            or not isinstance(index.value, IntegerAttr)
            or not isinstance(source, BlockArgument)
            or not isinstance(source.type, TensorType)
        ):
            raise level2.Level2ContractError(op, "a dim of an argument on a constant axis")
        return f"shapes.inputs[{self.positions[source.index]}][{index.value.value.data}]"

    @level2.rule(arith.CmpiOp)
    def cmpi(self, op: Operation, a: Sequence[str]) -> str:
        assert isinstance(op, arith.CmpiOp)
        return cxx_integer_comparison(op, a[0], a[1])

    @level2.rule(arith.AndIOp)
    def andi(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} && {a[1]}"

    @level2.rule(arith.XOrIOp)
    def xori(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} != {a[1]}"

    @level2.rule(arith.ExtSIOp)
    def extsi(self, op: Operation, a: Sequence[str]) -> str:
        return f"static_cast<int64_t>({a[0]})"

    @level2.rule(arith.ExtUIOp)
    def extui(self, op: Operation, a: Sequence[str]) -> str:
        return f"static_cast<int64_t>({a[0]})"

    @level2.rule(arith.IndexCastOp)
    def index_cast(self, op: Operation, a: Sequence[str]) -> str:
        return f"static_cast<int64_t>({a[0]})"

    @level2.rule(arith.AddiOp)
    def addi(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} + {a[1]}"


def _ctype(t: object) -> str:
    if isinstance(t, IntegerType):
        return {1: "bool", 32: "int32_t", 64: "int64_t"}[t.width.data]
    return "int64_t"  # index
