"""Loading and running what a target made: IREE modules (iree.py), the Ascend C emulation's
runner (ascendc.py), AscendNPU IR's CPU runner libraries (ascendnpu_ir.py) and the native
ONNX Runtime kernel library (ort.py, ort_io.py). Nothing here compiles: the pipeline, the
driver and the lowering are above this package (evaluation/ and targets/ use it)."""
