"""The operator table of docs/operators.md as data, and the one validation every layer calls.

ONNX schemas, xDSL verifiers, the generated C++ argument checks, the reference and the
README's operator table all read this module, so a default or a range is written once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import ml_dtypes
import numpy as np

from lossgrad_compiler import messages

DOMAIN = "ai.lossgrad"
MAX_RANK = 8
INPUT_NAMES: tuple[str, str, str] = ("grad_output", "self", "target")
"""The inputs every operator takes first, all required; an operator may declare optional
inputs after them (`OperatorSpec.inputs`, which every layer reads)."""

# A dimension is a size (int >= 0), a symbolic name (str) or unknown (None).
Dim = int | str | None
Shape = tuple[Dim, ...]


# --------------------------------------------------------------------------- element types


@dataclass(frozen=True)
class FloatType:
    """One of the four element types, with its name in every system we talk to."""

    name: str  # numpy-style name, used in messages: "float16"
    onnx: int  # onnx.TensorProto data type code
    onnx_type_str: str  # ONNX type-constraint string: "tensor(float16)"
    mlir: str  # MLIR builtin type: "f16"
    bits: int
    numpy: Any = field(compare=False, repr=False)
    cxx: str = ""  # the native ORT kernels' C++ type (cxx/half.h for the 16-bit ones)
    ascend_c: str | None = None  # Ascend C element type; None: no vector arithmetic for it
    ge: str = ""  # CANN's ge::DataType / aclDataType enumerator name

    @property
    def is_half(self) -> bool:
        """float16/bfloat16 are computed in float32 and rounded once (docs/operators.md)."""
        return self.bits == 16

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.numpy)


FLOAT16 = FloatType(
    "float16", 10, "tensor(float16)", "f16", 16, np.float16,
    cxx="float16", ascend_c="half", ge="DT_FLOAT16",
)  # fmt: skip
BFLOAT16 = FloatType(
    "bfloat16", 16, "tensor(bfloat16)", "bf16", 16, ml_dtypes.bfloat16,
    cxx="bfloat16", ascend_c="bfloat16_t", ge="DT_BF16",
)  # fmt: skip
FLOAT32 = FloatType(
    "float32", 1, "tensor(float)", "f32", 32, np.float32,
    cxx="float", ascend_c="float", ge="DT_FLOAT",
)  # fmt: skip
FLOAT64 = FloatType(
    "float64", 11, "tensor(double)", "f64", 64, np.float64,
    cxx="double", ascend_c=None, ge="DT_DOUBLE",
)  # fmt: skip
FLOAT_TYPES: tuple[FloatType, ...] = (FLOAT16, BFLOAT16, FLOAT32, FLOAT64)

_BY_KEY: dict[Any, FloatType] = {}
for _t in FLOAT_TYPES:
    _BY_KEY.update({_t.name: _t, _t.mlir: _t, _t.onnx: _t, _t.onnx_type_str: _t, _t.dtype: _t})
_BY_KEY.update({"float": FLOAT32, "double": FLOAT64, "half": FLOAT16})


def _look_up(table: Mapping[Any, Any], key: Any) -> Any:
    """The entry of a name, MLIR name, ONNX code or numpy dtype in `table`; None if none
    (a bool is no ONNX code, and what numpy cannot read as a dtype is no type)."""
    if isinstance(key, bool):
        return None
    if isinstance(key, (str, int)):
        return table.get(key)
    try:
        return table.get(np.dtype(key))
    except TypeError:
        return None


def float_type(key: Any) -> FloatType | None:
    """The FloatType for a name, MLIR name, ONNX code or numpy dtype; None if it is not one."""
    return key if isinstance(key, FloatType) else _look_up(_BY_KEY, key)


def promote_types(types: Iterable[FloatType]) -> FloatType:
    """PyTorch's promotion over the float types: float16 with bfloat16 gives float32."""
    found = set(types)
    for wide in (FLOAT64, FLOAT32):
        if wide in found:
            return wide
    if len(found) == 1:
        return found.pop()
    return FLOAT32


def compute_type(promoted: FloatType) -> FloatType:
    """The type arithmetic runs in: half types are computed in float32."""
    return FLOAT32 if promoted.is_half else promoted


@dataclass(frozen=True)
class IndexType:
    """An element type of a class-index input (a target of the classification operators),
    with its name in every system we talk to."""

    name: str  # numpy-style name: "int64"
    onnx: int  # onnx.TensorProto data type code
    onnx_type_str: str  # "tensor(int64)"
    mlir: str  # "i64"
    bits: int
    numpy: Any = field(compare=False, repr=False)
    cxx: str = ""  # the native kernels' C++ type
    ge: str = ""  # CANN's ge::DataType enumerator name

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.numpy)


INT64 = IndexType("int64", 7, "tensor(int64)", "i64", 64, np.int64, cxx="int64_t", ge="DT_INT64")
INT32 = IndexType("int32", 6, "tensor(int32)", "i32", 32, np.int32, cxx="int32_t", ge="DT_INT32")
INDEX_TYPES: tuple[IndexType, ...] = (INT64, INT32)

_INDEX_BY_KEY: dict[Any, IndexType] = {}
for _i in INDEX_TYPES:
    _INDEX_BY_KEY.update({_i.name: _i, _i.mlir: _i, _i.onnx: _i, _i.onnx_type_str: _i})
    _INDEX_BY_KEY[_i.dtype] = _i


def index_type(key: Any) -> IndexType | None:
    """The IndexType for a name, MLIR name, ONNX code or numpy dtype; None if it is not one."""
    return key if isinstance(key, IndexType) else _look_up(_INDEX_BY_KEY, key)


# --------------------------------------------------------------------------- attributes


class Reduction(StrEnum):
    """ONNX spelling of the reduction; `aclnn_code` is CANN's integer."""

    NONE = "none"
    MEAN = "mean"
    SUM = "sum"
    BATCHMEAN = "batchmean"

    @property
    def aclnn_code(self) -> int:
        return REDUCTION_CODES[self]


REDUCTION_CODES: dict[Reduction, int] = {
    Reduction.NONE: 0,
    Reduction.MEAN: 1,
    Reduction.SUM: 2,
    Reduction.BATCHMEAN: 3,
}


class AttrKind(StrEnum):
    """The ONNX attribute type of an attribute; values are onnx.AttributeProto type names."""

    STRING = "STRING"
    INT = "INT"
    FLOAT = "FLOAT"

    @property
    def onnx_code(self) -> int:
        """onnx.AttributeProto.AttributeType value (FLOAT=1, INT=2, STRING=3)."""
        return {AttrKind.FLOAT: 1, AttrKind.INT: 2, AttrKind.STRING: 3}[self]


@dataclass(frozen=True)
class AttributeSpec:
    """One attribute: its ONNX type, its default and the values it may take."""

    name: str
    kind: AttrKind
    default: str | int | float
    doc: str
    choices: tuple[str | int, ...] | None = None  # STRING/INT attributes: the allowed values
    minimum: float | None = None  # FLOAT attributes: lower bound (NaN is never valid)
    maximum: float | None = None  # FLOAT attributes: upper bound, inclusive
    exclusive: bool = False  # the minimum itself is not valid (delta > 0)
    aclnn_codes: tuple[int, ...] | None = None  # STRING attributes: CANN's integer per choice
    enum: type[StrEnum] | None = None  # STRING attributes: the type a checked value takes

    def aclnn_value(self, value: str | int | float) -> int | float:
        """The value as the aclnn API takes it: a STRING choice as its integer code, an INT
        as an integer, a FLOAT as a double."""
        if self.kind is AttrKind.STRING:
            if self.choices is None or self.aclnn_codes is None:
                raise ValueError(f"attribute '{self.name}' has no aclnn codes")
            return self.aclnn_codes[self.choices.index(value)]
        return int(value) if self.kind is AttrKind.INT else float(value)

    def above_minimum(self, value: float) -> bool:
        """Whether a (non-NaN) float satisfies the lower bound."""
        if self.minimum is None:
            return True
        return value > self.minimum if self.exclusive else value >= self.minimum

    def in_range(self, value: float) -> bool:
        """Whether a (non-NaN) float satisfies both bounds."""
        return self.above_minimum(value) and (self.maximum is None or value <= self.maximum)

    def rule(self) -> str:
        """The valid range in words, as used in messages and the README table."""
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.minimum is not None and self.maximum is not None:
            return f"a float in [{self.minimum:g}, {self.maximum:g}] (not NaN)"
        if self.minimum is not None:
            relation = ">" if self.exclusive else ">="
            return f"a float {relation} {self.minimum:g} (not NaN)"
        return f"a {self.kind.lower()}"

    def check(self, op: str, value: Any) -> str | int | float:
        """The value, normalised (bytes → str, bool → int, int → float), or AttributeValueError."""
        if self.kind is AttrKind.STRING:
            if isinstance(value, bytes):
                value = value.decode("utf-8", errors="replace")
            if not isinstance(value, str):
                raise self._wrong_type(op, "a string", value)
        elif self.kind is AttrKind.INT:
            if isinstance(value, np.integer):
                value = int(value)
            if not isinstance(value, int):
                raise self._wrong_type(op, "an int", value)
            value = int(value)
        else:
            if isinstance(value, (np.floating, np.integer)):
                value = float(value)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self._wrong_type(op, "a float", value)
            value = float(value)
            if math.isnan(value) or not self.in_range(value):
                raise messages.ATTRIBUTE_VALUE(
                    op, attribute=self.name, valid=self.rule(), value=value
                )
            return value
        if self.choices is not None and value not in self.choices:
            raise messages.ATTRIBUTE_VALUE(op, attribute=self.name, valid=self.rule(), value=value)
        return self.enum(value) if self.enum is not None else value

    def _wrong_type(self, op: str, expected: str, value: Any) -> Exception:
        return messages.ATTRIBUTE_PYTHON_TYPE(
            op, attribute=self.name, expected=expected, type_name=type(value).__name__
        )


def _reduction(choices: Sequence[Reduction]) -> AttributeSpec:
    return AttributeSpec(
        name="reduction",
        kind=AttrKind.STRING,
        default=Reduction.MEAN.value,
        doc="How the loss was reduced: " + ", ".join(c.value for c in choices) + ".",
        choices=tuple(c.value for c in choices),
        aclnn_codes=tuple(c.aclnn_code for c in choices),
        enum=Reduction,
    )


LOG_TARGET = AttributeSpec(
    name="log_target",
    kind=AttrKind.INT,
    default=0,
    doc="1 when target holds log-probabilities.",
    choices=(0, 1),
)
BETA = AttributeSpec(
    name="beta",
    kind=AttrKind.FLOAT,
    default=1.0,
    doc="Threshold between the quadratic and the linear part; 0 gives the L1 gradient.",
    minimum=0.0,
)
DELTA = AttributeSpec(
    name="delta",
    kind=AttrKind.FLOAT,
    default=1.0,
    doc="Threshold between the quadratic and the linear part of the Huber loss.",
    minimum=0.0,
    exclusive=True,
)


IGNORE_INDEX = AttributeSpec(
    name="ignore_index",
    kind=AttrKind.INT,
    default=-100,
    doc="A target value whose element contributes nothing (its gradient is 0).",
)


LABEL_SMOOTHING = AttributeSpec(
    name="label_smoothing",
    kind=AttrKind.FLOAT,
    default=0.0,
    doc="How much of the target's mass is spread evenly over the classes, in [0, 1].",
    minimum=0.0,
    maximum=1.0,
)


# --------------------------------------------------------------------------- operators


class Broadcast(StrEnum):
    """How an input's shape enters the iteration space (docs/operators.md, "Shapes")."""

    BASE = "base"
    """Broadcast with the operator's other BASE inputs into B (self and target, or self)."""
    ENLARGES = "enlarges"
    """Broadcasts with B like any operand: the formula runs over broadcast(input, B)."""
    FITS = "fits"
    """Must broadcast to B without enlarging it."""


class InputKind(StrEnum):
    """What an input holds: values of one of the four float types, or class indices."""

    FLOAT = "float"
    CLASS_INDEX = "class_index"
    """int64 or int32 class indices (the classification operators' target)."""


class ShapeRule(StrEnum):
    """How an operator's input shapes relate (docs/operators.md, "Shapes")."""

    BROADCAST = "broadcast"
    """numpy broadcasting by each input's Broadcast: the elementwise operators."""
    CLASSES = "classes"
    """self is [N, C, d1, ...] (or [C]): the class dimension is 1 (0 for [C]), target has
    self's shape without it, weight is [C], one-element inputs have one element."""


@dataclass(frozen=True)
class InputSpec:
    """One input of an operator: its ONNX name, whether it may be absent (ONNX's convention:
    an empty name, or a trailing input left out), how it broadcasts, and its aclnn name."""

    name: str
    broadcast: Broadcast
    doc: str
    optional: bool = False
    aclnn: str = ""  # CANN's parameter name (gradOutput, weightOptional, ...)
    kind: InputKind = InputKind.FLOAT


def _input(name: str, broadcast: Broadcast, doc: str, aclnn: str, optional: bool = False):
    return InputSpec(name, broadcast, doc, optional, aclnn)


GRAD_OUTPUT_FITS = _input(
    "grad_output", Broadcast.FITS, "Gradient of the loss; broadcasts to B.", "gradOutput"
)
GRAD_OUTPUT_ENLARGES = _input(
    "grad_output",
    Broadcast.ENLARGES,
    "Gradient of the loss; broadcasts with B (the result takes the broadcast shape).",
    "gradOutput",
)
SELF = _input("self", Broadcast.BASE, "The loss function's input.", "self")
TARGET = _input("target", Broadcast.BASE, "The loss function's target.", "target")
TARGET_FITS = _input(
    "target", Broadcast.FITS, "The loss function's target; broadcasts to self.", "target"
)
WEIGHT = _input(
    "weight",
    Broadcast.FITS,
    "Optional weight of each element's loss; broadcasts to self (absent: 1).",
    "weightOptional",
    optional=True,
)
POS_WEIGHT = _input(
    "pos_weight",
    Broadcast.FITS,
    "Optional weight of the positive examples, usually one per class (the last dimension); "
    "broadcasts to self (absent: 1).",
    "posWeightOptional",
    optional=True,
)


CLASS_GRAD_OUTPUT = InputSpec(
    "grad_output",
    Broadcast.FITS,
    "Gradient of the loss: target's shape for reduction none with a batch, else one element.",
    aclnn="gradOutput",
)
CLASS_SELF = InputSpec(
    "self", Broadcast.BASE, "The log-probabilities: [N, C, d1, ...], or [C].", aclnn="self"
)
CLASS_TARGET = InputSpec(
    "target",
    Broadcast.FITS,
    "The class of each element: self's shape without the class dimension (int64 or int32).",
    aclnn="target",
    kind=InputKind.CLASS_INDEX,
)
TOTAL_WEIGHT = InputSpec(
    "total_weight",
    Broadcast.FITS,
    "One element: the total weight of the kept elements, as the forward returned it.",
    aclnn="totalWeight",
)
CLASS_WEIGHT = InputSpec(
    "weight",
    Broadcast.FITS,
    "Optional weight of each class, [C] (absent: 1).",
    optional=True,
    aclnn="weight",
)


class Scaling(StrEnum):
    """Where the reduction scale enters an operator's formula (docs/level2.md): the order
    PyTorch's own decomposition of the gradient computes in (SoftMarginLossBackward: its
    eager kernel's, since the decomposition cancels), which the formula keeps."""

    GRAD_OUTPUT = "grad_output"
    """ge = grad_output * (1/n) first, then the formula on ge (the KL ops, SmoothL1)."""
    RECIPROCAL = "reciprocal"
    """The formula multiplies by 1/n where its decomposition does."""
    DIVISOR = "divisor"
    """The formula divides by n where its decomposition does: its value at the end (the
    binary cross entropies), or grad_output first (L1LossBackward, autograd's MeanBackward)."""


@dataclass(frozen=True)
class OperatorSpec:
    """One operator: names, inputs, attributes, and which shape and type its result takes."""

    name: str  # ONNX op_type
    mnemonic: str  # snake_case: dialect op name, kernel and file names
    output: str  # ONNX output name
    differentiates: str  # "self" or "target": whose shape and type the result takes, or ""
    attributes: tuple[AttributeSpec, ...]
    doc: str
    aclnn: str  # the CANN API this operator follows
    inputs: tuple[InputSpec, ...] = (GRAD_OUTPUT_FITS, SELF, TARGET)
    since_version: int = 1  # the ai.lossgrad opset version that introduced the operator
    scaling: Scaling = Scaling.GRAD_OUTPUT
    shape_rule: ShapeRule = ShapeRule.BROADCAST
    class_ranks: tuple[int, ...] = ()  # ShapeRule.CLASSES: the ranks self may have
    min_classes: int = 0  # ShapeRule.CLASSES: the fewest classes self may have

    def __post_init__(self) -> None:
        names = [i.name for i in self.inputs]
        if tuple(names[:3]) != INPUT_NAMES:
            raise ValueError(f"{self.name}: the inputs start with {', '.join(INPUT_NAMES)}")
        required = [not i.optional for i in self.inputs]
        if required != sorted(required, reverse=True):
            raise ValueError(f"{self.name}: optional inputs come after the required ones")
        if not self.base_inputs or self.base_inputs[0] != "self":
            raise ValueError(f"{self.name}: B is the broadcast of self (and target)")
        if (self.shape_rule is ShapeRule.CLASSES) != bool(self.class_ranks):
            raise ValueError(f"{self.name}: class_ranks go with the classes shape rule")

    @property
    def has_classes(self) -> bool:
        """Whether the operator follows the classes shape rule (a class-index target)."""
        return self.shape_rule is ShapeRule.CLASSES

    def class_dim(self, self_rank: int) -> int:
        """The class dimension of a self of this rank: 1, or 0 for the no-batch [C]."""
        return 1 if self_rank >= 2 else 0

    @property
    def reductions(self) -> tuple[Reduction, ...]:
        return tuple(Reduction(c) for c in self.attribute("reduction").choices or ())

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs)

    @property
    def optional_inputs(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.optional)

    def input(self, name: str) -> InputSpec:
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(name)

    @property
    def base_inputs(self) -> tuple[str, ...]:
        """The inputs whose broadcast is B."""
        return tuple(i.name for i in self.inputs if i.broadcast is Broadcast.BASE)

    @property
    def broadcast_name(self) -> str:
        """How messages name B: `broadcast(self, target)`, or `self` for B = self."""
        base = self.base_inputs
        return base[0] if len(base) == 1 else f"broadcast({', '.join(base)})"

    @property
    def grad_output_may_enlarge(self) -> bool:
        """SmoothL1LossBackward broadcasts grad_output too; the KL ops must not grow B."""
        return self.input("grad_output").broadcast is Broadcast.ENLARGES

    @property
    def sums_result(self) -> bool:
        """Whether the result may be summed back to the differentiated operand's shape (the
        KL ops; an operator whose other inputs all fit into self never sums)."""
        if not self.differentiates:
            return False
        return any(
            i.name != self.differentiates and i.broadcast is not Broadcast.FITS for i in self.inputs
        )

    def result_type(self, types: Mapping[str, FloatType]) -> FloatType:
        """The result's element type for inputs of `types` (keyed by the present inputs'
        names): the differentiated operand's, else the promotion of them all."""
        if self.differentiates:
            return types[self.differentiates]
        return promote_types(types[i.name] for i in self.inputs if i.name in types)

    def attribute(self, name: str) -> AttributeSpec:
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def defaults(self) -> dict[str, str | int | float]:
        return {a.name: a.default for a in self.attributes}


KL_DIV_BACKWARD = OperatorSpec(
    name="KlDivBackward",
    mnemonic="kl_div_backward",
    output="grad_input",
    differentiates="self",
    attributes=(_reduction(list(Reduction)), LOG_TARGET),
    doc="Gradient of kl_div with respect to self: -ge*t, or -ge*exp(t) with log_target.",
    aclnn="aclnnKlDivBackward",
)
KL_DIV_TARGET_BACKWARD = OperatorSpec(
    name="KlDivTargetBackward",
    mnemonic="kl_div_target_backward",
    output="grad_target",
    differentiates="target",
    attributes=(_reduction(list(Reduction)), LOG_TARGET),
    doc=(
        "Gradient of kl_div with respect to target: ge*(ln(t)+1-x) (0 at t == 0), "
        "or (ge*(t-x))*exp(t) + ge*exp(t) with log_target."
    ),
    aclnn="aclnnKlDivTargetBackward",
)
SMOOTH_L1_LOSS_BACKWARD = OperatorSpec(
    name="SmoothL1LossBackward",
    mnemonic="smooth_l1_loss_backward",
    output="grad_input",
    differentiates="",
    attributes=(_reduction([Reduction.NONE, Reduction.MEAN, Reduction.SUM]), BETA),
    doc="Gradient of smooth_l1_loss: ge*clamp((x-t)/beta, -1, 1), or ge*sgn(x-t) when beta == 0.",
    aclnn="aclnnSmoothL1LossBackward",
    inputs=(GRAD_OUTPUT_ENLARGES, SELF, TARGET),
)

_NONE_MEAN_SUM = (Reduction.NONE, Reduction.MEAN, Reduction.SUM)

MSE_LOSS_BACKWARD = OperatorSpec(
    name="MseLossBackward",
    mnemonic="mse_loss_backward",
    output="grad_input",
    differentiates="",
    attributes=(_reduction(list(_NONE_MEAN_SUM)),),
    doc="Gradient of mse_loss: ((x-t)*(2/n))*grad_output (2 for none and sum).",
    aclnn="aclnnMseLossBackward",
    inputs=(GRAD_OUTPUT_ENLARGES, SELF, TARGET),
    since_version=2,
    scaling=Scaling.RECIPROCAL,
)
HUBER_LOSS_BACKWARD = OperatorSpec(
    name="HuberLossBackward",
    mnemonic="huber_loss_backward",
    output="grad_input",
    differentiates="",
    attributes=(_reduction(list(_NONE_MEAN_SUM)), DELTA),
    doc="Gradient of huber_loss: -delta*g, delta*g or (x-t)*g (times 1/n for mean), "
    "as x-t < -delta, > delta or between.",
    aclnn="aclnnHuberLossBackward",
    inputs=(GRAD_OUTPUT_ENLARGES, SELF, TARGET),
    since_version=2,
    scaling=Scaling.RECIPROCAL,
)
SOFT_MARGIN_LOSS_BACKWARD = OperatorSpec(
    name="SoftMarginLossBackward",
    mnemonic="soft_margin_loss_backward",
    output="grad_input",
    differentiates="",
    attributes=(_reduction(list(_NONE_MEAN_SUM)),),
    doc="Gradient of soft_margin_loss: -t*sigmoid(-t*x)*g (times 1/n for mean), computed "
    "without cancelling.",
    aclnn="aclnnSoftMarginLossBackward",
    inputs=(GRAD_OUTPUT_ENLARGES, SELF, TARGET),
    since_version=2,
    scaling=Scaling.RECIPROCAL,
)
BCE_EPSILON = 9.999999960041972e-13
"""The floor of x*(1-x) in BinaryCrossEntropyBackward: 1e-12 rounded to float32, as
PyTorch's kernel (the one autograd runs) holds it, in every compute type; PyTorch's Python
decomposition uses the double 1e-12 instead, which differs in float64 only."""

BINARY_CROSS_ENTROPY_BACKWARD = OperatorSpec(
    name="BinaryCrossEntropyBackward",
    mnemonic="binary_cross_entropy_backward",
    output="grad_input",
    differentiates="self",
    attributes=(_reduction(list(_NONE_MEAN_SUM)),),
    doc="Gradient of binary_cross_entropy: g*(x-t)/max(x*(1-x), 1e-12), times weight, "
    "divided by n for mean.",
    aclnn="aclnnBinaryCrossEntropyBackward",
    inputs=(GRAD_OUTPUT_FITS, SELF, TARGET_FITS, WEIGHT),
    since_version=2,
    scaling=Scaling.DIVISOR,
)
BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD = OperatorSpec(
    name="BinaryCrossEntropyWithLogitsBackward",
    mnemonic="binary_cross_entropy_with_logits_backward",
    output="grad_input",
    differentiates="self",
    attributes=(_reduction(list(_NONE_MEAN_SUM)),),
    doc="Gradient of binary_cross_entropy_with_logits: (sigmoid(x)-t)*g, or "
    "(((p*t+1)-t)*sigmoid(x)-p*t)*g with pos_weight p, times weight, divided by n for mean.",
    aclnn="aclnnBinaryCrossEntropyWithLogitsBackward",
    inputs=(GRAD_OUTPUT_FITS, SELF, TARGET_FITS, WEIGHT, POS_WEIGHT),
    since_version=2,
    scaling=Scaling.DIVISOR,
)

L1_LOSS_BACKWARD = OperatorSpec(
    name="L1LossBackward",
    mnemonic="l1_loss_backward",
    output="grad_input",
    differentiates="",
    attributes=(_reduction(list(_NONE_MEAN_SUM)),),
    doc="Gradient of l1_loss: (g/n)*sgn(x-t) (g for none and sum), with sgn(0) = sgn(NaN) = 0.",
    aclnn="aclnnL1LossBackward",
    inputs=(GRAD_OUTPUT_ENLARGES, SELF, TARGET),
    since_version=3,
    scaling=Scaling.DIVISOR,
)

_CLASS_INPUTS = (CLASS_GRAD_OUTPUT, CLASS_SELF, CLASS_TARGET, TOTAL_WEIGHT, CLASS_WEIGHT)

def _nll(name: str, mnemonic: str, over: str, class_ranks: tuple[int, ...]) -> OperatorSpec:
    """An NLL operator: the two differ in self's ranks and their aclnn name only."""
    return OperatorSpec(
        name=name,
        mnemonic=mnemonic,
        output="grad_input",
        differentiates="self",
        attributes=(_reduction(list(_NONE_MEAN_SUM)), IGNORE_INDEX),
        doc=f"Gradient of nll_loss{over}: w[t]*(-(g/total_weight)) at class t of each kept "
        "element (w[t]*(-g) for none and sum), 0 elsewhere.",
        aclnn=f"aclnn{name}",
        inputs=_CLASS_INPUTS,
        since_version=4,
        scaling=Scaling.DIVISOR,
        shape_rule=ShapeRule.CLASSES,
        class_ranks=class_ranks,
    )


NLL_LOSS_BACKWARD = _nll("NLLLossBackward", "nll_loss_backward", "", (2, 1))
NLL_LOSS_2D_BACKWARD = _nll(
    "NLLLoss2dBackward", "nll_loss2d_backward", " over [N, C, H, W]", (4,)
)

CE_SELF = InputSpec(
    "self",
    Broadcast.BASE,
    "The log-probabilities log_softmax(logits), [N, C].",
    aclnn="logProb",
)
CE_WEIGHT = InputSpec(
    "weight",
    Broadcast.FITS,
    "Optional weight of each class, [C] (absent: 1).",
    optional=True,
    aclnn="weightOptional",
)
CROSS_ENTROPY_LOSS_GRAD = OperatorSpec(
    name="CrossEntropyLossGrad",
    mnemonic="cross_entropy_loss_grad",
    output="grad_input",
    differentiates="self",
    attributes=(_reduction(list(_NONE_MEAN_SUM)), IGNORE_INDEX, LABEL_SMOOTHING),
    doc="Gradient of cross_entropy with respect to the logits, from log_prob: "
    "gl - exp(log_prob)*sum(gl) per row, where gl is the nll term (1-ls)*w[t]*(-s) at "
    "class t plus the smoothing term (ls/C)*w_j*(-s), s = g/D for mean (D the sum of w[t] "
    "over the kept rows), g otherwise; 0 on ignored rows.",
    aclnn="aclnnCrossEntropyLossGrad",
    inputs=(CLASS_GRAD_OUTPUT, CE_SELF, CLASS_TARGET, CE_WEIGHT),
    since_version=5,
    scaling=Scaling.DIVISOR,
    shape_rule=ShapeRule.CLASSES,
    class_ranks=(2,),
    min_classes=1,  # aclnn's C > 0; the gather of a row's weight reads class 0 where invalid
)

OPERATORS: dict[str, OperatorSpec] = {
    op.name: op
    for op in (
        KL_DIV_BACKWARD,
        KL_DIV_TARGET_BACKWARD,
        SMOOTH_L1_LOSS_BACKWARD,
        MSE_LOSS_BACKWARD,
        HUBER_LOSS_BACKWARD,
        SOFT_MARGIN_LOSS_BACKWARD,
        BINARY_CROSS_ENTROPY_BACKWARD,
        BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD,
        L1_LOSS_BACKWARD,
        NLL_LOSS_BACKWARD,
        NLL_LOSS_2D_BACKWARD,
        CROSS_ENTROPY_LOSS_GRAD,
    )
}

BROADCAST_OPERATORS: dict[str, OperatorSpec] = {
    name: op for name, op in OPERATORS.items() if not op.has_classes
}
"""The elementwise operators (ShapeRule.BROADCAST), a view of OPERATORS."""
CLASS_OPERATORS: dict[str, OperatorSpec] = {
    name: op for name, op in OPERATORS.items() if op.has_classes
}
"""The classification operators (ShapeRule.CLASSES), a view of OPERATORS."""

OPSET_VERSION = max(op.since_version for op in OPERATORS.values())
"""The ai.lossgrad domain's current version (ONNX's convention: the domain's version grows
when operators are added; each operator has the `since_version` that introduced it, and a
model's import must be at least that)."""


def opset_version_for(op_types: Iterable[str]) -> int:
    """The smallest ai.lossgrad version that has every one of these operators (1 for none):
    what builders stamp, so that a model of version-1 operators stays a version-1 model."""
    return max((operator(t).since_version for t in op_types), default=1)


def operator(op_type: str) -> OperatorSpec:
    """The spec of an ONNX op_type, or InvalidArgumentError naming the known ones."""
    try:
        return OPERATORS[op_type]
    except KeyError:
        raise messages.UNKNOWN_OPERATOR(str(op_type), operators=", ".join(OPERATORS)) from None


# --------------------------------------------------------------------------- validation


def check_attributes(op: OperatorSpec, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Every attribute of `op`, defaults filled in, values normalised; unknown names rejected."""
    unknown = sorted(set(attrs) - {a.name for a in op.attributes})
    if unknown:
        known = ", ".join(a.name for a in op.attributes)
        raise messages.UNKNOWN_ATTRIBUTE(
            op.name, attribute=unknown[0], operator=op.name, known=known
        )
    return {
        a.name: a.check(op.name, a.default if attrs.get(a.name) is None else attrs[a.name])
        for a in op.attributes
    }


def check_element_type(op: OperatorSpec, argument: str, key: Any) -> FloatType:
    """The FloatType of one input, or ElementTypeError."""
    if key is None:
        raise messages.MISSING_INPUT(op.name, input=argument)
    t = float_type(key)
    if t is None:
        raise messages.ELEMENT_TYPE(
            op.name, input=argument, allowed=ALLOWED_TYPES, type_name=_type_name(key)
        )
    return t


ALLOWED_TYPES = ", ".join(t.name for t in FLOAT_TYPES)
"""The element types a float input takes, as messages list them."""


def _type_name(key: Any) -> str:
    """How a rejected type is named: strings as given (MLIR's "i8" is not numpy's "i8")."""
    if isinstance(key, str):
        return key
    try:
        return str(np.dtype(key))
    except TypeError:
        return str(key)


def check_rank(op: OperatorSpec, argument: str, shape: Shape | None) -> None:
    if shape is not None and len(shape) > MAX_RANK:
        raise messages.RANK(op.name, input=argument, max_rank=MAX_RANK, rank=len(shape))


def broadcast_shapes(op: str, named: Sequence[tuple[str, Shape]]) -> Shape:
    """numpy broadcasting over shapes with symbolic dims.

    A static size other than 1 wins over a symbolic dim (which must then equal it at run
    time); two different symbolic names give an unknown dim (None)."""
    rank = max((len(s) for _, s in named), default=0)
    out: list[Dim] = []
    for axis in range(rank):
        static: Dim = 1
        static_from = ""
        symbolic: set[Dim] = set()
        for name, shape in named:
            j = axis - (rank - len(shape))
            if j < 0:
                continue
            d = shape[j]
            if isinstance(d, int):
                if d == 1:
                    continue
                if static != 1 and d != static:
                    raise messages.NO_BROADCAST(
                        op,
                        first_name=static_from,
                        second_name=name,
                        first_shape=dict(named)[static_from],
                        second_shape=shape,
                        axis=axis - rank,
                        first=static,
                        second=d,
                    )
                static, static_from = d, name
            else:
                symbolic.add(d)
        if static != 1:
            out.append(static)
        elif not symbolic:
            out.append(1)
        elif len(symbolic) == 1:
            out.append(symbolic.pop())
        else:
            out.append(None)
    return tuple(out)


def check_no_enlarge(
    op: OperatorSpec,
    go: Shape,
    b: Shape,
    name: str = "grad_output",
    b_name: str = "broadcast(self, target)",
) -> None:
    """An input that must broadcast to B (named `b_name`) without changing it: grad_output
    of the KL ops, target, weight and pos_weight of the binary cross entropies."""
    if len(go) > len(b):
        raise messages.ENLARGES_RANK(
            op.name, input=name, shape=go, b_name=b_name, b_shape=b, rank=len(go), b_rank=len(b)
        )
    offset = len(b) - len(go)
    for i, d in enumerate(go):
        bd = b[offset + i]
        if isinstance(d, int) and d != 1 and isinstance(bd, int) and d != bd:
            raise messages.ENLARGES_AXIS(
                op.name, input=name, shape=go, b_name=b_name, b_shape=b,
                axis=i - len(go), size=d, b_size=bd,
            )  # fmt: skip


@dataclass(frozen=True)
class TensorInfo:
    """What validation needs of an input: its element type and (possibly unknown) shape."""

    dtype: Any
    shape: Shape | None


@dataclass(frozen=True)
class CheckedCall:
    """A validated call: the types, shapes and attributes every backend compiles from, each
    in its checked form (an attribute of spec's type, the reduction a Reduction; the optional
    inputs given are `present`, the others `absent`). Layers below read it, never check it
    again."""

    op: OperatorSpec
    types: dict[str, FloatType]  # per present input, in the operator's input order
    shapes: dict[str, Shape | None]  # per present input; None = rank unknown
    attrs: dict[str, Any]  # all attributes, defaults applied, checked (check_attributes)
    promoted: FloatType
    compute: FloatType
    result_type: FloatType
    broadcast_shape: Shape | None  # B = broadcast(self, target)
    iteration_shape: Shape | None  # the shape the per-element formula runs over
    result_shape: Shape | None
    divisor: Divisor | None  # what n of the scale 1/n counts; None: nothing is scaled
    index_types: dict[str, IndexType] = field(default_factory=dict)  # class-index inputs

    @property
    def reduction(self) -> Reduction:
        reduction = self.attrs["reduction"]
        assert isinstance(reduction, Reduction), "attrs come from check_attributes"
        return reduction

    @property
    def absent(self) -> tuple[str, ...]:
        """The optional inputs not given, in the operator's input order."""
        return tuple(n for n in self.op.optional_inputs if n not in self.types)

    @property
    def present(self) -> tuple[str, ...]:
        """The inputs given, in the operator's input order (an absent optional input is
        not among them)."""
        return tuple(n for n in self.op.input_names if n in self.types or n in self.index_types)

    @property
    def class_dim(self) -> int:
        """self's class dimension (a classification operator's call)."""
        return self.op.class_dim(len(self.shapes["self"] or ()))

    def in_compute(self, attribute: AttributeSpec) -> float:
        """A FLOAT attribute rounded to the compute type: what every formula judges ("beta
        > 0", "label_smoothing > 0" hold in C, as the kernels compute); its default where
        the operator has no such attribute."""
        return float(self.compute.dtype.type(self.attrs.get(attribute.name, attribute.default)))


# How messages name the broadcast of self and target (its shape is B in docs/operators.md).
BROADCAST_OPERAND = "broadcast(self, target)"


def validate(
    op_type: str, inputs: Mapping[str, TensorInfo | None], attrs: Mapping[str, Any]
) -> CheckedCall:
    """The validation of docs/operators.md, in CANN's order: null, element type, rank,
    broadcast, attributes. `inputs` is keyed by input name; an optional input that is
    missing or None is absent."""
    op = operator(op_type)
    infos: dict[str, TensorInfo] = {}
    for spec_input in op.inputs:
        info = inputs.get(spec_input.name)
        if info is not None:
            infos[spec_input.name] = info
        elif not spec_input.optional:
            raise messages.MISSING_INPUT(op.name, input=spec_input.name)
    extra = sorted(set(inputs) - set(op.input_names))
    if extra:
        raise messages.UNKNOWN_INPUT(
            op.name, input=extra[0], operator=op.name, inputs=", ".join(op.input_names)
        )
    types: dict[str, FloatType] = {}
    index_types: dict[str, IndexType] = {}
    for n, info in infos.items():
        if op.input(n).kind is InputKind.CLASS_INDEX:
            index_types[n] = check_index_type(op, n, info.dtype)
        else:
            types[n] = check_element_type(op, n, info.dtype)
    shapes = {n: info.shape for n, info in infos.items()}
    for n in shapes:
        check_rank(op, n, shapes[n])
    if op.has_classes:
        check_same_types(op, types)
        checked_attrs = check_attributes(op, attrs)
        check_class_shapes(op, shapes, checked_attrs["reduction"])
        b = it = shapes["self"]
    else:
        b, it = _iteration_space(op, shapes)
        checked_attrs = check_attributes(op, attrs)
    promoted = promote_types(types.values())
    result = shapes[op.differentiates] if op.differentiates else it
    result_type = op.result_type(types)
    # The one place the rule is applied: every layer reads the resolved divisor from here.
    divisor = divisor_rule(checked_attrs["reduction"], len(shapes["self"] or ()), op)
    return CheckedCall(
        op=op,
        types=types,
        shapes=shapes,
        attrs=checked_attrs,
        promoted=promoted,
        compute=compute_type(promoted),
        result_type=result_type,
        broadcast_shape=b,
        iteration_shape=it,
        result_shape=result,
        divisor=divisor,
        index_types=index_types,
    )


ALLOWED_INDEX_TYPES = ", ".join(t.name for t in INDEX_TYPES)
"""The element types a class-index input takes, as messages list them."""


def check_index_type(op: OperatorSpec, argument: str, key: Any) -> IndexType:
    """The IndexType of a class-index input, or ElementTypeError."""
    t = index_type(key)
    if t is None:
        raise messages.ELEMENT_TYPE(
            op.name, input=argument, allowed=ALLOWED_INDEX_TYPES, type_name=_type_name(key)
        )
    return t


def check_same_types(op: OperatorSpec, types: Mapping[str, FloatType]) -> None:
    """A classification operator's float inputs all have self's type (aclnn's rule; PyTorch
    asks the same of weight, total_weight and grad_output)."""
    for name, t in types.items():
        if t != types["self"]:
            raise messages.SAME_TYPE(
                op.name, input=name, expected=types["self"].name, type_name=t.name
            )


def _dims_agree(a: Shape, b: Shape) -> bool:
    """Equal ranks, and equal sizes where both are static (a symbolic size is checked when
    the kernel runs, as a dynamic size on a shared loop)."""
    return len(a) == len(b) and all(
        not (isinstance(x, int) and isinstance(y, int)) or x == y
        for x, y in zip(a, b, strict=True)
    )


def _one_element(shape: Shape) -> bool:
    return len(shape) <= 1 and all(not isinstance(d, int) or d == 1 for d in shape)


def check_class_shapes(
    op: OperatorSpec, shapes: Mapping[str, Shape | None], reduction: Reduction
) -> None:
    """The classes shape rule, in input order: self's rank, then each input against self
    (an input of unknown rank is checked when the kernel runs)."""
    x = shapes["self"]
    if x is None:
        return
    ranks = " or ".join(f"rank {r}" for r in op.class_ranks)
    if len(x) not in op.class_ranks:
        raise messages.CLASS_SHAPE(op.name, input="self", shape=x, expected=ranks, self_shape=x)
    c = op.class_dim(len(x))
    if isinstance(x[c], int) and x[c] < op.min_classes:
        expected = f"C >= {op.min_classes} along dimension {c}"
        raise messages.CLASS_SHAPE(op.name, input="self", shape=x, expected=expected, self_shape=x)
    rows = x[:c] + x[c + 1 :]
    per_element = reduction is Reduction.NONE and len(x) >= 2
    expected: dict[str, tuple[str, Callable[[Shape], bool]]] = {
        "target": (f"{list(rows)} (self without dimension {c})", lambda s: _dims_agree(s, rows)),
        "grad_output": (
            (f"{list(rows)} (target's, for reduction none)", lambda s: _dims_agree(s, rows))
            if per_element
            else ("one element", _one_element)
        ),
        "total_weight": ("one element", _one_element),
        "weight": (f"[{x[c]}] (one per class)", lambda s: _dims_agree(s, (x[c],))),
    }
    for name, shape in shapes.items():
        if name in expected and shape is not None and not expected[name][1](shape):
            raise messages.CLASS_SHAPE(
                op.name, input=name, shape=shape, expected=expected[name][0], self_shape=x
            )


ABSENT_DIM = "absent"
"""What an operand of lower rank has on a leading axis of the iteration space."""


def dim_at(shape: Shape, axis: int, rank: int) -> Dim:
    """`shape`'s dimension on `axis` of a rank-`rank` iteration space (numpy's right
    alignment), or ABSENT_DIM."""
    j = axis - (rank - len(shape))
    return shape[j] if j >= 0 else ABSENT_DIM


def broadcast_dims(op: OperatorSpec, shapes: Mapping[str, Shape]) -> dict[str, tuple[bool, ...]]:
    """Per given input and dimension, whether a kernel compiled by signature reads it as a
    broadcast 1: a static 1 where another input that spans the iteration space (a BASE or
    ENLARGES one) has a dimension other than 1. Every other dimension is dynamic there, and a
    dynamic dimension is never broadcast (docs/level2.md)."""
    spans = {i.name for i in op.inputs if i.broadcast is not Broadcast.FITS}
    rank = max((len(s) for s in shapes.values()), default=0)
    return {
        name: tuple(
            d == 1
            and any(
                dim_at(other, rank - len(shape) + j, rank) not in (1, ABSENT_DIM)
                for other_name, other in shapes.items()
                if other_name != name and other_name in spans
            )
            for j, d in enumerate(shape)
        )
        for name, shape in shapes.items()
    }


def _iteration_space(
    op: OperatorSpec, shapes: Mapping[str, Shape | None]
) -> tuple[Shape | None, Shape | None]:
    """(B, the iteration space), checking every input's broadcasting in input order: B is the
    broadcast of the BASE inputs; an ENLARGES input broadcasts with it, a FITS input must fit
    into B. None where a needed rank is unknown."""
    base = [(n, shapes[n]) for n in op.base_inputs]
    if any(shape is None for _, shape in base):
        return None, None
    named = [(n, shape) for n, shape in base if shape is not None]
    b = named[0][1] if len(named) == 1 else broadcast_shapes(op.name, named)
    b_name = op.broadcast_name
    it: Shape | None = b
    for spec_input in op.inputs:
        shape = shapes.get(spec_input.name)
        if spec_input.broadcast is Broadcast.ENLARGES:
            it = (
                None
                if shape is None or it is None
                else broadcast_shapes(op.name, [(spec_input.name, shape), (b_name, it)])
            )
        elif spec_input.broadcast is Broadcast.FITS and shape is not None:
            broadcast_shapes(op.name, [(spec_input.name, shape), (b_name, b)])
            check_no_enlarge(op, shape, b, spec_input.name, b_name)
    return b, it


class Divisor(StrEnum):
    """What n of the reduction scale s = 1/n counts; the values are how messages and
    generated code name it."""

    NUMEL = "numel(broadcast(self, target))"
    BATCH = "self.shape[0]"
    TOTAL_WEIGHT = "total_weight"
    """The NLL operators' mean: the total_weight input's value."""
    KEPT_WEIGHT = "sum(weight[target]) over the kept rows"
    """CrossEntropyLossGrad's mean: computed from target and weight (the kept rows' count
    without a weight), a reduction over the batch (docs/level2.md)."""


def divisor_rule(
    reduction: Reduction | str, self_rank: int, op: OperatorSpec | None = None
) -> Divisor | None:
    """Which n scales a call: numel(B) for mean, self.shape[0] for batchmean; None where
    nothing is scaled (none, sum, batchmean of a 0-d self). `validate` applies it once per
    call (CheckedCall.divisor); lower-lossgrad records the result in level 2
    (`lossgrad.divisor`), where every backend reads it."""
    reduction = Reduction(reduction)
    if reduction is Reduction.MEAN and op is not None and op.has_classes:
        given = "total_weight" in op.input_names
        return Divisor.TOTAL_WEIGHT if given else Divisor.KEPT_WEIGHT
    if reduction is Reduction.MEAN:
        return Divisor.NUMEL
    if reduction is Reduction.BATCHMEAN and self_rank > 0:
        return Divisor.BATCH
    return None


def divisor_count(
    divisor: Divisor | str | None, self_shape: Sequence[int], b: Sequence[int]
) -> int | None:
    """The n of a resolved divisor for concrete shapes (None: nothing is scaled)."""
    if divisor is None:
        return None
    if Divisor(divisor) in (Divisor.TOTAL_WEIGHT, Divisor.KEPT_WEIGHT):
        raise ValueError(f"the divisor {divisor} is a value, not a count of the shapes")
    if Divisor(divisor) is Divisor.NUMEL:
        return math.prod(b)
    return self_shape[0]


def divisor_scale(
    divisor: Divisor | str | None, self_shape: Sequence[int], b: Sequence[int]
) -> float:
    """The scale s = 1/n for concrete shapes (inf when n is 0: nothing is scaled)."""
    n = divisor_count(divisor, self_shape, b)
    if n is None:
        return 1.0
    return math.inf if n == 0 else 1.0 / n


# --------------------------------------------------------------------------- documentation


def operator_table_markdown() -> str:
    """The README's operator table; a test compares the README with this text."""
    lines = [
        "| operator | output | attribute | ONNX type | default | valid values |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for op in OPERATORS.values():
        for a in op.attributes:
            default = f'"{a.default}"' if a.kind is AttrKind.STRING else repr(a.default)
            lines.append(
                f"| {op.name} | {op.output} | {a.name} | {a.kind.value} | {default} | {a.rule()} |"
            )
    return "\n".join(lines)
