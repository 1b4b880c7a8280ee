"""The native ONNX Runtime kernels from Python: build on first use, load, run.

`library_path()` builds (once, cached on disk) the kernel library that
lossgrad_compiler.backends.ort prints and returns its path as the str that
`SessionOptions.register_custom_ops_library` takes; `session(model, **options)`
returns an InferenceSession with it registered. The model is compiled with the ONNX
backend's `functions` mode first, so every ai.lossgrad node also carries its model-local
function. The library registers every operator for every combination of the four float
input types, so ORT runs the native kernel for every node when it is registered, and the
functions otherwise.

Which library: with a C++ compiler, the JIT build for this machine's CPU (faster, cached);
without one, the prebuilt library of the platform wheel for this CPU's x86-64 level
(backends/ort/prebuilt.py; $LOSSGRAD_ORT_PREBUILT=1 asks for it even with a compiler);
where neither works, the functions alone, after one warning."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import ModelProto

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ort.build import (
    ENV_MARCH,
    Announcement,
    NativeUnavailableError,
    NoCompilerError,
    build_shared_library,
    toolchain,
)
from lossgrad_compiler.backends.ort.prebuilt import describe, prebuilt_library, prebuilt_present
from lossgrad_compiler.onnx.attributes import attributes_from_node
from lossgrad_compiler.runtime.external_data import (
    FOLDER_OPTION,
    check_external_data,
    model_folder,
)
from lossgrad_compiler.runtime.ort_io import run_session
from lossgrad_compiler.runtime.ort_source import kernel_library_source

LIBRARY_NAME = "liblossgrad_ort"
ENV_PREBUILT = "LOSSGRAD_ORT_PREBUILT"
ANNOUNCEMENT = Announcement(
    "the native ONNX Runtime kernel library",
    "one C++ translation unit, about a minute (once; later runs load it from the cache)",
)


def jit_library_name() -> str:
    """The JIT build's file name says what it was built for (a copy made by `--target ort`
    keeps it): `native` (this machine's CPU) or the $LOSSGRAD_ORT_MARCH it names."""
    march = os.environ.get(ENV_MARCH)
    if march is None:
        return f"{LIBRARY_NAME}-native"
    return f"{LIBRARY_NAME}-{re.sub(r'[^A-Za-z0-9._-]', '_', march.strip()) or 'default'}"


@cache
def library_path() -> str:
    """The path of the kernel library, as ORT's register_custom_ops_library takes it: the
    JIT build for this CPU where a compiler exists, else the prebuilt library for this CPU
    (NativeUnavailableError where neither can be had)."""
    return str(_kernel_library())


def _kernel_library() -> Path:
    if os.environ.get(ENV_PREBUILT, "") not in ("", "0"):
        return prebuilt_library()
    try:
        tools = toolchain()
        return build_shared_library(
            kernel_library_source(), jit_library_name(), tools=tools, announce=ANNOUNCEMENT
        )
    except NoCompilerError as no_compiler:
        try:
            return prebuilt_library()
        except NativeUnavailableError as err:
            raise NativeUnavailableError(f"{no_compiler}; {err}") from None
    except NativeUnavailableError as failed:
        if not prebuilt_present():
            raise
        library = prebuilt_library()
        warnings.warn(
            f"lossgrad native ORT kernels could not be built for this CPU ({failed}); using "
            f"the library {describe(library)}",
            RuntimeWarning,
            stacklevel=4,
        )
        return library


@cache
def native_library() -> str | None:
    """library_path(), or None after warning once that the native kernels are unavailable."""
    try:
        return library_path()
    except NativeUnavailableError as err:
        warnings.warn(
            f"lossgrad native ORT kernels unavailable ({err}); using the ONNX function path",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def prepare_model(model: ModelProto | bytes | str | Path) -> ModelProto:
    """`model` with every ai.lossgrad node checked (attributes included, unknown ones
    rejected with spec's error) and given its model-local function, which ORT runs where no
    kernel library is registered."""
    # defers xDSL (the compiler): library_path() and sessions of prepared models need none
    from lossgrad_compiler.driver import compile_model, load_model

    loaded = load_model(model, external_data=False)  # ORT reads it from the folder
    for node in loaded.graph.node:
        if node.domain == spec.DOMAIN:
            attributes_from_node(node)
    return compile_model(loaded, target="onnx", mode="functions").model


def session_options(native: bool = True, **options: Any) -> ort.SessionOptions:
    """SessionOptions with `options` set as attributes (intra_op_num_threads, ...) and the
    kernel library registered when `native` and it is available."""
    so = ort.SessionOptions()
    so.log_severity_level = 3  # fp16 function bodies log constant-folding warnings otherwise
    for name, value in options.items():
        if not hasattr(so, name):
            raise TypeError(f"onnxruntime.SessionOptions has no option '{name}'")
        setattr(so, name, value)
    if native:
        path = native_library()
        if path is not None:
            register_library(so, path)
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


def session(
    model: ModelProto | bytes | str | Path, native: bool = True, **options: Any
) -> ort.InferenceSession:
    """An InferenceSession of `model` (prepared by prepare_model) on the CPU provider, with
    the native kernels registered (unless `native` is False) and `options` applied.

    External data is read from the folder of a model given as a path, and only from inside
    it; a model given in memory must carry its data (ExternalDataError otherwise)."""
    prepared = prepare_model(model)
    folder = model_folder(model)
    check_external_data(prepared, folder)
    so = session_options(native, **options)
    if folder is not None:
        so.add_session_config_entry(FOLDER_OPTION, str(folder))
    return ort.InferenceSession(
        prepared.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )


def run_native(
    model: ModelProto | bytes | str | Path, feeds: Mapping[str, np.ndarray], threads: int = 1
) -> list[np.ndarray]:
    """All outputs of one run of `model` with the native kernels on `threads` intra-op
    threads; feeds and outputs are numpy arrays of any of the four float types."""
    sess = session(model, intra_op_num_threads=threads, inter_op_num_threads=1)
    return run_session(sess, feeds)
