"""The native kernel library's C++ source, from the pipeline.

Apart from runtime/ort.py so that what builds the library without loading it (the wheel's
prebuilt libraries, benchmarks) needs no onnxruntime."""

from __future__ import annotations

from functools import cache

from lossgrad_compiler.backends.ort.library import library_source
from lossgrad_compiler.backends.ort.variants import LIBRARY_FORM, library_signatures
from lossgrad_compiler.frontend.lowering import lower_signatures


@cache
def kernel_library_source() -> str:
    """The library's C++ source: the level 2 the ORT backend asks for (its variants, in the
    run-time-parameter form), from the pipeline's per-signature cache, printed."""
    return library_source(lower_signatures(library_signatures(), LIBRARY_FORM))
