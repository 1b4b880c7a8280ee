"""Print one level-2 function (docs/level2.md) as a C++ "variant": a struct whose static
functions the rank-generic iteration of cxx/iteration.h applies.

The printer is generic: the math comes only from the linalg.generic body; the structure
(elementwise or summed into one operand's shape, the accumulator, the final narrowing) from
the generics, their maps and the fill; the reduction scale from the ops before the generic.

Generalisation to run time. A variant is lowered once, for a representative rank, and runs
for every rank and broadcast pattern:

* loads and stores: a block argument used only by `arith.extf` is loaded already widened,
  and a `truncf` feeding the yield becomes the store conversion, both done in blocks;
* the scale: every `tensor.dim`/`arith.muli` tree that feeds an `index_cast` is an element
  count. If its `tensor.dim` leaves cover every axis of the iteration space it is the
  element count of the run-time broadcast of the operands that span that space in the IR
  (`numel(B)`); otherwise it is the product of those operands' own run-time dimensions
  (`self.shape[0]`). The rest of the prologue (index_cast, uitofp, divf, constants) is
  printed as it is;
* kernel parameters: a float constant in a body whose value is a registered marker prints as
  the named run-time parameter instead (the SmoothL1 `beta`), rounded to the constant's type
  exactly as MLIR rounds the constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.linalg.ops import FillOp, GenericOp, YieldOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap

from lossgrad_compiler.backends.ort.cxx_text import cxx_identifier, cxx_type
from lossgrad_compiler.backends.ort.errors import OrtBackendError
from lossgrad_compiler.backends.ort.scalar_ops import ScalarPrinter, constant_value_in

NUM_OPERANDS = 3
_NUMPY_OF_CXX = {"float": np.float32, "double": np.float64}


@dataclass(frozen=True)
class Variant:
    """One printed variant: the kernel struct body (types, body functions, Params; without
    its name), the body of its make_params function, and what the glue needs. Variants that
    differ only in how their parameters are computed share one kernel (one instantiation of
    the iteration templates)."""

    kernel_body: str
    params_body: str  # statements of `K::Params f(const Shapes& s, double <marker>...)`
    reduces: bool
    parameters: tuple[str, ...]  # names of the marker parameters make_params takes

    def params_function(self, name: str, kernel: str) -> str:
        args = "".join(f", double {p}" for p in self.parameters)
        return (
            f"inline {kernel}::Params {name}([[maybe_unused]] const Shapes& s{args}) {{\n"
            f"  using Params = {kernel}::Params;\n{self.params_body}}}\n"
        )


def print_variant(
    function: func.FuncOp,
    markers: Mapping[str, float] | None = None,
    result_operand: int | None = None,
) -> Variant:
    """The variant of one level-2 function.

    `markers` maps a parameter name to the marker value the variant builder lowered with;
    `result_operand` is the operand whose shape a summed result takes (spec's
    `differentiates`), checked against the IR's output map."""
    return _VariantPrinter(function, dict(markers or {}), result_operand).print()


@dataclass
class _Structure:
    main: GenericOp
    narrowing: GenericOp | None
    init: arith.ConstantOp | None  # the linalg.fill value of a summed result


class _VariantPrinter:
    def __init__(
        self, function: func.FuncOp, markers: dict[str, float], result_operand: int | None
    ) -> None:
        self.function = function
        self.markers = markers
        self.result_operand = result_operand
        self.args = list(function.body.block.args)
        if len(self.args) != NUM_OPERANDS:
            raise OrtBackendError("a level-2 function takes grad_output, self and target")
        self.used_markers: set[str] = set()
        self.marker_types: dict[str, str] = {}  # marker parameter -> C++ type, as found

    # ------------------------------------------------------------------ structure

    def _structure(self) -> _Structure:
        generics = [op for op in self.function.body.block.ops if isinstance(op, GenericOp)]
        if not 1 <= len(generics) <= 2:
            raise OrtBackendError(f"expected one or two linalg.generic, found {len(generics)}")
        main = generics[0]
        if [SSAValue.get(v) for v in main.inputs] != self.args:
            raise OrtBackendError("the generic must read (grad_output, self, target) in order")
        narrowing = generics[1] if len(generics) == 2 else None
        if narrowing is not None and [SSAValue.get(v) for v in narrowing.inputs] != [
            main.results[0]
        ]:
            raise OrtBackendError("a second generic may only narrow the first one's result")
        init = None
        owner = SSAValue.get(main.outputs[0]).owner
        if isinstance(owner, FillOp):
            fill_value = SSAValue.get(owner.inputs[0]).owner
            if not isinstance(fill_value, arith.ConstantOp):
                raise OrtBackendError("linalg.fill must fill with an arith.constant")
            init = fill_value
        elif not isinstance(owner, tensor.EmptyOp):
            raise OrtBackendError(f"unexpected generic output from '{owner}'")
        return _Structure(main, narrowing, init)

    # ------------------------------------------------------------------ printing

    def print(self) -> Variant:
        s = self._structure()
        block = s.main.body.block
        maps = [m.data for m in s.main.indexing_maps]
        loops = maps[0].num_dims
        reduces = self._reduces(s, maps)
        load_types, uses, widened = self._load_types(block)
        value_ops, value, combine = self._peel_yield(block, reduces)
        out_type = cxx_type(value.type)
        truncf = value.owner
        if not reduces and isinstance(truncf, arith.TruncFOp):
            # The narrowing of the result becomes the block store conversion.
            value = SSAValue.get(truncf.input)
            value_ops = [op for op in value_ops if op is not truncf]
        value_type = cxx_type(value.type)
        if s.narrowing is not None:
            out_type = self._narrowed_type(s.narrowing)
        lines = [
            *(f"  using L{i} = {t};" for i, t in enumerate(load_types)),
            f"  using Val = {value_type};",
            f"  using Out = {out_type};",
            f"  static constexpr bool kReduces = {_bool(reduces)};",
            *(f"  static constexpr bool kUses{i} = {_bool(u)};" for i, u in enumerate(uses)),
        ]
        captured = self._captured_values(block)
        body = self._value_function(block, value_ops, value, widened, captured)
        params_struct, make_params = self._prologue(captured, maps, loops)
        lines += [params_struct, body]
        if reduces:
            assert s.init is not None and combine is not None
            lines.append(self._init(s.init, value_type))
            lines.append(self._combine(combine, value_type))
        kernel_body = "\n".join(lines) + "\n"
        parameters = tuple(cxx_identifier(m) for m in sorted(self.used_markers))
        return Variant(kernel_body, make_params, reduces, parameters)

    def _reduces(self, s: _Structure, maps: list[AffineMap]) -> bool:
        out_map = maps[NUM_OPERANDS]
        iterators = [str(t.data) for t in s.main.iterator_types]
        if s.init is None:
            if out_map != AffineMap.identity(out_map.num_dims) or "reduction" in iterators:
                raise OrtBackendError("an elementwise generic must write the whole space")
            if s.narrowing is not None:
                raise OrtBackendError("only a summed result is narrowed by a second generic")
            return False
        if self.result_operand is not None and maps[self.result_operand] != out_map:
            raise OrtBackendError("the summed result must take the shape of its operand")
        return True

    def _narrowed_type(self, narrowing: GenericOp) -> str:
        ops = list(narrowing.body.block.ops)
        if (
            len(ops) != 2
            or not isinstance(ops[0], arith.TruncFOp)
            or ops[0].input != narrowing.body.block.args[0]
            or not isinstance(ops[1], YieldOp)
        ):
            raise OrtBackendError("the narrowing generic must be truncf + yield")
        return cxx_type(ops[0].result.type)

    def _load_types(self, block: Block) -> tuple[list[str], list[bool], dict[SSAValue, str]]:
        """Per input: the type it is loaded as, whether the body reads it, and the values
        that are the loaded (widened) argument."""
        load_types: list[str] = []
        uses: list[bool] = []
        widened: dict[SSAValue, str] = {}
        for i, arg in enumerate(block.args[:NUM_OPERANDS]):
            users = [use.operation for use in arg.uses]
            uses.append(bool(users))
            if users and all(isinstance(u, arith.ExtFOp) for u in users):
                types = {cxx_type(u.results[0].type) for u in users}
                if len(types) != 1:
                    raise OrtBackendError("an input is widened to two types")
                load_types.append(types.pop())
                for u in users:
                    widened[u.results[0]] = f"a{i}"
            else:
                load_types.append(cxx_type(arg.type))
            widened[arg] = f"a{i}"
        return load_types, uses, widened

    def _peel_yield(
        self, block: Block, reduces: bool
    ) -> tuple[list[Operation], SSAValue, arith.AddfOp | None]:
        """The body ops that compute the per-element value, that value, and the addf that
        accumulates it (summed results)."""
        yield_op = block.last_op
        if not isinstance(yield_op, YieldOp) or len(yield_op.operands) != 1:
            raise OrtBackendError("a body must end in linalg.yield of one value")
        yielded = SSAValue.get(yield_op.operands[0])
        ops = [op for op in block.ops if op is not yield_op]
        if not reduces:
            if any(block.args[NUM_OPERANDS].uses):
                raise OrtBackendError("an elementwise body must not read its output")
            return ops, yielded, None
        add = yielded.owner
        acc = block.args[NUM_OPERANDS]
        if not isinstance(add, arith.AddfOp) or acc not in (add.lhs, add.rhs):
            raise OrtBackendError("a summing body must yield addf(accumulator, value)")
        if len(list(acc.uses)) != 1:
            raise OrtBackendError("the accumulator may only feed the final addf")
        value = add.rhs if add.lhs == acc else add.lhs
        return [op for op in ops if op is not add], SSAValue.get(value), add

    def _captured_values(self, block: Block) -> list[SSAValue]:
        """Values the body reads from outside (the scale), in first-use order."""
        captured: list[SSAValue] = []
        for op in block.ops:
            for v in op.operands:
                if isinstance(v, BlockArgument):
                    inside = v.block is block
                else:
                    inside = v.owner.parent_block() is block
                if not inside and v not in captured:
                    captured.append(v)
        return captured

    # ------------------------------------------------------------------ prologue and params

    def _prologue(
        self, captured: list[SSAValue], maps: list[AffineMap], loops: int
    ) -> tuple[str, str]:
        printer = ScalarPrinter()
        counts: list[str] = []
        for op in _defining_ops(captured):
            for v in op.operands:
                if v not in printer.names and _is_index_tree(v):
                    name = f"n{len(counts)}"
                    counts.append(f"    const uint64_t {name} = {self._count(v, maps, loops)};")
                    printer.bind(v, name)
            printer.print_op(op)
        fields = [f"{cxx_type(v.type)} c{i};" for i, v in enumerate(captured)]
        marker_fields = [f"{t} {cxx_identifier(n)};" for n, t in self._marker_types().items()]
        params_struct = (
            "  struct Params {\n" + "".join(f"    {f}\n" for f in fields + marker_fields) + "  };"
        )
        values = [printer.name(v) for v in captured]
        values += [
            f"static_cast<{t}>({cxx_identifier(n)})" for n, t in self._marker_types().items()
        ]
        body = counts + [f"    {line}" for line in printer.lines]
        make_params = "".join(f"{line[2:]}\n" for line in body)
        make_params += f"  return Params{{{', '.join(values)}}};\n"
        return params_struct, make_params

    def _count(self, root: SSAValue, maps: list[AffineMap], loops: int) -> str:
        """An index tree (tensor.dim, muli, index constants) as a run-time element count."""
        leaves: list[tuple[int, int]] = []
        factor = 1
        stack = [root]
        while stack:
            v = stack.pop()
            op = v.owner
            if isinstance(op, arith.MuliOp):
                stack += [op.lhs, op.rhs]
            elif isinstance(op, arith.ConstantOp):
                factor *= int(op.value.value.data)
            elif isinstance(op, tensor.DimOp):
                index_op = SSAValue.get(op.index).owner
                if not isinstance(index_op, arith.ConstantOp):
                    raise OrtBackendError("tensor.dim needs a constant index")
                operand = self.args.index(SSAValue.get(op.source))
                leaves.append((operand, int(index_op.value.value.data)))
            else:
                raise OrtBackendError(f"'{op}' in an element count")
        covered = {_loop_of(maps[op], axis) for op, axis in leaves}
        if loops > 0 and covered == set(range(loops)):
            spanning = [i for i, m in enumerate(maps[:NUM_OPERANDS]) if len(m.results) == loops]
            mask = sum(1 << i for i in spanning)
            expression = f"s.broadcast_numel({mask}u)"
        else:
            expression = " * ".join(f"s.dim({op}, {axis})" for op, axis in sorted(leaves)) or "1"
        return expression if factor == 1 else f"{expression} * {factor}u"

    def _marker_types(self) -> dict[str, str]:
        return dict(sorted(self.marker_types.items()))

    def _constant_hook(self, op: arith.ConstantOp) -> str | None:
        """The parameter a marker constant stands for, or None for an ordinary constant."""
        type_name = cxx_type(op.result.type)
        numpy_type = _NUMPY_OF_CXX.get(type_name)
        if numpy_type is None:
            return None
        value = float(op.value.value.data)
        for name, marker in self.markers.items():
            if value == constant_value_in(marker, numpy_type):
                if self.marker_types.setdefault(name, type_name) != type_name:
                    raise OrtBackendError(f"marker '{name}' appears with two types")
                self.used_markers.add(name)
                return f"p.{cxx_identifier(name)}"
        return None

    # ------------------------------------------------------------------ body functions

    def _value_function(
        self,
        block: Block,
        ops: list[Operation],
        value: SSAValue,
        widened: dict[SSAValue, str],
        captured: list[SSAValue],
    ) -> str:
        printer = ScalarPrinter(self._constant_hook)
        for v, name in widened.items():
            printer.bind(v, name)
        for i, v in enumerate(captured):
            printer.bind(v, f"p.c{i}")
        printer.print_ops(op for op in ops if op.results[0] not in widened)
        params = ", ".join(f"[[maybe_unused]] L{i} a{i}" for i in range(NUM_OPERANDS))
        lines = "".join(f"    {line}\n" for line in printer.lines)
        return (
            f"  static inline Val value({params}, [[maybe_unused]] const Params& p) {{\n"
            f"{lines}    return {printer.name(value)};\n  }}"
        )

    def _init(self, init: arith.ConstantOp, value_type: str) -> str:
        printer = ScalarPrinter()
        printer.print_op(init)
        return (
            f"  static inline Val init() {{\n    {printer.lines[0]}\n"
            f"    return static_cast<{value_type}>({printer.name(init.result)});\n  }}"
        )

    def _combine(self, add: arith.AddfOp, value_type: str) -> str:
        acc_first = isinstance(add.lhs, BlockArgument)
        expression = "acc + v" if acc_first else "v + acc"
        return (
            f"  static inline Val combine(Val acc, Val v) {{ return static_cast<{value_type}>"
            f"({expression}); }}"
        )


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def _loop_of(m: AffineMap, axis: int) -> int:
    expr = m.results[axis]
    if isinstance(expr, AffineDimExpr):
        return expr.position
    if isinstance(expr, AffineConstantExpr):
        return -1  # a broadcast 1 belongs to no loop
    raise OrtBackendError(f"unsupported indexing expression {expr}")


def _is_index_tree(v: SSAValue) -> bool:
    return isinstance(v.owner, (arith.MuliOp, tensor.DimOp)) or (
        isinstance(v.owner, arith.ConstantOp) and cxx_type(v.type) == "uint64_t"
    )


def _defining_ops(captured: list[SSAValue]) -> list[Operation]:
    """The prologue ops the captured values need, in program order, without index trees
    (those are element counts, generalised by _count)."""
    needed: list[Operation] = []
    stack = list(captured)
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if _is_index_tree(v) or isinstance(v, BlockArgument):
            continue
        op = v.owner
        if id(op) in seen:
            continue
        seen.add(id(op))
        needed.append(op)
        stack += list(op.operands)
    block = needed[0].parent_block() if needed else None
    order = {id(op): i for i, op in enumerate(block.ops)} if block else {}
    return sorted(needed, key=lambda op: order[id(op)])
