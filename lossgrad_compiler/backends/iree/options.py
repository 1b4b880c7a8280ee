"""What IREE compiles for (`IreeOptions`): the device and its flags, and which element types it can
run. f64 is never demoted (`--iree-input-demote-f64-to-f32=false`): a target without f64
arithmetic refuses an f64 signature instead."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from lossgrad_compiler import spec
from lossgrad_compiler.errors import UnsupportedByBackendError

EXTRA_HINT = "pip install 'lossgrad_compiler[iree]'"

BACKENDS = ("llvm-cpu", "cuda", "rocm", "vulkan")
"""The `--iree-backend` choices; `hip` is accepted for `rocm`."""

_DEFAULT_GPU = {"cuda": "sm_80", "rocm": "gfx942", "vulkan": "rdna3"}
_GPU_FLAGS = {
    "cuda": ("--iree-hal-target-device=cuda", "--iree-cuda-target={}"),
    "rocm": ("--iree-hal-target-device=hip", "--iree-rocm-target={}"),
    "vulkan": ("--iree-hal-target-device=vulkan", "--iree-vulkan-target={}"),
}
_NO_F64 = frozenset({"vulkan"})  # SPIR-V exp/log take 16/32-bit floats only
_NO_I32_INDEX = frozenset({"cuda"})  # an i32 target widened in a reduction: IREE 3.13


class IreeUnavailableError(RuntimeError):
    """IREE's compiler or runtime is not installed."""


def iree_module(name: str) -> ModuleType:
    """Import an IREE package, or say in one line which extra provides it."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise IreeUnavailableError(
            f"the IREE target needs IREE ({name} is not importable: {err}); {EXTRA_HINT}"
        ) from None


@dataclass(frozen=True)
class IreeOptions:
    """`backend` is llvm-cpu (the default: this machine's CPU, `cpu="host"`, or a named CPU
    such as `x86-64-v3` for modules to ship) or a GPU API; `gpu` names the GPU architecture
    (sm_80, gfx942, rdna3, ... by default)."""

    backend: str = "llvm-cpu"
    cpu: str = "host"
    gpu: str | None = None

    def __post_init__(self) -> None:
        if self.backend == "hip":
            object.__setattr__(self, "backend", "rocm")
        if self.backend not in BACKENDS:
            raise ValueError(
                f"unknown IREE backend '{self.backend}' (one of {', '.join(BACKENDS)})"
            )

    @property
    def flags(self) -> tuple[str, ...]:
        common = ("--iree-input-demote-f64-to-f32=false",)
        if self.backend == "llvm-cpu":
            return (
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                f"--iree-llvmcpu-target-cpu={self.cpu}",
                # vector loops over dynamic sizes: an unmasked main loop and a masked tail,
                # not a masked load and store on every iteration (faster: docs/benchmarks.md,
                # "The figures behind the kernels' choices")
                "--iree-llvmcpu-vector-pproc-strategy=peel",
                *common,
            )
        device, architecture = _GPU_FLAGS[self.backend]
        gpu = self.gpu or _DEFAULT_GPU[self.backend]
        return (device, architecture.format(gpu), *common)

    @property
    def supports_f64(self) -> bool:
        return self.backend not in _NO_F64

    def check_types(self, op_type: str, types: tuple[spec.FloatType | spec.IndexType, ...]) -> None:
        """UnsupportedByBackendError (161002) for an f64 signature on a target without f64,
        and for an int32 class index on CUDA: IREE 3.13's CUDA codegen cannot compile the
        count of bad targets when it widens an i32 target into its i64 count ("failed to
        distribute"; tests/iree/test_iree_classes_backends.py pins it)."""
        if spec.FLOAT64 in types and not self.supports_f64:
            raise UnsupportedByBackendError(
                op_type,
                "float64",
                f"IREE's {self.backend} target has no float64 arithmetic; compile for "
                "llvm-cpu, cuda or rocm (f64 is never demoted to f32)",
            )
        if spec.INT32 in types and self.backend in _NO_I32_INDEX:
            raise UnsupportedByBackendError(
                op_type,
                "int32",
                f"IREE's {self.backend} target cannot compile the target check of an int32 "
                "target; give an int64 target, or compile for llvm-cpu, rocm or vulkan",
            )
