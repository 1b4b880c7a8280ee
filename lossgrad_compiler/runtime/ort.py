"""Loading the native ONNX Runtime kernel library that `--target ort` made (or
targets/ort_library.py found) into a session's options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnxruntime as ort

from lossgrad_compiler.backends.ort.build import NativeUnavailableError
from lossgrad_compiler.backends.ort.prebuilt import describe


def session_options(library: str | None = None, **options: Any) -> ort.SessionOptions:
    """SessionOptions with `options` set as attributes (intra_op_num_threads, ...) and the
    kernel library at `library` registered (None: none, the functions run)."""
    so = ort.SessionOptions()
    so.log_severity_level = 3  # fp16 function bodies log constant-folding warnings otherwise
    for name, value in options.items():
        if not hasattr(so, name):
            raise TypeError(f"onnxruntime.SessionOptions has no option '{name}'")
        setattr(so, name, value)
    if library is not None:
        register_library(so, library)
    return so


def register_library(so: ort.SessionOptions, path: str) -> None:
    """Register the kernel library at `path`; a file gone since it was found (a cleaned
    cache, an uninstalled package) is the project's NativeUnavailableError, not ORT's raw
    "cannot open shared object file"."""
    if not Path(path).is_file():
        raise NativeUnavailableError(
            f"the native ORT kernel library {path} ({describe(path)}) is missing: it was "
            "removed after this process found it; start a new process to build or find it "
            "again"
        )
    so.register_custom_ops_library(path)
