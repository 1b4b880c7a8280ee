"""What an SSA value of level-2 IR becomes in the ONNX graph being built.

Tensors are ONNX value names. Index arithmetic (`tensor.dim`, `arith.muli`), scalar
constants, `tensor.empty` and `linalg.fill` stay symbolic until something needs them as a
tensor: a constant that only initialises an accumulator, or a size that only feeds the scale,
then costs no node or exactly the node it needs (`Size` for a whole tensor's element count)."""

from __future__ import annotations

from dataclasses import dataclass

AxisSet = frozenset[int]


@dataclass(frozen=True)
class Tensor:
    """A materialised ONNX value.

    Outside a linalg.generic body, `rank` is the tensor's rank and `axes` is empty. Inside a
    body, the value is aligned to the trailing `rank` axes of the iteration space (ONNX
    broadcasting aligns trailing dimensions) and `axes` are the iteration axes along which it
    has the full extent; along every other axis within its rank its size is 1.

    `shape`, when known, is the value's run-time shape in terms of other values' sizes (the
    result of a linalg.generic has its output's shape, which the size check guarantees)."""

    name: str
    rank: int
    axes: AxisSet = frozenset()
    shape: tuple[ShapeEntry, ...] | None = None


@dataclass(frozen=True)
class DimOf:
    """Dimension `dim` of the ONNX value `tensor` (which has rank `rank`)."""

    tensor: str
    rank: int
    dim: int


@dataclass(frozen=True)
class IndexProduct:
    """An index value: `factor` times the product of run-time dimensions."""

    factor: int
    dims: tuple[DimOf, ...] = ()

    def times(self, other: IndexProduct) -> IndexProduct:
        return IndexProduct(self.factor * other.factor, self.dims + other.dims)

    @property
    def single_dim(self) -> DimOf | None:
        """The dimension this value is, when it is exactly one run-time dimension."""
        return self.dims[0] if self.factor == 1 and len(self.dims) == 1 else None


@dataclass(frozen=True)
class ScalarConstant:
    """An `arith.constant` scalar; `elem` is its ONNX element type code."""

    value: float | int
    elem: int


ShapeEntry = int | DimOf
"""A dimension of a shape: static, or read from a value at run time."""


@dataclass(frozen=True)
class EmptyTensor:
    """`tensor.empty`: only a shape and an element type; its contents are never read."""

    shape: tuple[ShapeEntry, ...]
    elem: int


@dataclass(frozen=True)
class FilledTensor:
    """`linalg.fill`: `fill` (a scalar) broadcast to the shape of `empty`."""

    fill: Tensor | ScalarConstant
    empty: EmptyTensor


@dataclass(frozen=True)
class Accumulator:
    """The output block argument of a reduction generic; legal only in `addf %acc, %v`."""


Value = Tensor | IndexProduct | ScalarConstant | EmptyTensor | FilledTensor | Accumulator
