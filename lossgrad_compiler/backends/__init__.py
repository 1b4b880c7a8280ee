"""Backends: each reads level-2 IR (docs/level2.md) and produces code for one target.

`onnx/` writes standard ONNX nodes and model-local functions; `ort/` and `ascendc/` print
native kernels. None of them writes an operator's formula: they translate the ops of the
level-2 op list, so a new operator needs only a spec entry and a lowering pattern."""
