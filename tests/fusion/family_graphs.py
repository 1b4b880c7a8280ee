"""The loss family's gradients with reduction mean, written by hand as PyTorch 2.13's exporter
writes them for a dynamic batch (the mean's n counted from Shape at run time), with the way
the count is taken as the knob: through a Cast of the shape vector to another type and back.

    model = build("mse", (300, 3), cast=TensorProto.INT8)

The exporter counts `Mul(Squeeze(Shape(x, 0, 1)), 3)`; a hand-written graph (or another
exporter) may take `ReduceProd(Shape(x))`, and both may pass a Cast. Whether the count
survives the Cast decides whether the graph divides by n (count_casts.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPS = {
    "mse": "MseLossBackward",
    "huber": "HuberLossBackward",
    "soft_margin": "SoftMarginLossBackward",
    "bce": "BinaryCrossEntropyBackward",
    "bce_logits": "BinaryCrossEntropyWithLogitsBackward",
    "l1": "L1LossBackward",
}
DELTA = 0.5  # HuberLossBackward's threshold in these graphs


class _Nodes:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def add(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{op.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def const(self, value: float | list[int], dtype: Any = np.float32) -> str:
        name = f"c_{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name


def _count(g: _Nodes, shape: tuple[int | str, ...], cast: int | None, by: str) -> str:
    """n of x's shape as a float32: ReduceProd of the shape vector ("prod"), or the
    exporter's first size times the static product of the others ("exporter"), with the
    shape vector Cast to `cast` and back to int64 on the way."""
    vector = g.add("Shape", ["x"], **({} if by == "prod" else {"start": 0, "end": 1}))
    if cast is not None:
        vector = g.add("Cast", [g.add("Cast", [vector], to=cast)], to=TensorProto.INT64)
    if by == "prod":
        n = g.add("ReduceProd", [vector], keepdims=0)
    else:
        rest = int(np.prod([d for d in shape[1:] if isinstance(d, int)]))
        n = g.add("Mul", [g.add("Squeeze", [vector]), g.const(rest, np.int64)])
    return g.add("Cast", [n], to=TensorProto.FLOAT)


def _gradient(g: _Nodes, loss: str, n: str) -> str:
    """The exporter's form of the loss's gradient with respect to x, mean over n."""
    if loss == "mse":
        return g.add("Mul", [g.add("Sub", ["x", "t"]), g.add("Div", [g.const(2.0), n])])
    if loss == "huber":
        f = g.add("Div", [g.const(1.0), n])
        d = g.add("Sub", ["x", "t"])
        delta = g.const(DELTA)
        above = g.add(
            "Where", [g.add("Greater", [d, delta]), g.add("Mul", [f, delta]), g.add("Mul", [d, f])]
        )
        below = g.add("Mul", [g.add("Neg", [f]), delta])
        return g.add("Where", [g.add("Less", [d, g.const(-DELTA)]), below, above])
    if loss == "soft_margin":
        sigmoid = g.add("Sigmoid", [g.add("Mul", ["t", "x"])])
        return g.add("Div", [g.add("Mul", ["t", g.add("Sub", [sigmoid, g.const(1.0)])]), n])
    if loss == "bce":
        product = g.add("Mul", ["x", g.add("Sub", [g.const(1.0), "x"])])
        clamped = g.add("Clip", [product, g.const(1e-12)])
        return g.add("Div", [g.add("Div", [g.add("Sub", ["x", "t"]), clamped]), n])
    if loss == "bce_logits":
        return g.add("Div", [g.add("Sub", [g.add("Sigmoid", ["x"]), "t"]), n])
    if loss == "l1":  # (g/n)*sign(d) with the seed g = 1
        sign = g.add("Sign", [g.add("Sub", ["x", "t"])])
        return g.add("Mul", [sign, g.add("Div", [g.const(1.0), n])])
    raise ValueError(loss)


def build(
    loss: str,
    shape: tuple[int | str, ...],
    cast: int | None = None,
    by: str = "prod",
) -> onnx.ModelProto:
    """The gradient of `loss` (mean) for x and t of `shape` (a str is a named size), with
    the count's shape vector cast to `cast` and back (None: no Cast); output 'y'."""
    g = _Nodes()
    y = _gradient(g, loss, _count(g, shape, cast, by))
    g.nodes.append(helper.make_node("Identity", [y], ["y"]))
    inputs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, list(shape)) for v in "xt"]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))
    graph = helper.make_graph(g.nodes, loss, inputs, [output], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def attributes(loss: str) -> dict[str, Any]:
    return {"reduction": "mean", **({"delta": DELTA} if loss == "huber" else {})}


def feeds(loss: str, shape: tuple[int, ...], seed: int = 0) -> dict[str, np.ndarray]:
    """Values that exercise every branch: probabilities for bce's x, |d| both sides of delta."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.0, shape).astype(np.float32)
    t = rng.normal(0.0, 1.0, shape).astype(np.float32)
    if loss == "bce":
        x = rng.uniform(0.01, 0.99, shape).astype(np.float32)
        t = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    if loss == "bce_logits":
        t = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    return {"x": x, "t": t}
