"""Input generators for the classification operators (spec.ShapeRule.CLASSES), shared by every
test that runs them on a path: the reference, level 2, ONNX, the native kernels, IREE,
Ascend C and AscendNPU IR draw the same calls from here.

    for case in class_cases("NLLLossBackward", np.float32):
        assert_bits_equal(run_my_backend(case), reference.evaluate(*case.call))

total_weight is what PyTorch's forward returns beside the loss (the sum of w[t] over the
kept elements, the count without a weight), computed here in float64 and rounded once;
`torch_total_weight` gives PyTorch's own, for comparisons with autograd.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DYNAMIC_INDEX, ModuleOp, TensorType, i32, i64
from xdsl.ir import Block, Region

from lossgrad_compiler import reference, spec
from lossgrad_compiler.dialects.lossgrad import MLIR_FLOAT_TYPES, make_op

CLASS_OP_TYPES: tuple[str, ...] = tuple(spec.CLASS_OPERATORS)
TARGET_DTYPES: tuple[np.dtype, ...] = tuple(t.dtype for t in spec.INDEX_TYPES)

SHAPES: dict[str, tuple[tuple[int, ...], ...]] = {
    spec.NLL_LOSS_BACKWARD.name: ((6, 5), (5,), (1, 3), (0, 4)),
    spec.NLL_LOSS_2D_BACKWARD.name: ((2, 4, 3, 3), (1, 3, 1, 5), (0, 2, 2, 2)),
    spec.CROSS_ENTROPY_LOSS_GRAD.name: ((6, 5), (1, 3), (0, 4)),
}
"""self's shapes per operator: a batch, no batch ([C]), one row, an empty batch."""

IGNORE_INDICES: tuple[int, ...] = (-100, 1)
"""The default, and a class that occurs (some rows are ignored)."""

LABEL_SMOOTHINGS: tuple[float, ...] = (0.0, 0.25)
"""CrossEntropyLossGrad's label smoothing: none, and a value every float type holds
exactly (ONNX keeps a FLOAT attribute in float32)."""


def smoothings(op_type: str) -> tuple[float | None, ...]:
    """The label smoothings a case grid takes (None: the operator has none)."""
    names = {a.name for a in spec.operator(op_type).attributes}
    return LABEL_SMOOTHINGS if "label_smoothing" in names else (None,)


@dataclass(frozen=True)
class ClassCase:
    """One call: ONNX-named inputs (weight only when given) and attributes."""

    op_type: str
    inputs: dict[str, np.ndarray]
    attrs: dict[str, Any]
    label: str
    checked: spec.CheckedCall = field(compare=False, repr=False)

    @property
    def call(self) -> tuple[str, dict[str, np.ndarray], dict[str, Any]]:
        return self.op_type, self.inputs, self.attrs

    @property
    def present(self) -> tuple[str, ...]:
        return self.checked.present

    def expected(self) -> np.ndarray:
        return reference.evaluate(self.op_type, self.inputs, self.attrs)


def rows_of(op_type: str, self_shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """(target's shape, C) for a self of this shape."""
    axis = spec.operator(op_type).class_dim(len(self_shape))
    return self_shape[:axis] + self_shape[axis + 1 :], self_shape[axis]


def total_weight(
    target: np.ndarray, weight: np.ndarray | None, ignore_index: int, dtype: Any
) -> np.ndarray:
    """The forward's total weight: the sum of w[t] over the kept elements (their count
    without a weight), in float64, rounded once to `dtype`; a 0-d array."""
    flat = target.reshape(-1).astype(np.int64)
    classes = (1 << 62) if weight is None else weight.size
    kept = flat[(flat != ignore_index) & (flat >= 0) & (flat < classes)]  # bad ones add 0
    if weight is None:
        value = float(kept.size)
    else:
        value = float(np.sum(weight.astype(np.float64)[kept])) if kept.size else 0.0
    return reference.round_to(np.array(value, np.float64), np.dtype(dtype))


def log_softmax(x: np.ndarray, dtype: Any) -> np.ndarray:
    """log_softmax over the class dimension (1, or 0 for [C]) in float64, rounded once: the
    log-probabilities CrossEntropyLossGrad takes."""
    axis = 1 if x.ndim >= 2 else 0
    x64 = x.astype(np.float64)
    if x64.size == 0:
        return x64.astype(dtype)
    shifted = x64 - x64.max(axis=axis, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(dtype)


def make_class_case(
    op_type: str,
    self_shape: tuple[int, ...],
    dtype: Any,
    *,
    reduction: str = "mean",
    ignore_index: int = -100,
    weighted: bool = False,
    target_dtype: Any = np.int64,
    seed: int = 0,
    targets: np.ndarray | None = None,
    grad_output_shape: tuple[int, ...] | None = None,
    label_smoothing: float | None = None,
) -> ClassCase:
    """One call with random values: targets in [0, C) (some equal to ignore_index when it
    is a class), weights in [0.5, 1.5), grad_output in N(0, 1)."""
    rng = np.random.default_rng(seed)
    rows, classes = rows_of(op_type, self_shape)
    if targets is None:
        targets = rng.integers(0, max(classes, 1), rows)
        if 0 <= ignore_index < classes and targets.size:
            targets.reshape(-1)[:: 3] = ignore_index
    t = np.asarray(targets).astype(target_dtype).reshape(rows)
    per_element = reduction == "none" and len(self_shape) >= 2
    if grad_output_shape is None:
        grad_output_shape = rows if per_element else ()
    inputs: dict[str, np.ndarray] = {
        "grad_output": rng.standard_normal(grad_output_shape).astype(dtype),
        "self": rng.standard_normal(self_shape).astype(dtype),
        "target": t,
    }
    op = spec.operator(op_type)
    if op is spec.CROSS_ENTROPY_LOSS_GRAD:
        inputs["self"] = log_softmax(inputs["self"], dtype)
    weight = (rng.random(classes) + 0.5).astype(dtype) if weighted else None
    if "total_weight" in op.input_names:
        inputs["total_weight"] = total_weight(t, weight, ignore_index, dtype)
    if weight is not None:
        inputs["weight"] = weight
    attrs: dict[str, Any] = {"reduction": reduction, "ignore_index": ignore_index}
    smoothing = ""
    if "label_smoothing" in {a.name for a in op.attributes}:
        attrs["label_smoothing"] = float(label_smoothing or 0.0)
        smoothing = f"-ls{attrs['label_smoothing']:g}"
    label = (
        f"{op_type}-{'x'.join(map(str, self_shape)) or '0d'}-{np.dtype(dtype).name}-"
        f"{reduction}-ii{ignore_index}{'-w' if weighted else ''}{smoothing}-"
        f"{np.dtype(target_dtype).name}"
    )
    checked = spec.validate(
        op_type, {n: spec.TensorInfo(a.dtype, a.shape) for n, a in inputs.items()}, attrs
    )
    return ClassCase(op_type, inputs, attrs, label, checked)


def class_cases(
    op_type: str, dtype: Any, *, target_dtype: Any = np.int64, seed: int = 0
) -> list[ClassCase]:
    """Every shape of SHAPES, reduction, ignore_index of IGNORE_INDICES, with and without a
    weight, for one operator and float type."""
    op = spec.operator(op_type)
    grid = itertools.product(
        SHAPES[op_type], op.reductions, IGNORE_INDICES, (False, True), smoothings(op_type)
    )
    return [
        make_class_case(
            op_type, shape, dtype, reduction=r.value, ignore_index=ii, weighted=w,
            target_dtype=target_dtype, seed=seed + k, label_smoothing=ls,
        )
        for k, (shape, r, ii, w, ls) in enumerate(grid)
    ]


def all_class_cases(dtypes: Any = None, seed: int = 0) -> Iterator[ClassCase]:
    """class_cases of every classification operator and float type, int64 targets, and one
    int32 case set per operator."""
    for op_type in CLASS_OP_TYPES:
        for dtype in dtypes or [t.dtype for t in spec.FLOAT_TYPES]:
            yield from class_cases(op_type, dtype, seed=seed)
        yield from class_cases(op_type, np.float32, target_dtype=np.int32, seed=seed + 1)


def out_of_range_case(op_type: str, dtype: Any = np.float32) -> ClassCase:
    """A call whose targets hold two values outside [0, C) that are not ignore_index."""
    shape = SHAPES[op_type][0]
    rows, classes = rows_of(op_type, shape)
    targets = np.zeros(rows, np.int64)
    targets.reshape(-1)[0] = classes
    targets.reshape(-1)[-1] = -7
    return make_class_case(op_type, shape, dtype, reduction="sum", targets=targets)


def inputs_in_order(case: ClassCase) -> list[np.ndarray]:
    """The present inputs in the operator's order (a function's arguments)."""
    return [case.inputs[n] for n in case.present]


def describe(inputs: Mapping[str, np.ndarray]) -> str:
    return ", ".join(f"{n}: {a.dtype}{list(a.shape)}" for n, a in inputs.items())


def signature_shape(case: ClassCase, name: str) -> list[int]:
    """The frontend's signature form of a classification input: every dim dynamic, but a
    one-element input (grad_output of a reduced loss, total_weight) keeps its static shape."""
    shape = list(case.inputs[name].shape)
    per_element = case.attrs["reduction"] == "none" and case.inputs["self"].ndim >= 2
    if name == "total_weight" or (name == "grad_output" and not per_element):
        return shape
    return [DYNAMIC_INDEX] * len(shape)


def class_case_function(case: ClassCase, *, dynamic: bool, name: str = "f") -> func.FuncOp:
    """`func.func @name(<present inputs>)` returning the op's result, lossgrad level (the
    lowering appends the target check's count as a second result)."""
    types = []
    for input_name in case.present:
        array = case.inputs[input_name]
        float_type = spec.float_type(array.dtype)
        element = (
            MLIR_FLOAT_TYPES[float_type.mlir]
            if float_type is not None
            else (i64 if array.dtype == np.int64 else i32)
        )
        shape = signature_shape(case, input_name) if dynamic else list(array.shape)
        types.append(TensorType(element, shape))
    block = Block(arg_types=types)
    attrs = spec.check_attributes(spec.operator(case.op_type), case.attrs)
    op = make_op(case.op_type, dict(zip(case.present, block.args, strict=True)), attrs)
    block.add_ops([op, func.ReturnOp(op.result)])
    return func.FuncOp(name, (types, [op.result.type]), Region(block))


def class_case_module(case: ClassCase, *, dynamic: bool) -> ModuleOp:
    """A module of one function `@f` for the case."""
    return ModuleOp([class_case_function(case, dynamic=dynamic)])


def every(cases: list[ClassCase], k: int) -> list[ClassCase]:
    """About one case in k, mixed over the grid: the j-th chosen is index k*j + j % k, so
    the binary axes of the grid (weight, label smoothing, ignore_index) all vary; a plain
    `cases[::2]` would keep only one side of the fastest axis."""
    return [cases[i] for j in range(len(cases)) if (i := k * j + j % k) < len(cases)]
