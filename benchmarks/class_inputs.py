"""The calls the classification benchmarks make: bench_classes.py's, and the device check's
benchmark set, whose inputs the GPU machine draws from the seed. numpy and spec only: the
GPU machine has neither ONNX Runtime nor xDSL."""

from __future__ import annotations

from typing import Any

import numpy as np

from lossgrad_compiler import spec

SHAPES: tuple[tuple[int, int], ...] = ((4096, 32000), (256, 10))
"""[N, C]: a language model's rows and vocabulary, and a small classifier's."""
IGNORED = int(spec.IGNORE_INDEX.default)
"""The ignore_index every seventh row's target holds (the default, PyTorch's too)."""


def class_inputs(
    op: str, shape: tuple[int, int], dtype: np.dtype, seed: int = 0
) -> dict[str, np.ndarray]:
    """A mean call with a weight and every seventh row ignored, in the operator's input
    order; cross entropy's self is log-probabilities, NLL's total weight is the forward's."""
    rng = np.random.default_rng(seed)
    n, c = shape
    target = rng.integers(0, c, n)
    target[::7] = IGNORED
    weight = rng.uniform(0.5, 1.5, c)
    kept = target[target != IGNORED]
    x = rng.standard_normal(shape)
    arrays = {"grad_output": np.array(1.0), "self": x, "target": target}
    if "total_weight" in spec.operator(op).input_names:
        arrays["total_weight"] = np.array(weight[kept].sum())
    else:
        arrays["self"] = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    arrays["weight"] = weight
    return {k: v.astype(np.int64 if k == "target" else dtype) for k, v in arrays.items()}


def class_attributes(op: str, label_smoothing: float = 0.0) -> dict[str, Any]:
    """reduction mean, ignore_index the default, and cross entropy's label smoothing."""
    names = {a.name for a in spec.operator(op).attributes}
    smoothing = {"label_smoothing": label_smoothing} if "label_smoothing" in names else {}
    return {"reduction": "mean", **smoothing}
