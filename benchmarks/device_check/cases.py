"""The benchmark set: every elementwise operator of the spec (spec.BROADCAST_OPERATORS) in
float32 and bfloat16 at 2^16 to 2^24 elements, with reduction mean and a 0-d grad_output
(bench_ort_native's cells), and the classification operators at bench_classes.py's [N, C]
shapes (its calls: a weight, ignored rows). Inputs are drawn from a seed on whichever
machine needs them, so that no large array travels; a digest of them in the manifest shows
that both machines drew the same ones."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.class_inputs import SHAPES, class_attributes, class_inputs
from benchmarks.device_check import bundle
from lossgrad_compiler import spec

SIZES = (16, 18, 20, 22, 24)
"""log2 of the element counts of the device run."""
TYPES = ("float32", "bfloat16")
SEED = 0
CLASS_SHAPES = SHAPES
"""[N, C] of the classification cases (class_set orders them)."""
CLASS_OPS = ("CrossEntropyLossGrad", "NLLLossBackward")
"""The classification operators timed: NLLLoss2dBackward runs NLL's body over [N, C, H, W]."""

ATTRS: dict[str, dict[str, Any]] = {
    "KlDivBackward": {"reduction": "mean", "log_target": 0},
    "KlDivTargetBackward": {"reduction": "mean", "log_target": 0},
    "SmoothL1LossBackward": {"reduction": "mean", "beta": 0.5},
    "HuberLossBackward": {"reduction": "mean", "delta": 1.0},
    "MseLossBackward": {"reduction": "mean"},
    "SoftMarginLossBackward": {"reduction": "mean"},
    "BinaryCrossEntropyBackward": {"reduction": "mean"},
    "BinaryCrossEntropyWithLogitsBackward": {"reduction": "mean"},
    "L1LossBackward": {"reduction": "mean"},
}
"""The attributes of each operator's benchmark signature (bench_ort_native.ATTRS)."""

Draw = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


def _normal(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(0, 1, n), rng.normal(0, 1, n)


def _positive_target(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(0, 1, n), rng.uniform(0.05, 3.0, n)


def _probabilities(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.uniform(0.01, 0.99, n), rng.uniform(0.0, 1.0, n)


def _labels(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(0, 1, n), rng.uniform(0.0, 1.0, n)


def _signs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(0, 1, n), np.where(rng.random(n) < 0.5, -1.0, 1.0)


DOMAINS: dict[str, Draw] = {
    "KlDivBackward": _normal,
    "KlDivTargetBackward": _positive_target,  # ln t
    "SmoothL1LossBackward": _normal,
    "HuberLossBackward": _normal,
    "MseLossBackward": _normal,
    "SoftMarginLossBackward": _signs,
    "BinaryCrossEntropyBackward": _probabilities,  # self a probability, target in [0, 1]
    "BinaryCrossEntropyWithLogitsBackward": _labels,
    "L1LossBackward": _normal,
}
"""(self, target) of each operator, drawn in its domain (bench_ort_native.make_inputs)."""


@dataclass(frozen=True)
class BenchmarkCase:
    op: str
    type_name: str
    log2n: int
    seed: int = SEED

    @property
    def name(self) -> str:
        return f"{self.op} {self.type_name} 2^{self.log2n}"

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(ATTRS[self.op])

    @property
    def size_fields(self) -> dict[str, int]:
        """What a manifest entry records of its size (drawn_case reads it back)."""
        return {"log2n": self.log2n}

    def inputs(self) -> dict[str, np.ndarray]:
        """grad_output (0-d, 1), self and target, in the operator's order."""
        dtype = spec.float_type(self.type_name).dtype
        x, t = DOMAINS[self.op](np.random.default_rng(self.seed), 1 << self.log2n)
        return {
            "grad_output": np.array(1.0, dtype),
            "self": x.astype(dtype),
            "target": t.astype(dtype),
        }


def benchmark_set(
    sizes: tuple[int, ...] = SIZES, types: tuple[str, ...] = TYPES
) -> list[BenchmarkCase]:
    """Every elementwise operator of the spec × type × size, smallest sizes first. An
    operator without an input domain here (a new one) stops the set, so that make test says
    what to add. The classification operators' inputs are no (self, target) pair of one
    shape drawn from a domain: class_set has them."""
    missing = [op for op in spec.BROADCAST_OPERATORS if op not in DOMAINS or op not in ATTRS]
    if missing:
        raise KeyError(f"the device check has no inputs for {missing}: add them to {__name__}")
    return [
        BenchmarkCase(op, type_name, log2n)
        for log2n in sorted(sizes)
        for type_name in types
        for op in spec.BROADCAST_OPERATORS
    ]


@dataclass(frozen=True)
class ClassCase:
    """A classification call of bench_classes.py at [rows, classes]."""

    op: str
    type_name: str
    rows: int
    classes: int
    seed: int = SEED

    @property
    def name(self) -> str:
        return f"{self.op} {self.type_name} {self.rows}x{self.classes}"

    @property
    def attrs(self) -> dict[str, Any]:
        return class_attributes(self.op)

    @property
    def size_fields(self) -> dict[str, int]:
        return {"rows": self.rows, "classes": self.classes}

    def inputs(self) -> dict[str, np.ndarray]:
        """In the operator's order: grad_output (0-d), self, target (int64), then its
        optional inputs."""
        dtype = spec.float_type(self.type_name).dtype
        return class_inputs(self.op, (self.rows, self.classes), dtype, self.seed)


def class_set(
    shapes: tuple[tuple[int, int], ...] = CLASS_SHAPES, types: tuple[str, ...] = TYPES
) -> list[ClassCase]:
    """CLASS_OPS × type × [N, C], smallest shapes first."""
    return [
        ClassCase(op, type_name, rows, classes)
        for rows, classes in sorted(shapes, key=lambda shape: shape[0] * shape[1])
        for type_name in types
        for op in CLASS_OPS
    ]


def drawn_case(entry: bundle.CaseEntry) -> BenchmarkCase | ClassCase:
    """The case a manifest entry names: a classification case where it has classes."""
    if entry.classes:
        return ClassCase(entry.op, entry.type_name, entry.rows, entry.classes, entry.seed)
    return BenchmarkCase(entry.op, entry.type_name, entry.log2n, entry.seed)


def digest(arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 over the names, dtypes, shapes and bytes of the arrays, in order."""
    h = hashlib.sha256()
    for name, array in arrays.items():
        a = np.require(array, requirements="C")  # ascontiguousarray makes 0-d 1-d
        h.update(f"{name}:{a.dtype.name}:{a.shape}:".encode())
        h.update(a.tobytes())
    return h.hexdigest()
