"""Level 2 compiled by IREE (iree-org/iree), the production MLIR compiler: a level-2 module
(one function per signature), as `lower-lossgrad` prints it, becomes one IREE module
(.vmfb) for the host CPU, an explicit CPU, or a GPU (CUDA, ROCm/HIP, Vulkan).

IREE is the optional extra `iree` (`pip install 'lossgrad_compiler[iree]'`); running a
module is `lossgrad_compiler.runtime.iree`, compiling and running calls
`lossgrad_compiler.evaluation.iree`."""

from lossgrad_compiler.backends.iree.compiler import (
    IreeCompileError,
    compile_module,
    compile_text,
    module_text,
)
from lossgrad_compiler.backends.iree.options import (
    BACKENDS,
    IreeOptions,
    IreeUnavailableError,
)
from lossgrad_compiler.backends.iree.whole_model import (
    ModelInterface,
    WholeModelError,
    compile_whole_model,
    splice,
)

__all__ = [
    "BACKENDS",
    "IreeCompileError",
    "IreeOptions",
    "IreeUnavailableError",
    "ModelInterface",
    "WholeModelError",
    "compile_module",
    "compile_text",
    "compile_whole_model",
    "module_text",
    "splice",
]
