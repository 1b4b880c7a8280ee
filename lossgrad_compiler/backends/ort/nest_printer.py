"""Print a whole level-2 function as one scalar C++ loop nest per generic: the form of the
kernels whose maps the broadcast iteration of cxx/iteration.h cannot run (order-preserving
maps that skip loops, `linalg.index`, integer operands, the target check's count).

The printer reads the function op by op, one rule per construct: scalar ops above the bodies
through the scalar-op dispatch (scalar_ops.py), `tensor.dim` as the run-time extent of an
argument, `tensor.empty` as the output (rank > 0) or a local scalar (0-d), `linalg.fill` as
stores, a `linalg.generic` as a loop nest whose operand offsets come from its index maps
(dimension j of an operand read by loop k advances by the operand's row-major stride j per
step of k; a constant-0 entry reads position 0). No offset depends on a value read: the
bodies only compare a target with the class position (docs/level2.md), so no kernel reads
or writes outside its buffers whatever the target holds. `func.return`'s first result is the
output; every further one (a check's count) is stored in `counts`.

Two things speed a generic up without changing a bit. Its innermost loop runs 16 elements
(AVX-512) or 8 (AVX2) at a time where every value has a lane form (lane_printer.py), the
scalar loop remaining for other builds. And a generic that is no accumulation runs its
outermost loop's rows as tasks on the session's intra-op pool (run_rows), each task taking
what it reads by value (_task); accumulations (the batch sums, the target check) run on one
thread, in order.

Reductions (Level2Function.reductions) are generics like any other: each sums, in row-major
order from 0 as level 2 and the reference do, into a 0-d local (a `tensor.empty` of rank 0),
before the main generic, which reads the local through its map to `()`, so at depth 0. A
gather (`tensor.extract %w[%i]` of a function argument captured by a body) is a load
`w[i]` computed where its index is (the row loop, for an index from the target); the
verifier proves 0 <= i < size for a size of at least 1 (an invalid row reads class 0), which
the glue checks first (spec's min_classes: class_glue.py).

The variants are lowered in the run-time-parameter form: the parameter `%ignore_index`
(level2.PARAMETER_IGNORE_INDEX) is the node's value, which the glue passes as
`NestCall::ignore_index`, and a float attribute's parameter (f64, named after it) is
`NestCall::<attribute>`, the node's value widened exactly."""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.linalg.ops import FillOp, GenericOp, IndexOp
from xdsl.ir import BlockArgument, SSAValue

from lossgrad_compiler import level2, spec
from lossgrad_compiler.backends.cxx import cxx_identifier
from lossgrad_compiler.backends.ort.class_variants import float_attributes
from lossgrad_compiler.backends.ort.cxx_text import cxx_type
from lossgrad_compiler.backends.ort.errors import OrtBackendError
from lossgrad_compiler.backends.ort.lane_printer import LaneLoad, LaneStore, lane_loop
from lossgrad_compiler.backends.ort.scalar_ops import ScalarPrinter

HALF_STRUCTS = ("float16", "bfloat16")
"""cxx/half.h's half types: structs of one uint16_t `bits`. A loop that stores one through
the output pointer does not vectorise with g++ 12 ("more than one data ref"); storing its
bits as a uint16_t does (the same bytes)."""


def float_parameters() -> tuple[str, ...]:
    """The float attributes of the classification operators: NestCall's double fields."""
    names = (a.name for op in spec.CLASS_OPERATORS.values() for a in float_attributes(op))
    return tuple(dict.fromkeys(names))


def nest_prelude() -> str:
    """NestCall, the arguments of a loop-nest kernel."""
    floats = "".join(
        f"  double {cxx_identifier(n)} = 0;  // the attribute, widened exactly\n"
        for n in float_parameters()
    )
    return (
        "// The arguments of a loop-nest kernel (backends/ort/nest_printer.py): the function's\n"
        "// arguments in order, the output, the run-time attributes.\n"
        "struct NestCall {\n"
        "  const void* data[kNumOperands] = {};\n"
        "  lossgrad_shapes::Dims dims[kNumOperands];\n"
        "  void* out = nullptr;\n"
        "  int64_t ignore_index = 0;\n"
        f"{floats}"
        "  OrtKernelContext* ctx = nullptr;  // the session's intra-op pool (none: this thread)\n"
        "};\n"
        "\n"
        "// rows(begin, end) over [0, n) on the intra-op pool in tasks of whole rows (glue.h's\n"
        "// run_job; a streamed task ends with its own store fence, so it takes more rows).\n"
        "template <class F>\n"
        "inline OrtStatus* run_rows(const NestCall& c, int64_t n, int64_t row_elements,\n"
        "                           bool streamed, const F& rows) {\n"
        "  Job job;\n"
        "  job.total = n;\n"
        "  const int64_t task = streamed ? kStreamChunkElements : kChunkElements;\n"
        "  job.chunk = std::max<int64_t>(1, task / std::max<int64_t>(1, row_elements));\n"
        "  job.state = &rows;\n"
        "  job.range = [](const void* state, int64_t begin, int64_t end) {\n"
        "    (*static_cast<const F*>(state))(begin, end);\n"
        "  };\n"
        "  if (c.ctx == nullptr) {\n"
        "    rows(0, n);\n"
        "    return nullptr;\n"
        "  }\n"
        "  return run_job(c.ctx, job);\n"
        "}\n"
    )


@dataclass
class _Buffer:
    pointer: str  # a C++ pointer expression
    element: str  # its C++ element type
    dims: list[str]  # C++ extents


def print_nest_function(function: level2.Level2Function, name: str) -> str:
    """`inline void <name>(const NestCall& c, int64_t* counts)`: the whole function."""
    return _NestPrinter(function).print(name)


class _NestPrinter:
    def __init__(self, fn: level2.Level2Function) -> None:
        self.fn = fn
        self.scalars = ScalarPrinter()
        self.buffers: dict[SSAValue, _Buffer] = {}
        self.lines: list[str] = []
        generics = (
            *(r.generic for r in fn.reductions),
            fn.main,
            *(c.generic for c in fn.checks),
        )
        self.generics = {g.op: g for g in generics}
        self.gathered = {v for g in generics for v in g.captured if isinstance(v.type, TensorType)}
        self.locals = 0

    def print(self, name: str) -> str:
        block = self.fn.function.body.block
        for k, arg in enumerate(block.args):
            self._bind_argument(k, arg)
        for op in block.ops:
            self._print_op(op)
        body = "".join(f"  {line}\n" for line in [*self.lines, "return nullptr;"])
        return (
            f"inline OrtStatus* {name}([[maybe_unused]] const NestCall& c, "
            f"[[maybe_unused]] int64_t* counts) {{\n{body}}}\n"
        )

    def _bind_argument(self, k: int, arg: BlockArgument) -> None:
        t = arg.type
        if not isinstance(t, TensorType):
            self.scalars.bind(arg, self._parameter(arg))
            return
        element = cxx_type(t.element_type)
        dims = [f"c.dims[{k}][{j}]" if d < 0 else str(d) for j, d in enumerate(t.get_shape())]
        pointer = f"static_cast<const {element}*>(c.data[{k}])"
        self.buffers[arg] = _Buffer(pointer, element, dims)
        if arg in self.gathered:
            if len(dims) != 1:
                raise OrtBackendError(f"@{self.fn.name}: a gather from a tensor of rank != 1")
            self.scalars.bind(arg, pointer)  # tensor.extract's rule indexes it (scalar_ops.py)

    def _parameter(self, arg: BlockArgument) -> str:
        """The C++ of a run-time parameter: a NestCall field the glue fills."""
        for name, value in self.fn.parameters.items():
            if value is not arg:
                continue
            if name == level2.PARAMETER_IGNORE_INDEX or name in float_parameters():
                return f"static_cast<{cxx_type(arg.type)}>(c.{cxx_identifier(name)})"
        raise OrtBackendError(
            f"@{self.fn.name}: a loop nest takes no run-time parameter but ignore_index and "
            f"{', '.join(float_parameters())}"
        )

    def _emit(self, line: str, depth: int = 0) -> None:
        self.lines.append("  " * depth + line)

    def _flush_scalars(self, depth: int, start: int) -> None:
        for line in self.scalars.lines[start:]:
            self._emit(line, depth)

    def _print_op(self, op: object) -> None:
        start = len(self.scalars.lines)
        if isinstance(op, tensor.DimOp):
            source = self.buffers[SSAValue.get(op.source)]
            index = SSAValue.get(op.index).owner
            if not isinstance(index, arith.ConstantOp):
                raise OrtBackendError("tensor.dim of a non-constant dimension")
            axis = int(level2.constant_value(index))
            self.scalars.bind(op.result, f"static_cast<uint64_t>({source.dims[axis]})")
        elif isinstance(op, tensor.EmptyOp):
            self._empty(op)
        elif isinstance(op, FillOp):
            self._fill(op)
        elif isinstance(op, GenericOp):
            self._generic(op)
        elif isinstance(op, func.ReturnOp):
            self._return(op)
        else:
            self.scalars.print_op(op)  # type: ignore[arg-type]
        self._flush_scalars(0, start)

    def _empty(self, op: tensor.EmptyOp) -> None:
        t = op.tensor.type
        assert isinstance(t, TensorType)
        element = cxx_type(t.element_type)
        shape = t.get_shape()
        if not shape:
            local = f"local{self.locals}"
            self.locals += 1
            self._emit(f"{element} {local} = {{}};")
            self._emit(f"{element}* const p{local} = &{local};")
            self.buffers[op.tensor] = _Buffer(f"p{local}", element, [])
            return
        sizes = iter(op.dynamic_sizes)
        dims = [self.scalars.name(SSAValue.get(next(sizes))) if d < 0 else str(d) for d in shape]
        self.buffers[op.tensor] = _Buffer(
            f"static_cast<{element}*>(c.out)", element, [f"static_cast<int64_t>({d})" for d in dims]
        )

    def _fill(self, op: FillOp) -> None:
        out = self.buffers[SSAValue.get(op.outputs[0])]
        value = self.scalars.name(SSAValue.get(op.inputs[0]))
        count = " * ".join(out.dims) or "1"
        self._emit(
            f"std::fill({out.pointer}, {out.pointer} + ({count}), "
            f"static_cast<{out.element}>({value}));"
        )
        self.buffers[op.results[0]] = out

    def _generic(self, op: GenericOp) -> None:
        g = self.generics.get(op)
        if g is None:
            raise OrtBackendError(f"@{self.fn.name}: a generic the analysis does not know")
        operands = [*g.inputs, g.output]
        buffers = [self.buffers[SSAValue.get(o.value)] for o in operands]
        self._emit("{")
        offsets = []
        for k, (operand, buffer) in enumerate(zip(operands, buffers, strict=True)):
            terms = []
            for j, loop in enumerate(operand.index_map):
                if loop is None:
                    continue
                stride = " * ".join(buffer.dims[j + 1 :]) or "1"
                self._emit(f"  const int64_t s{k}_{j} = {stride};")
                terms.append(f"i{loop} * s{k}_{j}")
            offsets.append(" + ".join(terms) or "0")
        sizes = []
        for loop, size in enumerate(g.loop_sizes()):
            if isinstance(size, int):
                sizes.append(str(size))
            else:
                i, axis = size
                sizes.append(buffers[i].dims[axis])
            self._emit(f"  const int64_t n{loop} = {sizes[-1]};")
        levels = _levels(g)
        out, out_offset = buffers[-1], offsets[-1]
        self.scalars.bind(g.output.block_arg, f"{out.pointer}[{out_offset}]")
        stream_at = len(self.lines)
        lanes = None
        # The outermost loop's rows run in parallel where no element depends on another's
        # (not an accumulation), over the outermost of two loops or more.
        parallel = g.accumulation is None and g.loops >= 2
        for depth in range(g.loops + 1):
            if depth and depth == g.loops:
                loop = depth - 1
                lanes = self._lanes(g, levels, buffers, offsets)
                if lanes is None:
                    self._emit(f"for (int64_t i{loop} = 0; i{loop} < n{loop}; ++i{loop}) {{", depth)
                else:
                    self._emit(f"int64_t i{loop} = 0;", depth)
                    self._emit("#if defined(LOSSGRAD_NEST_LANES)", depth)
                    for line in lanes:
                        self._emit(line, depth)
                    self._emit("#endif", depth)
                    self._emit(f"for (; i{loop} < n{loop}; ++i{loop}) {{", depth)
            elif depth == 1 and parallel:
                task_at = len(self.lines)
                self._emit("for (int64_t i0 = begin; i0 < end; ++i0) {", 1)
            elif depth:
                loop = depth - 1
                self._emit(f"for (int64_t i{loop} = 0; i{loop} < n{loop}; ++i{loop}) {{", depth)
            inputs = zip(g.inputs, buffers[:-1], strict=True)
            for k, (operand, buffer) in enumerate(inputs):
                if levels[operand.block_arg] != depth:
                    continue
                load = f"{buffer.pointer}[{offsets[k]}]"
                self._emit(f"[[maybe_unused]] const {buffer.element} a{k} = {load};", depth + 1)
                self.scalars.bind(operand.block_arg, f"a{k}")
            start = len(self.scalars.lines)
            self.scalars.print_ops(o for o in g.body_ops if levels[o.results[0]] == depth)
            self._flush_scalars(depth + 1, start)
            del self.scalars.lines[start:]
        depth = g.loops + 1
        start = len(self.scalars.lines)
        if g.accumulation is not None:
            self.scalars.print_op(g.accumulation.add)
            value = self.scalars.name(g.accumulation.add.result)
        else:
            value = self.scalars.name(g.value)
        self._flush_scalars(depth, start)
        del self.scalars.lines[start:]
        if out.element in HALF_STRUCTS:  # a struct store through c.out stops g++ vectorising
            store = f"reinterpret_cast<uint16_t*>({out.pointer})[{out_offset}] = {value}.bits;"
        else:
            store = f"{out.pointer}[{out_offset}] = {value};"
        self._emit(store, depth)
        for _ in range(g.loops):
            depth -= 1
            self._emit("}", depth)
        streamed = "false" if lanes is None else "stream"
        if parallel:
            if lanes is not None:
                self._emit("#if defined(LOSSGRAD_NEST_LANES)", 1)
                self._emit("  if (stream) stream_fence();  // this task's streamed rows", 1)
                self._emit("#endif", 1)
            self._task(task_at, g, streamed)
        if lanes is not None:  # now that the flag's place is no longer an index into the rest
            self.lines[stream_at:stream_at] = self._stream_flag(g, buffers)
        self._emit("}")
        self.buffers[op.results[0]] = out

    def _task(self, at: int, g: level2.Level2Generic, streamed: str) -> None:
        """The row loop printed from `at` on as a task over rows [begin, end) for run_rows.
        It takes what it reads from the function by value, as parameters: a store through
        the output may alias anything a pointer reaches (a half result is stored as words),
        so values read through the closure's references were reloaded at every step."""
        body = self.lines[at:]
        used = set(_IDENTIFIER.findall("\n".join(body)))
        inside = {m[1] for line in body if (m := _DECLARED.match(line))}
        outside = {m[1] for line in self.lines[:at] if (m := _DECLARED.match(line))}
        if streamed == "stream":
            outside.add("stream")
        names = sorted((used & outside) - inside - {"c"})
        parameters = "".join(f", [[maybe_unused]] const auto {n}" for n in names)
        arguments = "".join(f", {n}" for n in names)
        row = " * ".join(f"n{k}" for k in range(1, g.loops)) or "1"
        self.lines[at:] = [
            "  const auto task = [](const int64_t begin, const int64_t end, "
            f"[[maybe_unused]] const NestCall c{parameters}) {{",
            *(f"  {line}" for line in body),
            "  };",
            "  const auto rows = [&](const int64_t begin, const int64_t end) {",
            f"    task(begin, end, c{arguments});",
            "  };",
            f"  LOSSGRAD_TRY(run_rows(c, n0, {row}, {streamed}, rows));",
        ]

    def _lanes(
        self,
        g: level2.Level2Generic,
        levels: dict[SSAValue, int],
        buffers: list[_Buffer],
        offsets: list[str],
    ) -> list[str] | None:
        """The innermost loop's lane loop (lane_printer.py), or None where it has none."""
        loop = g.loops - 1
        operands = [*g.inputs, g.output]
        if (
            g.accumulation is not None
            or not all(
                _contiguous_along(o.index_map, loop)
                for o in operands
                if levels[o.block_arg] == g.loops and o is not g.output
            )
            or not _contiguous_along(g.output.index_map, loop)
        ):
            return None
        loads = [
            LaneLoad(o.block_arg, b.pointer, b.element, offset)
            for o, b, offset in zip(g.inputs, buffers, offsets, strict=False)
            if levels[o.block_arg] == g.loops
        ]
        store = LaneStore(buffers[-1].pointer, buffers[-1].element, offsets[-1], g.value)
        ops = [o for o in g.body_ops if levels[o.results[0]] == g.loops]
        if any(g.output.block_arg in o.operands for o in ops):
            return None

        def row(value: SSAValue) -> str | None:
            if levels.get(value, 0) >= g.loops:
                return None
            return self.scalars.names.get(value)

        return lane_loop(loop, ops, loads, store, row)

    def _stream_flag(self, g: level2.Level2Generic, buffers: list[_Buffer]) -> list[str]:
        """`stream`: whether this call's lane loop writes past the cache (cxx/lanes.h)."""

        def size(b: _Buffer) -> str:
            return f"static_cast<int64_t>(sizeof({b.element}))" + "".join(
                f" * static_cast<int64_t>({d})" for d in b.dims
            )

        out = buffers[-1]
        moved = " + ".join(size(b) for b in buffers)
        strides = [
            f"s{len(buffers) - 1}_{j} * static_cast<int64_t>(sizeof({out.element}))"
            for j, loop in enumerate(g.output.index_map)
            if loop is not None and loop != g.loops - 1
        ]
        return [
            "#if defined(LOSSGRAD_NEST_LANES)",
            f"  const bool stream = lanes::streams({out.pointer}, {size(out)}, {moved}, "
            f"{{{', '.join(strides)}}});",
            "#else",
            "  const bool stream = false;",
            "#endif",
        ]

    def _return(self, op: func.ReturnOp) -> None:
        for k, value in enumerate(op.arguments):
            buffer = self.buffers[SSAValue.get(value)]
            if k == 0:
                if "c.out" not in buffer.pointer:
                    raise OrtBackendError(f"@{self.fn.name}: the result is not the output")
                continue
            self._emit(f"counts[{k - 1}] = *{buffer.pointer};")


_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_DECLARED = re.compile(
    r"^\s*(?:\[\[maybe_unused\]\]\s+)?(?:const\s+)?[A-Za-z_][\w:<>]*\s*\*?\s*(?:const\s+)?"
    r"([A-Za-z_]\w*)\s*="
)
"""A printed declaration `[const] T [*] [const] name = ...`: the name."""


def _contiguous_along(index_map: tuple[int | None, ...], loop: int) -> bool:
    """Whether an operand read by `loop` steps one element per step of it: the loop indexes
    its last dimension and no other."""
    return bool(index_map) and index_map[-1] == loop and index_map.count(loop) == 1


def _levels(g: level2.Level2Generic) -> dict[SSAValue, int]:
    """Per block argument and body value, the loop depth it is computed at: one past the
    deepest loop it depends on (0: before the loops). An operand depends on the loops its
    map reads, `linalg.index k` on loop k, a value from above on none. Each value is printed
    where it first can be, in the body's order, so a loop-invariant quotient is computed
    once, not per element, and the bits stay the same; no load moves out of the loops that
    bound its own indices, so none reads outside its buffer."""
    levels: dict[SSAValue, int] = {}
    for operand in (*g.inputs, g.output):
        read = [loop for loop in operand.index_map if loop is not None]
        levels[operand.block_arg] = max(read) + 1 if read else 0
    levels[g.output.block_arg] = g.loops  # the accumulator is read where it is written
    for op in g.body_ops:
        if isinstance(op, IndexOp):
            depth = op.dim.value.data + 1
        else:
            depth = max((levels.get(SSAValue.get(v), 0) for v in op.operands), default=0)
        for result in op.results:
            levels[result] = depth
    return levels
