"""Run level-2 IR, and the HFusion form `convert-linalg-to-hfusion` makes of it, with xDSL's
interpreter on numpy arrays (differential tests of the lowering and of the pass).

xdsl 0.74's interpreter lacks `arith.divf/negf/extf/truncf/uitofp`, `math.absf`, and
`linalg.fill` of a scalar, and it evaluates float ops in Python doubles, raising Python
exceptions for `x / 0`, `log(0)` or an overflowing `exp`. The functions here evaluate every
float op in its *result type* with numpy scalars, so an f32 body rounds after each op as
f32 hardware does and IEEE specials come out as inf/NaN; they override the upstream float
ops. Index/integer ops, `cmpf`, `select`, `constant`, `tensor.*`, `linalg.generic` and
`func.*` are upstream's.

The HFusion form's named ops run through their hidden regions, element by element, like any
linalg structured op; `linalg.broadcast`, `linalg.reduce` (in row-major order) and the
reshapes `tensor.collapse_shape` / `expand_shape` / `cast` are added here.

    outputs = run_function(module, "kl", grad_output, self_array, target)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.linalg.ops import BroadcastOp, FillOp, GenericOp, IndexOp, ReduceOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.linalg import LinalgFunctions, run_linalg_structured_op
from xdsl.interpreters.math import MathFunctions
from xdsl.interpreters.shaped_array import ShapedArray
from xdsl.interpreters.tensor import TensorFunctions
from xdsl.interpreters.utils.ptr import RawPtr, TypedPtr
from xdsl.ir import Attribute

from lossgrad_compiler import spec
from lossgrad_compiler.dialects import hfusion as hf
from lossgrad_compiler.reference import round_to

NUMPY_TYPES: dict[type[Attribute], Any] = {
    Float16Type: np.float16,
    BFloat16Type: ml_dtypes.bfloat16,
    Float32Type: np.float32,
    Float64Type: np.float64,
}


def numpy_type(element_type: Attribute) -> Any:
    """The numpy scalar type of an MLIR float type, or of a class index (i64, i32)."""
    if isinstance(element_type, IntegerType):
        found = spec.index_type(f"i{element_type.width.data}")
        if found is not None:
            return found.numpy
    try:
        return NUMPY_TYPES[type(element_type)]
    except KeyError:
        raise NotImplementedError(f"no numpy type for {element_type}") from None


def _in_result_type(op: Any, compute: Callable[..., Any], args: PythonValues) -> PythonValues:
    """`compute` on the arguments converted to the op's result type, as a Python float."""
    c = numpy_type(op.result.type)
    with np.errstate(all="ignore"):
        return (float(compute(*(c(a) for a in args))),)


@register_impls
class Level2FloatFunctions(InterpreterFunctions):
    """Float arith/math ops evaluated in their result type (see the module doc)."""

    @impl(arith.AddfOp)
    def run_addf(self, interpreter: Interpreter, op: arith.AddfOp, args: PythonValues):
        return _in_result_type(op, np.add, args)

    @impl(arith.SubfOp)
    def run_subf(self, interpreter: Interpreter, op: arith.SubfOp, args: PythonValues):
        return _in_result_type(op, np.subtract, args)

    @impl(arith.MulfOp)
    def run_mulf(self, interpreter: Interpreter, op: arith.MulfOp, args: PythonValues):
        return _in_result_type(op, np.multiply, args)

    @impl(arith.DivfOp)
    def run_divf(self, interpreter: Interpreter, op: arith.DivfOp, args: PythonValues):
        return _in_result_type(op, np.divide, args)

    @impl(arith.NegfOp)
    def run_negf(self, interpreter: Interpreter, op: arith.NegfOp, args: PythonValues):
        return _in_result_type(op, np.negative, args)

    @impl(math.AbsFOp)
    def run_absf(self, interpreter: Interpreter, op: math.AbsFOp, args: PythonValues):
        return _in_result_type(op, np.abs, args)

    @impl(math.ExpOp)
    def run_exp(self, interpreter: Interpreter, op: math.ExpOp, args: PythonValues):
        return _in_result_type(op, np.exp, args)

    @impl(math.LogOp)
    def run_log(self, interpreter: Interpreter, op: math.LogOp, args: PythonValues):
        return _in_result_type(op, np.log, args)

    @impl(arith.ExtFOp)
    def run_extf(self, interpreter: Interpreter, op: arith.ExtFOp, args: PythonValues):
        return (float(args[0]),)  # exact: every narrower value is representable

    @impl(arith.TruncFOp)
    def run_truncf(self, interpreter: Interpreter, op: arith.TruncFOp, args: PythonValues):
        # round_to rounds float64 -> bfloat16 once (ml_dtypes alone would round twice).
        narrowed = round_to(np.array(args[0], np.float64), np.dtype(numpy_type(op.result.type)))
        return (float(narrowed),)

    @impl(arith.UIToFPOp)
    def run_uitofp(self, interpreter: Interpreter, op: arith.UIToFPOp, args: PythonValues):
        width = op.input.type.width.data  # type: ignore[attr-defined]
        unsigned = int(args[0]) % (1 << width)
        return _in_result_type(op, lambda v: v, (unsigned,))


@register_impls
class Level2LinalgFunctions(InterpreterFunctions):
    """`linalg.fill` with a scalar value (upstream's expects a ShapedArray operand), and
    `linalg.generic` with `linalg.index` (upstream's has no loop position to give)."""

    def __init__(self) -> None:
        self.positions: list[tuple[int, ...]] = []  # the enclosing generics' loop positions

    @impl(GenericOp)
    def run_generic(self, interpreter: Interpreter, op: GenericOp, args: PythonValues):
        inputs, outputs = args[: len(op.inputs)], [a.copy() for a in args[len(op.inputs) :]]
        maps = [m.data for m in op.indexing_maps]
        shapes = [d for a in (*inputs, *outputs) if isinstance(a, ShapedArray) for d in a.shape]
        ranges = op.get_shapes_to_loops_map().eval(shapes, [])
        operands = (*inputs, *outputs)
        for position in itertools.product(*(range(r) for r in ranges)):
            loaded = tuple(
                a.load(m.eval(position, ())) if isinstance(a, ShapedArray) else a
                for a, m in zip(operands, maps, strict=True)
            )
            self.positions.append(position)
            try:
                results = interpreter.run_ssacfg_region(op.body, loaded, "linalg.generic")
            finally:
                self.positions.pop()
            for output, value, m in zip(outputs, results, maps[len(inputs) :], strict=True):
                output.store(m.eval(position, ()), value)
        return tuple(outputs)

    @impl(IndexOp)
    def run_index(self, interpreter: Interpreter, op: IndexOp, args: PythonValues):
        return (self.positions[-1][op.dim.value.data],)

    @impl(arith.ExtSIOp)
    def run_extsi(self, interpreter: Interpreter, op: arith.ExtSIOp, args: PythonValues):
        return (int(args[0]),)  # Python ints are the signed value already

    @impl(arith.ExtUIOp)
    def run_extui(self, interpreter: Interpreter, op: arith.ExtUIOp, args: PythonValues):
        width = op.input.type.width.data  # type: ignore[attr-defined]
        return (int(args[0]) % (1 << width),)

    @impl(FillOp)
    def run_fill(self, interpreter: Interpreter, op: FillOp, args: PythonValues):
        value, output = args
        filled = output.copy()
        for i in range(len(filled.data)):
            filled.data_ptr[i] = value
        return (filled,) if op.results else ()


@register_impls
class HfusionFormFunctions(InterpreterFunctions):
    """The HFusion form's ops: named elementwise ops, broadcasts, sums and reshapes."""

    @impl(BroadcastOp)
    def run_broadcast(self, interpreter: Interpreter, op: BroadcastOp, args: PythonValues):
        source, output = args
        added = set(op.dimensions.get_values())
        result = output.copy()
        for index in result.indices():
            result.store(index, source.load([i for d, i in enumerate(index) if d not in added]))
        return (result,)

    @impl(ReduceOp)
    def run_reduce(self, interpreter: Interpreter, op: ReduceOp, args: PythonValues):
        source, init = args
        reduced = set(op.dimensions.get_values())
        result = init.copy()
        for index in source.indices():  # row-major: level 2's summation order
            kept = [i for d, i in enumerate(index) if d not in reduced]
            (value,) = interpreter.run_ssacfg_region(
                op.region, (source.load(index), result.load(kept)), "linalg.reduce"
            )
            result.store(kept, value)
        return (result,)

    @impl(tensor.CollapseShapeOp)
    def run_collapse(
        self, interpreter: Interpreter, op: tensor.CollapseShapeOp, args: PythonValues
    ):
        (source,) = args
        groups = [[int(a.value.data) for a in g] for g in op.reassociation]
        return (_reshaped(source, [int(np.prod([source.shape[a] for a in g])) for g in groups]),)

    @impl(tensor.ExpandShapeOp)
    def run_expand(self, interpreter: Interpreter, op: tensor.ExpandShapeOp, args: PythonValues):
        source, *dynamic = args
        sizes = iter(dynamic)
        shape = [next(sizes) if s < 0 else s for s in op.static_output_shape.get_values()]
        return (_reshaped(source, shape),)

    @impl(tensor.CastOp)
    def run_tensor_cast(self, interpreter: Interpreter, op: tensor.CastOp, args: PythonValues):
        return (args[0],)

    # The named elementwise ops run their hidden regions like any structured op.

    @impl(hf.ElemwiseBinaryOp)
    def run_elemwise_binary(self, interpreter: Interpreter, op: Any, args: PythonValues):
        return run_linalg_structured_op(interpreter, op, args)

    @impl(hf.ElemwiseUnaryOp)
    def run_elemwise_unary(self, interpreter: Interpreter, op: Any, args: PythonValues):
        return run_linalg_structured_op(interpreter, op, args)

    @impl(hf.CastOp)
    def run_cast(self, interpreter: Interpreter, op: Any, args: PythonValues):
        return run_linalg_structured_op(interpreter, op, args)

    @impl(hf.HfusionElemwiseBinaryOp)
    def run_hfusion_elemwise_binary(self, interpreter: Interpreter, op: Any, args: PythonValues):
        return run_linalg_structured_op(interpreter, op, args)

    @impl(arith.MaxSIOp)
    def run_maxsi(self, interpreter: Interpreter, op: arith.MaxSIOp, args: PythonValues):
        return (max(int(args[0]), int(args[1])),)  # the integer max(s, s) after a count

    @impl(hf.BitcastOp)
    def run_bitcast(self, interpreter: Interpreter, op: hf.BitcastOp, args: PythonValues):
        """The same bytes under the output's element type."""
        (source, _) = args
        out_type = op.outputs[0].type.get_element_type()  # type: ignore[attr-defined]
        raw = source.data_ptr.raw
        size = len(source.data) * (out_type.bitwidth // 8)
        data = bytearray(raw.memory[raw.offset : raw.offset + size])
        ptr = TypedPtr(RawPtr(data), xtype=out_type)  # type: ignore[arg-type]
        return (ShapedArray(ptr, list(source.shape)),)

    @impl(hf.ArangeOp)
    def run_arange(self, interpreter: Interpreter, op: hf.ArangeOp, args: PythonValues):
        """`offset + sum_k index_k * strides[k]` at every index of the output."""
        offset = int(args[0]) if op.offset is not None else 0
        strides = [int(s) for s in args[1 if op.offset is not None else 0 : -1]]
        result = args[-1].copy()
        for index in result.indices():
            result.store(index, offset + sum(i * s for i, s in zip(index, strides, strict=True)))
        return (result,)

    @impl(hf.CompareOp)
    def run_compare(self, interpreter: Interpreter, op: Any, args: PythonValues):
        return run_linalg_structured_op(interpreter, op, args)

    @impl(hf.SelectOp)
    def run_select(self, interpreter: Interpreter, op: Any, args: PythonValues):
        return run_linalg_structured_op(interpreter, op, args)


def _reshaped(source: ShapedArray[float], shape: Sequence[int]) -> ShapedArray[float]:
    """The same elements in row-major order under another shape."""
    result = source.copy()
    result.shape = list(shape)
    return result


def make_interpreter(module: ModuleOp) -> Interpreter:
    """An interpreter for level-2 IR: upstream func/arith/math/tensor/linalg plus ours."""
    interpreter = Interpreter(module)
    for functions in (
        ArithFunctions(),
        MathFunctions(),
        TensorFunctions(),
        LinalgFunctions(),
        FuncFunctions(),
    ):
        interpreter.register_implementations(functions)
    interpreter.register_implementations(Level2FloatFunctions(), override=True)
    interpreter.register_implementations(Level2LinalgFunctions(), override=True)
    interpreter.register_implementations(HfusionFormFunctions())
    return interpreter


def to_shaped_array(array: np.ndarray, element_type: Attribute) -> ShapedArray[float]:
    """A numpy array as the interpreter's tensor value of `element_type`."""
    data = np.asarray(array).astype(numpy_type(element_type), order="C")
    ptr = TypedPtr(RawPtr(bytearray(data.tobytes())), xtype=element_type)  # type: ignore[arg-type]
    return ShapedArray(ptr, list(data.shape))


def to_numpy(value: ShapedArray[float], element_type: Attribute) -> np.ndarray:
    """The interpreter's tensor value as a numpy array (a copy)."""
    dtype = np.dtype(numpy_type(element_type))
    count = int(np.prod(value.shape, dtype=np.int64))
    raw = value.data_ptr.raw
    start = raw.offset
    buffer = bytes(raw.memory[start : start + count * dtype.itemsize])
    return np.frombuffer(buffer, dtype=dtype).reshape(value.shape).copy()


def run_function(module: ModuleOp, name: str, *arrays: Any) -> tuple[np.ndarray, ...]:
    """Call `func.func @name` of a level-2 module on numpy arrays (and Python scalars for
    scalar arguments, such as run-time parameters); its results as arrays."""
    interpreter = make_interpreter(module)
    function = next(
        op for op in module.walk() if getattr(op, "sym_name", None) and op.sym_name.data == name
    )
    input_types: Sequence[Attribute] = function.function_type.inputs.data  # type: ignore[attr-defined]
    output_types: Sequence[Attribute] = function.function_type.outputs.data  # type: ignore[attr-defined]
    values = [
        to_shaped_array(a, t.element_type) if isinstance(t, TensorType) else a
        for a, t in zip(arrays, input_types, strict=True)
    ]
    with np.errstate(all="ignore"):
        results = interpreter.call_op(name, tuple(values))
    return tuple(
        to_numpy(r, t.element_type)
        for r, t in zip(results, output_types, strict=True)
        if isinstance(t, TensorType)
    )
