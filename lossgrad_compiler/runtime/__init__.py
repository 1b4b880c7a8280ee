"""Building, caching and loading the native ONNX Runtime kernel library; session helpers."""

from lossgrad_compiler.runtime.ort import library_path, run_native, session

__all__ = ["library_path", "run_native", "session"]
