"""The native ONNX Runtime kernel library that `--target ort` copies beside its model: its
C++ source from the pipeline, built (once, cached on disk) or chosen among the wheel's
prebuilt libraries.

`library_path()` returns the library's path as the str that
`SessionOptions.register_custom_ops_library` takes. Which library: with a C++ compiler, the
JIT build for this machine's CPU (faster, cached); without one, the prebuilt library of the
platform wheel for this CPU's x86-64 level (backends/ort/prebuilt.py;
$LOSSGRAD_ORT_PREBUILT=1 asks for it even with a compiler). Nothing here loads the library,
so what only builds it (the wheel's build hook, benchmarks) needs no onnxruntime."""

from __future__ import annotations

import os
import re
import warnings
from functools import cache
from pathlib import Path

from lossgrad_compiler.backends.ort.build import (
    ENV_MARCH,
    Announcement,
    NativeUnavailableError,
    NoCompilerError,
    build_shared_library,
    toolchain,
)
from lossgrad_compiler.backends.ort.library import library_source
from lossgrad_compiler.backends.ort.prebuilt import describe, prebuilt_library, prebuilt_present
from lossgrad_compiler.backends.ort.variants import LIBRARY_FORM, library_signatures
from lossgrad_compiler.pipeline import level2

LIBRARY_NAME = "liblossgrad_ort"
ENV_PREBUILT = "LOSSGRAD_ORT_PREBUILT"
ANNOUNCEMENT = Announcement(
    "the native ONNX Runtime kernel library",
    "one C++ translation unit, about a minute (once; later runs load it from the cache)",
)


@cache
def kernel_library_source() -> str:
    """The library's C++ source: the level 2 the ORT backend asks for (its variants, in the
    run-time-parameter form), from the pipeline's per-signature cache, printed."""
    return library_source(level2(library_signatures(), LIBRARY_FORM))


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
