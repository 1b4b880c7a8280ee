"""Running compiled models in ONNX Runtime from numpy, bfloat16 included.

ORT's Python API takes neither ml_dtypes bfloat16 arrays as feeds nor returns bfloat16
outputs as arrays (numpy has no bfloat16), so both travel as raw 16-bit patterns here."""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from pathlib import Path

import ml_dtypes
import numpy as np
import onnxruntime as ort
from onnx import ModelProto, TensorProto

from lossgrad_compiler import spec


def make_session(
    model: ModelProto | bytes,
    threads: int = 1,
    custom_ops_library: str | Path | None = None,
) -> ort.InferenceSession:
    """A CPU session with `threads` intra-op threads (and the native kernels, if given)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # fp16 graphs log "can't constant fold" warnings otherwise
    if custom_ops_library is not None:
        options.register_custom_ops_library(str(custom_ops_library))
    data = model.SerializeToString() if isinstance(model, ModelProto) else model
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def to_ort_value(array: np.ndarray) -> ort.OrtValue:
    """An OrtValue holding `array`; bfloat16 goes in as its bit pattern."""
    array = np.asarray(array, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    if array.dtype == spec.BFLOAT16.dtype:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            array.view(np.uint16), TensorProto.BFLOAT16
        )
    return ort.OrtValue.ortvalue_from_numpy(array)


def from_ort_value(value: ort.OrtValue) -> np.ndarray:
    """The OrtValue as a numpy array; bfloat16 comes back as ml_dtypes.bfloat16."""
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    shape = tuple(value.shape())
    count = int(np.prod(shape))
    if count == 0:
        return np.empty(shape, dtype=ml_dtypes.bfloat16)
    raw = (ctypes.c_uint16 * count).from_address(value.data_ptr())
    return np.ctypeslib.as_array(raw).copy().view(ml_dtypes.bfloat16).reshape(shape)


def run_session(session: ort.InferenceSession, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """All outputs of one run, fed and read as numpy arrays of any of the four float types."""
    values = {name: to_ort_value(np.asarray(array)) for name, array in feeds.items()}
    outputs = session.run_with_ort_values(None, values)
    return [from_ort_value(v) for v in outputs]
