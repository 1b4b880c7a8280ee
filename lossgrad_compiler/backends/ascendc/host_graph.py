"""The host side of one converted signature, read from its function: the l0 steps around
the kernel launch, and the host scalars the tiling function must compute."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import AnyFloat, IntegerAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.ascendc.cxx import element_spec, float_literal
from lossgrad_compiler.backends.cxx import CxxFloatArithmetic
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.errors import InvalidArgumentError


@dataclass(frozen=True)
class HostGraph:
    function: func.FuncOp
    kernel: asc.KernelOp
    launch: asc.LaunchOp
    broadcast: tuple[bool, ...]  # per input: BroadcastTo before the launch
    reduce: asc.ReduceSumOp | None
    cast: asc.TensorCastOp | None

    @property
    def maps(self) -> list[AffineMap]:
        return [m.data for m in self.launch.maps]

    @property
    def rank(self) -> int:
        return self.maps[0].num_dims

    @property
    def kernel_out_type(self) -> spec.FloatType:
        return element_spec(_tensor(self.launch.result).element_type)

    @property
    def result_type(self) -> spec.FloatType:
        last = self.cast or self.reduce or self.launch
        return element_spec(_tensor(last.results[0]).element_type)

    def reads(self, i: int) -> bool:
        """Whether the kernel reads input i at all (KlDivBackward never reads self)."""
        return bool(self.kernel.entry.args[i].uses)

    def is_scalar(self, i: int) -> bool:
        return not any(isinstance(e, AffineDimExpr) for e in self.maps[i].results)


def _tensor(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


def host_graph(function: func.FuncOp, kernels: dict[str, asc.KernelOp]) -> HostGraph:
    launches = [op for op in function.walk() if isinstance(op, asc.LaunchOp)]
    where = function.sym_name.data
    if len(launches) != 1:
        raise InvalidArgumentError(where, "function", "needs exactly one ascendc.launch")
    launch = launches[0]
    kernel = kernels[launch.kernel.root_reference.data]
    broadcast = tuple(isinstance(v.owner, asc.BroadcastToOp) for v in launch.inputs)
    reduce = next((op for op in function.walk() if isinstance(op, asc.ReduceSumOp)), None)
    cast = next((op for op in function.walk() if isinstance(op, asc.TensorCastOp)), None)
    return HostGraph(function, kernel, launch, broadcast, reduce, cast)


def source_input(graph: HostGraph, value: SSAValue) -> int | None:
    """The input position of a function argument, seen through the launch's operands."""
    for i, operand in enumerate(graph.launch.inputs):
        base = operand.owner.source if isinstance(operand.owner, asc.BroadcastToOp) else operand
        if base == value:
            return i
    return None


class TilingScalarPrinter(CxxFloatArithmetic):
    """C++ for the launch's scalar operands, evaluated from the iteration shape `iter`.

    The function computes them from its arguments' dims (`tensor.dim`); every such dim is a
    dim of the iteration space or a broadcast 1, which the input's indexing map tells."""

    BACKEND = "Ascend C host tiling"
    REQUIRED = level2.COUNT_OPS | {arith.ConstantOp, arith.DivfOp, tensor.DimOp}

    def __init__(self, graph: HostGraph, shape_var: str = "iter") -> None:
        self.graph = graph
        self.shape_var = shape_var
        self.lines: list[str] = []
        self.names: dict[SSAValue, str] = {}

    def value(self, v: SSAValue) -> str:
        """The name of a const local holding `v`, declaring it (after its operands) once."""
        if v in self.names:
            return self.names[v]
        op = v.owner
        if not isinstance(op, Operation):
            raise level2.Level2ContractError(
                self.graph.function, "a launch scalar is computed from shapes, not passed in"
            )
        # a dim's operands are a tensor and a constant axis, which its rule reads itself
        operands = [] if isinstance(op, tensor.DimOp) else [self.value(x) for x in op.operands]
        expr = self.translate(op, operands)
        ctype = "float" if isinstance(op.results[0].type, AnyFloat) else "int64_t"
        name = f"h{len(self.names)}"
        self.lines.append(f"const {ctype} {name} = {expr};")
        self.names[v] = name
        return name

    @level2.rule(arith.ConstantOp)
    def constant(self, op: Operation, a: Sequence[str]) -> str:
        assert isinstance(op, arith.ConstantOp)
        value = level2.constant_value(op)
        return f"INT64_C({value})" if isinstance(value, int) else float_literal(value)

    @level2.rule(tensor.DimOp)
    def dim(self, op: Operation, a: Sequence[str]) -> str:
        assert isinstance(op, tensor.DimOp)
        index = op.index.owner
        if not isinstance(index, arith.ConstantOp) or not isinstance(index.value, IntegerAttr):
            raise level2.Level2ContractError(op, "the axis is an index constant")
        axis = index.value.value.data
        i = source_input(self.graph, op.source)
        if i is None:
            raise level2.Level2ContractError(op, "the source is an input of the launch")
        expr = self.graph.maps[i].results[axis]
        if isinstance(expr, AffineDimExpr):
            return f"{self.shape_var}.GetDim({expr.position})"
        return "INT64_C(1)"

    @level2.rule(arith.MuliOp)
    def muli(self, op: Operation, a: Sequence[str]) -> str:
        return f"{a[0]} * {a[1]}"

    @level2.rule(arith.IndexCastOp)
    def index_cast(self, op: Operation, a: Sequence[str]) -> str:
        return a[0]

    @level2.rule(arith.UIToFPOp)
    def uitofp(self, op: Operation, a: Sequence[str]) -> str:
        return f"static_cast<float>(static_cast<uint64_t>({a[0]}))"
