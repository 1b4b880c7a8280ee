"""Calls and models from Python, compiled for one target and run: IREE's and AscendNPU IR's
`evaluate`, the Ascend C emulation's `emulate` and `session`, the native ONNX Runtime
`session`. Each gets its level 2 from the one pipeline (pipeline.py), has the target's
backend make what runs, and hands that to runtime/, which loads and runs it."""
