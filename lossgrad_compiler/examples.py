"""The example model of lossgrad-demo: the loss-gradient part of one training step.

A student classifier is distilled from a teacher (KL divergence on log-probabilities), a
learnable class prior is fitted to the student's predictions (KL with respect to the
target), and a box-regression head is trained with a smooth L1 loss. The batch dimension
is symbolic ("N"), so one model serves every batch size; targets broadcast over the batch,
and the inputs mix float32, float16 and bfloat16.

    node          op                    reduction   other          result
    kl_student    KlDivBackward         batchmean   log_target=1   float32[N,10]
    kl_prior      KlDivTargetBackward   mean        log_target=0   bfloat16[10]
    box_l1        SmoothL1LossBackward  none        beta=0.5       float32[N,4]
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import ModelProto

from lossgrad_compiler import onnx as lo

BATCH = "N"
CLASSES = 10
BOX = 4

# (name, element type, shape) of every graph input, in graph order.
INPUTS: tuple[tuple[str, str, tuple[str | int, ...]], ...] = (
    ("grad_kl", "float32", ()),  # d(total loss)/d(kl loss): a 0-d scalar
    ("student_logp", "float32", (BATCH, CLASSES)),
    ("teacher_logp", "float32", (BATCH, CLASSES)),
    ("grad_prior", "float32", ()),
    ("class_prior", "bfloat16", (CLASSES,)),  # broadcast over the batch
    ("grad_box", "float32", (BATCH, BOX)),  # reduction none: one gradient per element
    ("box_pred", "float32", (BATCH, BOX)),
    ("box_anchor", "float16", (1, BOX)),  # broadcast over the batch
)


def example_model() -> ModelProto:
    """The three-node model; graph outputs get their types and shapes from the schemas."""
    nodes = [
        lo.make_node(
            "KlDivBackward",
            ["grad_kl", "student_logp", "teacher_logp"],
            "grad_student_logp",
            name="kl_student",
            reduction="batchmean",
            log_target=1,
        ),
        lo.make_node(
            "KlDivTargetBackward",
            ["grad_prior", "student_logp", "class_prior"],
            "grad_class_prior",
            name="kl_prior",
            reduction="mean",
            log_target=0,
        ),
        lo.make_node(
            "SmoothL1LossBackward",
            ["grad_box", "box_pred", "box_anchor"],
            "grad_box_pred",
            name="box_l1",
            reduction="none",
            beta=0.5,
        ),
    ]
    graph = lo.make_graph(
        nodes,
        INPUTS,
        ["grad_student_logp", "grad_class_prior", "grad_box_pred"],
        name="loss_gradients",
    )
    return lo.make_model(graph, doc="lossgrad_compiler example: loss gradients of a training step")


def example_feeds(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Plausible random inputs for a batch of `batch` samples (log-probabilities where the
    model expects them, a strictly positive class prior)."""
    rng = np.random.default_rng(seed)
    student = _log_softmax(rng.standard_normal((batch, CLASSES)))
    teacher = _log_softmax(2.0 * rng.standard_normal((batch, CLASSES)))
    prior = np.exp(_log_softmax(rng.standard_normal(CLASSES)))
    return {
        "grad_kl": np.array(1.0, np.float32),
        "student_logp": student.astype(np.float32),
        "teacher_logp": teacher.astype(np.float32),
        "grad_prior": np.array(0.1, np.float32),
        "class_prior": prior.astype(ml_dtypes.bfloat16),
        "grad_box": (0.5 * rng.standard_normal((batch, BOX))).astype(np.float32),
        "box_pred": rng.standard_normal((batch, BOX)).astype(np.float32),
        "box_anchor": (0.5 * rng.standard_normal((1, BOX))).astype(np.float16),
    }


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
