"""Type-and-shape inference of the ai.lossgrad schemas: spec.validate on ONNX types.

onnx calls these functions from `infer_shapes` and from `check_model(full_check=True)`; a
Python exception raised here reaches the caller unchanged. The exception is both an
onnx InferenceError (what onnx's API documents) and the spec error class, so callers can
catch either and still read the aclnn code."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

from onnx import TypeProto
from onnx.shape_inference import InferenceError

from lossgrad_compiler import spec
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.onnx.attributes import attribute_values
from lossgrad_compiler.onnx.node_errors import located
from lossgrad_compiler.onnx.placeholders import fill_unknown
from lossgrad_compiler.onnx.type_protos import shape_of, tensor_info, tensor_type

# onnx's display name of a node: "node KlDivBackward[ai.lossgrad] (name)"; the name is optional.
_DISPLAY_NAME = re.compile(r"^node \S+ \((?P<name>.*)\)$")


@functools.cache
def inference_error_class(cls: type[LossGradError]) -> type[LossGradError]:
    """A subclass of both `cls` and onnx's InferenceError (one per spec error class)."""
    return type(cls.__name__, (InferenceError, cls), {"__module__": __name__})


def inference_error(err: LossGradError, node_name: str) -> LossGradError:
    """`err` located in the node, as an InferenceError that is still a `type(err)`."""
    return located(err, node_name, inference_error_class(type(err)))


def node_name(ctx: Any) -> str:
    match = _DISPLAY_NAME.match(ctx.get_display_name().strip())
    return match.group("name") if match else ""


_TYPES_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("types_only", default=False)


@contextlib.contextmanager
def types_only() -> Iterator[None]:
    """Inference within gives an invalid ai.lossgrad node no output type instead of raising.

    For callers that validate every node themselves: onnx reports the error of a node in a
    subgraph or function body with the node's name only, while the caller knows its path in
    the model ("if1/then_branch/inner")."""
    token = _TYPES_ONLY.set(True)
    try:
        yield
    finally:
        _TYPES_ONLY.reset(token)


def inference_function(op_type: str) -> Callable[[Any], None]:
    """The inference callback of one operator; it reads spec at call time."""

    def infer(ctx: Any) -> None:
        try:
            _infer(op_type, ctx)
        except LossGradError as err:
            if not _TYPES_ONLY.get():
                raise inference_error(err, node_name(ctx)) from None

    return infer


def _infer(op_type: str, ctx: Any) -> None:
    op = spec.operator(op_type)
    infos, unknown_types = _input_infos(op, ctx)
    protos = [p for a in op.attributes if (p := ctx.get_attribute(a.name)) is not None]
    call = spec.validate(op_type, infos, attribute_values(op_type, protos))
    result_depends_on = {op.differentiates} if op.differentiates else set(op.input_names)
    if result_depends_on & unknown_types or ctx.get_num_outputs() < 1:
        return
    ctx.set_output_type(0, tensor_type(call.result_type, call.result_shape))


def input_name(op: spec.OperatorSpec, index: int) -> str:
    """The spec name of a node's input at `index` (`input <i>` beyond the operator's)."""
    return op.inputs[index].name if index < len(op.inputs) else f"input {index}"


def _input_infos(
    op: spec.OperatorSpec, ctx: Any
) -> tuple[dict[str, spec.TensorInfo | None], set[str]]:
    """Each input's TensorInfo by spec's input name (extra inputs as 'input <i>'), and the names
    whose element type is unknown: those are validated as a placeholder (onnx/placeholders.py),
    their result left untyped."""
    infos: dict[str, spec.TensorInfo | None] = {}
    unknown: dict[str, spec.Shape | None] = {}
    for i in range(ctx.get_num_inputs()):
        name = input_name(op, i)
        if not ctx.has_input(i):
            infos[name] = None
            continue
        type_proto: TypeProto | None = ctx.get_input_type(i)
        infos[name] = tensor_info(type_proto)
        if infos[name] is None:
            known_tensor = type_proto is not None and type_proto.HasField("tensor_type")
            unknown[name] = shape_of(type_proto) if known_tensor else None
    return fill_unknown(op, infos, unknown), set(unknown)
