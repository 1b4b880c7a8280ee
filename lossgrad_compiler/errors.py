"""Errors that users read: each names the op, the argument and the rule, and carries the
aclnn status code of the matching CANN check, so every layer reports a bad call the same way."""

from __future__ import annotations

ACLNN_ERR_PARAM_NULLPTR = 161001
ACLNN_ERR_PARAM_INVALID = 161002

ACLNN_CODE_NAMES = {
    ACLNN_ERR_PARAM_NULLPTR: "ACLNN_ERR_PARAM_NULLPTR",
    ACLNN_ERR_PARAM_INVALID: "ACLNN_ERR_PARAM_INVALID",
}


class LossGradError(ValueError):
    """A rejected call. `str(err)` is one line: '<op>: <argument>: <rule> [aclnn <code> <NAME>]'."""

    code: int = ACLNN_ERR_PARAM_INVALID

    def __init__(self, op: str, argument: str, rule: str) -> None:
        self.op = op
        self.argument = argument
        self.rule = rule
        super().__init__(format_error(op, argument, rule, self.code))


LINE = "{op}: {argument}: {rule} [aclnn {code} {code_name}]"
"""The one message format shared by Python, the dialect verifiers and generated C++."""


def format_error(op: str, argument: str, rule: str, code: int) -> str:
    """A message in the format LINE."""
    return LINE.format(
        op=op, argument=argument, rule=rule, code=code, code_name=ACLNN_CODE_NAMES[code]
    )


class MissingInputError(LossGradError):
    """A required input is absent (null)."""

    code = ACLNN_ERR_PARAM_NULLPTR


class InvalidArgumentError(LossGradError):
    """Any 161002 failure; the subclasses say which rule."""

    code = ACLNN_ERR_PARAM_INVALID


class ElementTypeError(InvalidArgumentError):
    """Element type outside float16, bfloat16, float32, float64 (a class index outside
    int64, int32), or a classification operator's float input not of self's type."""


class RankError(InvalidArgumentError):
    """Rank above the maximum of 8."""


class BroadcastError(InvalidArgumentError):
    """Shapes do not broadcast, or grad_output would enlarge the broadcast shape."""


class ClassShapeError(InvalidArgumentError):
    """A classification operator's shapes outside the classes rule (target is self without
    its class dimension, weight [C], one-element inputs one element)."""


class TargetValueError(InvalidArgumentError):
    """A target outside [0, C) that is not ignore_index: a check of the values, raised by
    the paths that run with them."""


class AttributeValueError(InvalidArgumentError):
    """Unknown attribute, attribute of the wrong type, or value outside its range."""


class UnsupportedByBackendError(InvalidArgumentError):
    """A valid call that one backend cannot run; the message names a backend that can."""


class CompileError(ValueError):
    """A model or request the compiler cannot take (not ONNX, not valid ONNX, an unknown
    target or option): raised by the pipeline that loads a model and by compile_model."""
