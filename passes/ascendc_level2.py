"""What `convert-linalg-to-ascendc` reads of a level-2 function, through
lossgrad_compiler.level2.

A function `lower-lossgrad` marked with its operator (`lossgrad.op_type`) is read with
`level2.analyze_function`. Hand-written level 2 without those attributes (the FileCheck
tests, `lossgrad-opt` input) converts too: a kernel does not depend on which operator its
body came from, so its structure is read with `level2.analyze_generic` alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap

from lossgrad_compiler import level2, spec
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.errors import UnsupportedByBackendError


@dataclass(frozen=True)
class KernelSource:
    """The generics of one level-2 function, as the kernel and the host graph need them."""

    main: level2.Level2Generic
    narrowing: GenericOp | None  # the truncf-only generic after a sum, if any
    names: tuple[str, ...] = spec.INPUT_NAMES  # each input's name (the kernel's parameters)
    checks: tuple[level2.Level2Check, ...] = ()  # value checks returned after the result
    reductions: tuple[level2.Level2Reduction, ...] = ()  # sums the main generic reads as ()

    @property
    def tensor_inputs(self) -> tuple[level2.GenericOperand, ...]:
        """The main generic's inputs that are function arguments (the kernel's global
        tensors); the reduction results after them are computed inside the kernel."""
        return self.main.inputs[: len(self.main.inputs) - len(self.reductions)]

    @property
    def scalars(self) -> tuple[SSAValue, ...]:
        """The scalars from above the bodies (main and reductions), each once, in first-use
        order: the tiling scalars. A captured tensor (the gathered weight) is an input."""
        generics = [self.main, *(r.generic for r in self.reductions)]
        found: list[SSAValue] = []
        for generic in generics:
            for value in generic.captured:
                if not isinstance(value.type, TensorType) and value not in found:
                    found.append(value)
        return tuple(found)


def kernel_source(function: func.FuncOp) -> KernelSource | None:
    """The level-2 structure of `function`; None when it holds no generic (converted)."""
    generics = [op for op in function.body.block.ops if isinstance(op, GenericOp)]
    if not generics:
        return None
    level2.verify_function(function)
    if level2.OP_TYPE_ATTR in function.attributes:
        analysed = level2.analyze_function(function)
        if analysed.parameters:
            raise UnsupportedByBackendError(
                analysed.name,
                level2.PARAMETERS_ATTR,
                f"run-time parameters ({', '.join(analysed.parameters)}) are not supported by "
                "the Ascend C backend: its tiling function computes n from the shapes and each "
                "project compiles its attributes in; lower without runtime_parameters",
            )
        return KernelSource(
            analysed.main,
            analysed.narrowing,
            analysed.input_names,
            analysed.checks,
            analysed.reductions,
        )
    return _without_identity(generics)


def _without_identity(generics: list[GenericOp]) -> KernelSource:
    """analyze_function's structural rules for a function without identity attributes:
    one generic over the three inputs (and any further ones, named input3, ...), optionally
    followed by one that only narrows it."""
    main = level2.analyze_generic(generics[0])
    if len(main.inputs) < len(spec.INPUT_NAMES):
        raise level2.Level2ContractError(main.op, "reads (grad_output, self, target) in order")
    if len(generics) > 2:
        raise level2.Level2ContractError(
            generics[2], f"a function holds one or two linalg.generic, found {len(generics)}"
        )
    narrowing = generics[1] if len(generics) == 2 else None
    if narrowing is not None:
        g = level2.analyze_generic(narrowing)
        ops = g.body_ops
        if (
            [i.value for i in g.inputs] != [main.op.results[0]]
            or g.reduces
            or len(ops) != 1
            or not isinstance(ops[0], arith.TruncFOp)
        ):
            raise level2.Level2ContractError(
                narrowing, "a second generic only narrows the first one's sum (truncf + yield)"
            )
    extra = tuple(f"input{k}" for k in range(len(spec.INPUT_NAMES), len(main.inputs)))
    return KernelSource(main, narrowing, (*spec.INPUT_NAMES, *extra))


def affine_map(index_map: level2.IndexMap, loops: int) -> AffineMap:
    """The level-2 indexing map an IndexMap stands for (d<loop>, or 0 at a broadcast 1)."""
    results: list[AffineExpr] = [
        AffineConstantExpr(0) if loop is None else AffineDimExpr(loop) for loop in index_map
    ]
    return AffineMap(loops, 0, tuple(results))


HOST_CHECKS = ("target_range",)
"""The value checks the aclnn wrapper counts from the input's values (host_checks.py)."""


def untranslated_constructs(
    source: KernelSource,
    translatable: Callable[[Operation], bool],
    host_checks: tuple[str, ...] = HOST_CHECKS,
) -> list[tuple[str, str]]:
    """(construct, description) for each level-2 construct of `source` the Ascend C rules do
    not express, in the order a reader meets them: body ops without a rule (`translatable`
    is the rules' test) and value checks returned after the result that the aclnn wrapper
    does not count (`host_checks`)."""
    main = source.main
    found: list[tuple[str, str]] = []
    for op_name in sorted({op.name for op in main.body_ops if not translatable(op)}):
        found.append((op_name, op_name))
    for check in source.checks:
        if check.rule not in host_checks:
            found.append((
                f"check {check.rule}",
                f"the value check {check.rule} (a count the host must read back before it "
                "returns)",
            ))  # fmt: skip
    return found


def kernel_frame(
    source: KernelSource, name: str, out_name: str
) -> tuple[asc.KernelOp, asc.TileLoopOp]:
    """What every kernel starts from: its arguments (the inputs as global tensors, the
    output, the scalars from above the bodies) and an entry block holding an empty tile
    loop: (the kernel, the loop)."""
    main = source.main
    inputs = source.tensor_inputs
    args: list[tuple[str, Attribute]] = [
        (n, asc.GlobalTensorType(o.block_arg.type))
        for n, o in zip(source.names, inputs, strict=True)
    ]
    args.append((out_name, asc.GlobalTensorType(main.value.type)))
    for k, value in enumerate(source.scalars):
        args.append((value.name_hint or f"scalar{k}", value.type))
    kernel = asc.KernelOp(name, args, num_inputs=len(inputs))
    loop = asc.TileLoopOp()
    kernel.entry.add_op(loop)
    return kernel, loop
