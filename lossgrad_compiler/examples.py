"""The example model of lossgrad-demo: the loss-gradient part of one training step.

A student classifier is distilled from a teacher (KL divergence on log-probabilities) and
trained on its labels (the negative log-likelihood of its log-probabilities, with a weight
per class and an "unlabelled" class that is ignored; and a cross-entropy head on the same
log-probabilities, the gradient with respect to the logits, with the same weights and
ignored class and a label smoothing of 0.1), a learnable class prior is fitted to
the student's predictions (KL with respect to the target), a box-regression head is trained
with a smooth L1 loss, a multi-label tag head with binary cross entropy on logits (one
positive weight per tag, no per-element weight), and a value head with a mean squared
error. The batch dimension is symbolic ("N"), so one
model serves every batch size; targets broadcast over the batch, and the inputs mix
float32, float16 and bfloat16.

    node          op                                    reduction   other          result
    kl_student    KlDivBackward                         batchmean   log_target=1   float32[N,10]
    kl_prior      KlDivTargetBackward                   mean        log_target=0   bfloat16[10]
    box_l1        SmoothL1LossBackward                  none        beta=0.5       float32[N,4]
    tags_bce      BinaryCrossEntropyWithLogitsBackward  mean        pos_weight     float32[N,5]
    value_mse     MseLossBackward                       mean                       float32[N,1]
    cls_nll       NLLLossBackward                       mean        weight, ii=3   float32[N,10]
    cls_ce        CrossEntropyLossGrad                  mean        weight, ii=3,  float32[N,10]
                                                                    ls=0.1

`training_step_model()` puts standard nodes around the same nodes (LogSoftmax and a Cast
before them, Mul, Sum and a Cast after them), as a whole training graph would.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import ModelProto, TensorProto, helper

from lossgrad_compiler import onnx as lo

BATCH = "N"
CLASSES = 10
UNLABELLED = 3
"""The class the classifier head ignores (its ignore_index)."""
BOX = 4
TAGS = 5

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
    ("grad_tags", "float32", ()),
    ("tag_logits", "float32", (BATCH, TAGS)),
    ("tag_labels", "float16", (BATCH, TAGS)),  # 0/1 labels
    ("tag_pos_weight", "float32", (TAGS,)),  # one per tag, along the last dimension
    ("grad_value", "float32", ()),
    ("value_pred", "float32", (BATCH, 1)),
    ("value_target", "float32", (BATCH, 1)),
    ("grad_cls", "float32", ()),
    ("labels", "int64", (BATCH,)),  # class indices, UNLABELLED where a sample has none
    ("cls_total_weight", "float32", ()),  # the forward's sum of the kept samples' weights
    ("class_weight", "float32", (CLASSES,)),
    ("grad_ce", "float32", ()),
)


def example_model() -> ModelProto:
    """The seven-node model; graph outputs get their types and shapes from the schemas."""
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
        lo.make_node(
            "BinaryCrossEntropyWithLogitsBackward",
            ["grad_tags", "tag_logits", "tag_labels", "", "tag_pos_weight"],  # no weight
            "grad_tag_logits",
            name="tags_bce",
            reduction="mean",
        ),
        lo.make_node(
            "MseLossBackward",
            ["grad_value", "value_pred", "value_target"],
            "grad_value_pred",
            name="value_mse",
            reduction="mean",
        ),
        lo.make_node(
            "NLLLossBackward",
            ["grad_cls", "student_logp", "labels", "cls_total_weight", "class_weight"],
            "grad_student_logp_cls",
            name="cls_nll",
            reduction="mean",
            ignore_index=UNLABELLED,
        ),
        lo.make_node(
            "CrossEntropyLossGrad",
            ["grad_ce", "student_logp", "labels", "class_weight"],
            "grad_student_logits_ce",
            name="cls_ce",
            reduction="mean",
            ignore_index=UNLABELLED,
            label_smoothing=0.1,
        ),
    ]
    graph = lo.make_graph(nodes, INPUTS, list(OUTPUTS), name="loss_gradients")
    return lo.make_model(graph, doc="lossgrad_compiler example: loss gradients of a training step")


OUTPUTS = (
    "grad_student_logp",
    "grad_class_prior",
    "grad_box_pred",
    "grad_tag_logits",
    "grad_value_pred",
    "grad_student_logp_cls",
    "grad_student_logits_ce",
)


def example_feeds(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Plausible random inputs for a batch of `batch` samples (log-probabilities where the
    model expects them, a strictly positive class prior)."""
    rng = np.random.default_rng(seed)
    student = _log_softmax(rng.standard_normal((batch, CLASSES)))
    teacher = _log_softmax(2.0 * rng.standard_normal((batch, CLASSES)))
    prior = np.exp(_log_softmax(rng.standard_normal(CLASSES)))
    labels = rng.integers(0, CLASSES, batch)
    class_weight = rng.uniform(0.5, 2.0, CLASSES).astype(np.float32)
    kept = labels[labels != UNLABELLED]
    return {
        "grad_kl": np.array(1.0, np.float32),
        "student_logp": student.astype(np.float32),
        "teacher_logp": teacher.astype(np.float32),
        "grad_prior": np.array(0.1, np.float32),
        "class_prior": prior.astype(ml_dtypes.bfloat16),
        "grad_box": (0.5 * rng.standard_normal((batch, BOX))).astype(np.float32),
        "box_pred": rng.standard_normal((batch, BOX)).astype(np.float32),
        "box_anchor": (0.5 * rng.standard_normal((1, BOX))).astype(np.float16),
        "grad_tags": np.array(1.0, np.float32),
        "tag_logits": (2.0 * rng.standard_normal((batch, TAGS))).astype(np.float32),
        "tag_labels": (rng.random((batch, TAGS)) < 0.3).astype(np.float16),
        "tag_pos_weight": rng.uniform(1.0, 3.0, TAGS).astype(np.float32),
        "grad_value": np.array(0.5, np.float32),
        "value_pred": rng.standard_normal((batch, 1)).astype(np.float32),
        "value_target": rng.standard_normal((batch, 1)).astype(np.float32),
        "grad_cls": np.array(1.0, np.float32),
        "labels": labels.astype(np.int64),
        "cls_total_weight": np.array(class_weight[kept].sum(dtype=np.float32), np.float32),
        "class_weight": class_weight,
        "grad_ce": np.array(1.0, np.float32),
    }


TRAINING_STEP_INPUTS: tuple[tuple[str, str, tuple[str | int, ...]], ...] = (
    ("student_logits", "float32", (BATCH, CLASSES)),
    ("box_pred16", "float16", (BATCH, BOX)),
    ("learning_rate", "float32", ()),
    *(i for i in INPUTS if i[0] not in ("student_logp", "box_pred")),
)


def training_step_model() -> ModelProto:
    """The example's nodes with standard nodes before and after them."""
    before = [
        helper.make_node(
            "LogSoftmax", ["student_logits"], ["student_logp"], name="log_softmax", axis=-1
        ),
        helper.make_node(
            "Cast", ["box_pred16"], ["box_pred"], name="widen_boxes", to=TensorProto.FLOAT
        ),
    ]
    after = [
        helper.make_node(
            "Mul", ["grad_student_logp", "learning_rate"], ["step_student"], name="scale_step"
        ),
        helper.make_node("Sum", ["grad_box_pred", "box_pred"], ["moved_boxes"], name="move_boxes"),
        helper.make_node(
            "Cast",
            ["grad_class_prior"],
            ["grad_class_prior_f32"],
            name="widen_prior_grad",
            to=TensorProto.FLOAT,
        ),
    ]
    graph = lo.make_graph(
        [*before, *example_model().graph.node, *after],
        TRAINING_STEP_INPUTS,
        [
            "step_student",
            "grad_class_prior_f32",
            "moved_boxes",
            "grad_tag_logits",
            "grad_value_pred",
        ],
        name="training_step",
    )
    return lo.make_model(graph, doc="lossgrad_compiler example: a training step's gradients")


def training_step_feeds(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of `training_step_model()`: logits instead of log-probabilities, float16 boxes."""
    feeds = example_feeds(batch, seed)
    rng = np.random.default_rng(seed + 1)
    del feeds["student_logp"]
    feeds["student_logits"] = rng.standard_normal((batch, CLASSES)).astype(np.float32)
    feeds["box_pred16"] = feeds.pop("box_pred").astype(np.float16)
    feeds["learning_rate"] = np.array(0.01, np.float32)
    return feeds


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
