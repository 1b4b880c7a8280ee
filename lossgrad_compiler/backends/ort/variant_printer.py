"""Print one level-2 function (docs/level2.md) as a C++ "variant": a struct whose static
functions the rank-generic iteration of cxx/iteration.h applies.

The printer reads the function only through `level2.analyze_function`: the math comes from
the body's compute ops; the structure (elementwise or summed into one operand's shape, the
accumulator's initial value and order, the final narrowing) and the loads from the analysis.

Variants are lowered in level 2's run-time-parameter form (`lower-lossgrad
{runtime_parameters=true}`, docs/level2.md), once for a representative rank, and run for
every rank and broadcast pattern:

* loads and stores: an operand the body reads through its widening `arith.extf` is loaded
  already widened, and the `truncf` before the yield becomes the store conversion, both done
  in blocks;
* run-time parameters: the function's parameter arguments (`n`, the divisor of the scale,
  and `beta`) are arguments of the variant's `make_params`; the glue computes n as the
  function's divisor (`lossgrad.divisor`) says and passes the node's beta. The ops above
  the body that the body reads (the scale 1/n, beta rounded to the compute type) are
  printed in `make_params` as they are.
* a division by such a value (d / beta) multiplies by its reciprocal when that is exact
  (beta a power of two: cxx/vmath.h's exact_reciprocal), the same value bit for bit; the
  choice is one loop-invariant test, which the compiler hoists out of the loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float32Type, TensorType
from xdsl.dialects.linalg.ops import FillOp
from xdsl.ir import BlockArgument, Operation, SSAValue

from lossgrad_compiler import level2
from lossgrad_compiler.backends.cxx import cxx_identifier
from lossgrad_compiler.backends.ort.cxx_text import cxx_type
from lossgrad_compiler.backends.ort.errors import OrtBackendError
from lossgrad_compiler.backends.ort.scalar_ops import KernelScalarOps, ScalarPrinter

NUM_OPERANDS = 5
"""cxx/iteration.h's kNumOperands: the operands every variant declares (the most inputs an
operator has; the glue asserts it is enough for spec's operators)."""


def streams_its_result(compute_ops: Iterable[Operation], out_type: str) -> bool:
    """Whether a large call of this body may write its result with streaming stores through
    a staged block (cxx/stream.h): only a body without exp or log whose result is float or
    double. (A float body that the 16-lane loop runs, with AVX-512, streams whatever it
    computes: the loop stores its vectors past the cache itself, with no staging pass;
    cxx/iteration.h's kStreamsInLoop. The fused half path does the same with whole lines of
    narrowed chunks, kStreamsFusedHalves.) As measured (docs/benchmarks.md, "The figures
    behind the kernels' choices", has the figures):
    - bodies with exp or log are bound by their arithmetic: the read-for-ownership that
      streaming saves costs them nothing and the staging pass costs time;
    - half-type results, which the fused path narrows in chunks, ran slower streamed at 2^24
      (every tensor out of the cache) through the staging pass, and slower still with each
      32-byte chunk streamed without it; whole 64-byte lines streamed from the fused path
      (kStreamsFusedHalves) are faster than ordinary stores;
    - the float32 bodies without them ran up to twice as fast streamed."""
    if out_type not in ("float", "double"):
        return False
    return not any(isinstance(op, (math.ExpOp, math.LogOp)) for op in compute_ops)


@dataclass(frozen=True)
class Variant:
    """One printed variant: the kernel struct body (types, body functions, Params; without
    its name), the body of its make_params function, and what the glue needs. Variants that
    differ only in how their parameters are computed share one kernel (one instantiation of
    the iteration templates)."""

    kernel_body: str
    params_body: str  # statements of `K::Params f(const Shapes& s, <parameters>...)`
    reduces: bool
    parameters: tuple[tuple[str, str], ...]  # (C++ type, name) of each run-time parameter

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.parameters)

    def params_function(self, name: str, kernel: str) -> str:
        args = "".join(f", {t} {p}" for t, p in self.parameters)
        return (
            f"inline {kernel}::Params {name}([[maybe_unused]] const Shapes& s{args}) {{\n"
            f"  using Params = {kernel}::Params;\n{self.params_body}}}\n"
        )


def print_variant(function: level2.Level2Function | Operation) -> Variant:
    """The variant of one level-2 signature function (or its analysis)."""
    if not isinstance(function, level2.Level2Function):
        function = level2.analyze_function(function)  # type: ignore[arg-type]
    return _VariantPrinter(function).print()


class _VariantPrinter:
    def __init__(self, fn: level2.Level2Function) -> None:
        self.fn = fn
        result = fn.result_operand
        if fn.reduces and (result is None or result.generic.index_map != fn.main.output.index_map):
            raise OrtBackendError("the summed result must take the shape of its operand")

    def print(self) -> Variant:
        fn = self.fn
        load_types = [
            cxx_type(o.loaded.type)
            if o.widening is not None
            else cxx_type(o.generic.block_arg.type)
            for o in fn.operands
        ]
        value_type = cxx_type(fn.value.type)
        out_type = cxx_type(_element(fn.function.function_type.outputs.data[0]))
        if len(load_types) > NUM_OPERANDS:
            raise OrtBackendError(
                f"@{fn.name} has {len(load_types)} operands; cxx/iteration.h is written for "
                f"{NUM_OPERANDS}"
            )
        # Operands the function does not have (an operator with fewer inputs, an optional
        # input not given) are declared unused; the iteration never loads them.
        unused = NUM_OPERANDS - len(load_types)
        any_lanes = self._any_lanes(load_types)
        streams = streams_its_result(fn.compute_ops, out_type)
        lines = [
            *(f"  using L{i} = {t};" for i, t in enumerate([*load_types, *[value_type] * unused])),
            f"  using Val = {value_type};",
            f"  using Out = {out_type};",
            f"  static constexpr bool kReduces = {_bool(fn.reduces)};",
            f"  static constexpr bool kStreams = {_bool(streams)};",
            f"  static constexpr bool kLanes16 = {_bool(any_lanes)};",
            *(
                f"  static constexpr bool kUses{i} = {_bool(reads)};"
                for i, reads in enumerate([*(o.reads for o in fn.operands), *[False] * unused])
            ),
        ]
        captured = list(fn.captured)
        params_struct, make_params = self._prologue(captured)
        lines += [params_struct, self._value_function(captured, any_lanes)]
        if fn.main.accumulation is not None:
            lines.append(self._init(value_type))
            first = fn.main.accumulation.accumulator_first
            lines.append(self._combine(first, value_type))
        parameters = tuple(
            (cxx_type(arg.type), cxx_identifier(name)) for name, arg in fn.parameters.items()
        )
        return Variant("\n".join(lines) + "\n", make_params, fn.reduces, parameters)

    # ------------------------------------------------------------------ prologue and params

    def _prologue(self, captured: list[SSAValue]) -> tuple[str, str]:
        """The Params struct and the body of make_params: the ops above the body that the
        captured values need, over the run-time parameters."""
        printer = ScalarPrinter()
        for name, arg in self.fn.parameters.items():
            printer.bind(arg, cxx_identifier(name))
        printer.print_ops(_defining_ops(self.fn, captured))
        fields = [f"{cxx_type(v.type)} c{i};" for i, v in enumerate(captured)]
        values = [printer.name(v) for v in captured]
        divisors = self._divisors(captured)
        for i in divisors:
            fields.append(f"{cxx_type(captured[i].type)} r{i};  // exact 1/c{i}, or 0")
            values.append(f"lossgrad::exact_reciprocal({values[i]})")
        exact = " && ".join(f"r{i} != 0" for i in divisors) if divisors else "false"
        fields.append(f"bool exact() const {{ return {exact}; }}")
        params_struct = "  struct Params {\n" + "".join(f"    {f}\n" for f in fields) + "  };"
        make_params = "".join(f"  {line}\n" for line in printer.lines)
        make_params += f"  return Params{{{', '.join(values)}}};\n"
        return params_struct, make_params

    # ------------------------------------------------------------------ body functions

    def _divisors(self, captured: list[SSAValue]) -> list[int]:
        """Indices of the captured values the body divides by (beta): each gets its exact
        reciprocal in Params, so that a power of two is multiplied by instead."""
        return [
            i
            for i, v in enumerate(captured)
            if any(isinstance(op, arith.DivfOp) and op.rhs is v for op in self.fn.compute_ops)
        ]

    def _any_lanes(self, load_types: list[str]) -> bool:
        """Whether the body may run on 16 floats at once (cxx/iteration.h's value_lanes16):
        every operand it reads is loaded as a float and every value of the body is a float
        or a comparison's flag, so that each operator means the same lane by lane."""
        body_types = {str(r.type) for op in self.fn.compute_ops for r in op.results}
        reads = [o.reads for o in self.fn.operands]
        return (
            cxx_type(self.fn.value.type) == "float"
            and all(t == "float" for t, read in zip(load_types, reads, strict=True) if read)
            and body_types <= {"f32", "i1"}
            and all(c.type == Float32Type() for c in self.fn.captured)
        )

    def _value_function(self, captured: list[SSAValue], any_lanes: bool) -> str:
        reciprocals = {f"p.c{i}": f"p.r{i}" for i in self._divisors(captured)}
        printer = ScalarPrinter(KernelScalarOps(reciprocals), any_lanes)
        for i, operand in enumerate(self.fn.operands):
            printer.bind(operand.generic.block_arg, f"a{i}")
            printer.bind(operand.loaded, f"a{i}")
        for i, v in enumerate(captured):
            printer.bind(v, f"p.c{i}")
        printer.print_ops(self.fn.compute_ops)
        lines = "".join(f"    {line}\n" for line in printer.lines)
        if any_lanes:  # a float or 16 lanes of floats (A<i>), the result of the same kind
            head = "".join(f", class A{i}" for i in range(NUM_OPERANDS))
            params = ", ".join(f"[[maybe_unused]] A{i} a{i}" for i in range(NUM_OPERANDS))
            signature = f"  template <bool kExact{head}>\n  static inline auto value("
        else:
            params = ", ".join(f"[[maybe_unused]] L{i} a{i}" for i in range(NUM_OPERANDS))
            signature = "  template <bool kExact>\n  static inline Val value("
        return (
            f"{signature}{params}, [[maybe_unused]] const Params& p) {{\n"
            f"{lines}    return {printer.name(self.fn.value)};\n  }}"
        )

    def _init(self, value_type: str) -> str:
        fill = self.fn.main.output.value.owner
        constant = SSAValue.get(fill.inputs[0]).owner if isinstance(fill, FillOp) else None
        if not isinstance(constant, arith.ConstantOp):
            raise OrtBackendError("a summed result starts from a linalg.fill of a constant")
        printer = ScalarPrinter()
        printer.print_op(constant)
        return (
            f"  static inline Val init() {{\n    {printer.lines[0]}\n"
            f"    return static_cast<{value_type}>({printer.name(constant.result)});\n  }}"
        )

    @staticmethod
    def _combine(accumulator_first: bool, value_type: str) -> str:
        expression = "acc + v" if accumulator_first else "v + acc"
        return (
            f"  static inline Val combine(Val acc, Val v) {{ return static_cast<{value_type}>"
            f"({expression}); }}"
        )


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def _element(t: object) -> object:
    assert isinstance(t, TensorType)
    return t.element_type


def _defining_ops(fn: level2.Level2Function, captured: list[SSAValue]) -> list[Operation]:
    """The function-level ops the captured values need, in program order (parameters and
    other arguments are bound, not computed)."""
    block = fn.function.body.block
    needed: set[Operation] = set()
    stack = list(captured)
    while stack:
        v = stack.pop()
        if isinstance(v, BlockArgument):
            continue
        op = v.owner
        if op.parent_block() is block and op not in needed:
            needed.add(op)
            stack.extend(op.operands)
    return [op for op in block.ops if op in needed]
