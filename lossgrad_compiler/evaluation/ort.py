"""The native ONNX Runtime kernels from Python: `session(model, **options)` returns an
InferenceSession of the model compiled for the `functions` mode, with the kernel library
(targets/ort_library.py) registered; `run_native` runs it once.

Every ai.lossgrad node also carries its model-local function. The library registers every
operator for every combination of the four float input types, so ORT runs the native kernel
for every node when it is registered, and the functions otherwise; where the library can be
neither built nor found, the functions alone, after one warning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import ModelProto

from lossgrad_compiler import spec
from lossgrad_compiler.driver import compile_model
from lossgrad_compiler.onnx.attributes import attributes_from_node
from lossgrad_compiler.pipeline import ModelSource, load_model
from lossgrad_compiler.runtime.external_data import (
    FOLDER_OPTION,
    check_external_data,
    model_folder,
)
from lossgrad_compiler.runtime.ort import session_options
from lossgrad_compiler.runtime.ort_io import run_session
from lossgrad_compiler.targets.ort_library import native_library


def prepare_model(model: ModelSource) -> ModelProto:
    """`model` with every ai.lossgrad node checked (attributes included, unknown ones
    rejected with spec's error) and given its model-local function, which ORT runs where no
    kernel library is registered."""
    loaded = load_model(model, external_data=False)  # ORT reads it from the folder
    for node in loaded.graph.node:
        if node.domain == spec.DOMAIN:
            attributes_from_node(node)
    return compile_model(loaded, target="onnx", mode="functions").model


def session(model: ModelSource, native: bool = True, **options: Any) -> ort.InferenceSession:
    """An InferenceSession of `model` (prepared by prepare_model) on the CPU provider, with
    the native kernels registered (unless `native` is False or they are unavailable) and
    `options` applied.

    External data is read from the folder of a model given as a path, and only from inside
    it; a model given in memory must carry its data (ExternalDataError otherwise)."""
    prepared = prepare_model(model)
    folder = model_folder(model)
    check_external_data(prepared, folder)
    so = session_options(native_library() if native else None, **options)
    if folder is not None:
        so.add_session_config_entry(FOLDER_OPTION, str(folder))
    return ort.InferenceSession(
        prepared.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )


def run_native(
    model: ModelSource, feeds: Mapping[str, np.ndarray], threads: int = 1
) -> list[np.ndarray]:
    """All outputs of one run of `model` with the native kernels on `threads` intra-op
    threads; feeds and outputs are numpy arrays of any of the four float types."""
    sess = session(model, intra_op_num_threads=threads, inter_op_num_threads=1)
    return run_session(sess, feeds)
