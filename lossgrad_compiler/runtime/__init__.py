"""Building, caching and loading the native ONNX Runtime kernel library; session helpers.

`library_path`, `run_native` and `session` are imported on first use: what only prints or
builds the library (runtime.ort_source, the wheel's prebuilt libraries) needs no
onnxruntime."""

from typing import Any

__all__ = ["library_path", "run_native", "session"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        # defers onnxruntime, which only loading and running the library needs
        from lossgrad_compiler.runtime import ort

        return getattr(ort, name)
    raise AttributeError(f"module 'lossgrad_compiler.runtime' has no attribute {name!r}")
