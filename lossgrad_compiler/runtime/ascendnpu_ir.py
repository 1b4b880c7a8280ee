"""Running the kernels AscendNPU IR schedules, on this CPU: `RunnerLibrary` loads the
library backends/ascendnpu_ir/cpu_runner.py built for a signature (evaluation/ascendnpu_ir.py
checks the calls and builds it) and runs one checked call at a time.

As the host does on a device, it asks the kernel's tiling function for the tiling key and
struct and calls the kernel's C interface with memref descriptors of the numpy arrays. The
kernel returns its result in a buffer it allocated; it is copied and freed."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

_LIBC = ctypes.CDLL(None)
_LIBC.free.argtypes = [ctypes.c_void_p]


def _descriptor_type(rank: int) -> type[ctypes.Structure]:
    """MLIR's ranked memref descriptor: allocated, aligned, offset, sizes, strides."""
    fields: list[tuple[str, Any]] = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
    ]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})


def _descriptor(array: np.ndarray) -> ctypes.Structure:
    descriptor = _descriptor_type(array.ndim)()
    descriptor.allocated = descriptor.aligned = array.ctypes.data
    descriptor.offset = 0
    for axis in range(array.ndim):
        descriptor.sizes[axis] = array.shape[axis]
        descriptor.strides[axis] = array.strides[axis] // array.itemsize
    return descriptor


def _expanded(descriptor: ctypes.Structure, rank: int) -> list[Any]:
    """A descriptor as the separate arguments of MLIR's default calling convention."""
    fields = [
        ctypes.c_void_p(descriptor.allocated),
        ctypes.c_void_p(descriptor.aligned),
        ctypes.c_int64(descriptor.offset),
    ]
    fields += [ctypes.c_int64(descriptor.sizes[a]) for a in range(rank)]
    return fields + [ctypes.c_int64(descriptor.strides[a]) for a in range(rank)]


def _copied(descriptor: ctypes.Structure, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The elements a result descriptor points at, as a new array."""
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.zeros(shape, dtype)
    strides = [descriptor.strides[a] * dtype.itemsize for a in range(len(shape))]
    span = sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + dtype.itemsize
    start = descriptor.aligned + descriptor.offset * dtype.itemsize
    raw = (ctypes.c_char * span).from_address(start)
    view = np.lib.stride_tricks.as_strided(
        np.frombuffer(raw, np.uint8).view(dtype), shape=shape, strides=strides
    )
    return np.array(view)


class Tiling:
    """A tiling key and struct, as the tiling function writes them for the kernel."""

    def __init__(self, key: ctypes.c_int64, values: np.ndarray) -> None:
        self.key = key
        self.values = values  # kept alive: the descriptor points into it
        self.descriptor = _descriptor(values)


class RunnerLibrary:
    """The scheduled kernels of some signatures, loaded: one call at a time."""

    def __init__(self, path: str | Path) -> None:
        self.library = ctypes.CDLL(str(path))

    def _function(self, name: str, restype: Any, argtypes: list[Any]) -> Any:
        function = getattr(self.library, name)
        function.restype, function.argtypes = restype, argtypes
        return function

    def _has(self, name: str) -> bool:
        return hasattr(self.library, name)

    def tiling(self, name: str, arrays: Sequence[np.ndarray]) -> Tiling | None:
        """What the kernel's tiling function gives for these arrays (inputs, then the result);
        None for a kernel that is not tiled (0-d)."""
        size_function = f"{name}_get_tiling_struct_size_function"
        if not self._has(size_function):
            return None
        size = self._function(size_function, ctypes.c_int64, [])()
        tiling = Tiling(ctypes.c_int64(-1), np.zeros(max(size, 1), np.int64))
        arguments = [x for a in arrays for x in _expanded(_descriptor(a), a.ndim)]
        arguments += [ctypes.cast(ctypes.byref(tiling.key), ctypes.c_void_p)]
        arguments += _expanded(tiling.descriptor, 1)
        function = self._function(f"{name}_tiling_function", None, [type(a) for a in arguments])
        function(*arguments)
        return tiling

    def run(self, name: str, inputs: Sequence[np.ndarray], result: np.ndarray) -> np.ndarray:
        """Run kernel `name` as the host would: tiling, then the kernel; the result array."""
        arrays = [*inputs, result]
        descriptors = [_descriptor(a) for a in arrays]
        tiling = self.tiling(name, arrays)
        pointers = [ctypes.addressof(d) for d in descriptors]
        if tiling is not None:
            pointers += [ctypes.addressof(tiling.key), ctypes.addressof(tiling.descriptor)]
        returned = _descriptor_type(result.ndim)()
        kernel = self._function(
            f"_mlir_ciface_{name}", None, [ctypes.c_void_p] * (len(pointers) + 1)
        )
        kernel(ctypes.addressof(returned), *pointers)
        values = _copied(returned, result.shape, result.dtype)
        if returned.allocated and returned.allocated not in {a.ctypes.data for a in arrays}:
            _LIBC.free(returned.allocated)
        return values
