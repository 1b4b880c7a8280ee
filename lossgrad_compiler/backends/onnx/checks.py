"""What the standard-ONNX graphs do with level 2's checks of the values (docs/level2.md,
"Beyond elementwise"): nothing can raise on a value in standard ONNX, and the ai.lossgrad node
has one output, so a check's count is not computed. The gradient is the safe result
whatever the values hold (a row whose target is out of range gets zeros, as aclnn's golden
gives it), and the compile report says so for each signature with a check."""

from __future__ import annotations

from lossgrad_compiler import errors, messages

SAFE_RESULTS: dict[str, str] = {
    messages.TARGET_RANGE.key: (
        "a target outside [0, C) that is not ignore_index gives a zero row"
    ),
}
"""Per check rule: what the graph computes where a value breaks it."""


def unchecked_line(op_type: str, signature: str, nodes: int, rule_key: str) -> str:
    """The report line of one check a standard-ONNX signature does not make."""
    rule = next((r for r in messages.RULES if r.key == rule_key), None)
    code = rule.code if rule is not None else errors.ACLNN_ERR_PARAM_INVALID
    safe = SAFE_RESULTS.get(rule_key, "a value that breaks it gives the result of the graph")
    return (
        f"note: {op_type} (signature {signature}, {nodes} node(s)): standard ONNX cannot "
        f"raise on a value, so its {rule_key} check is not made: {safe} instead of the error "
        f"aclnn {code} {errors.ACLNN_CODE_NAMES[code]} (the reference and the native "
        "kernels raise it)"
    )
