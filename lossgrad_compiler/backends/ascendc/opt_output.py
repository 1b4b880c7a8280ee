"""`lossgrad-opt ... -t ascendc`: print the Ascend C kernel of every function (or of every
`ascendc.kernel`) in the module, with its tiling header.

Level-2 input is converted and planned first (option `soc`); `ascendc` input that is not
planned yet is planned. Kernels of functions named by a signature id get the project's
names (OpType with a digest); others are named after the kernel symbol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.utils.target import Target

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendc.kernel_printer import (
    KernelNames,
    print_kernel,
    print_tiling_header,
)
from lossgrad_compiler.backends.ascendc.project import kernel_names
from lossgrad_compiler.backends.ascendc.signature_info import sanitize, signature_info
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.dialects.ascendc.soc import DEFAULT_SOC
from lossgrad_compiler.errors import LossGradError
from lossgrad_compiler.passes.ascendc_plan_buffers import AscendcPlanBuffersPass
from lossgrad_compiler.passes.convert_linalg_to_ascendc import ConvertLinalgToAscendcPass


@dataclass(frozen=True)
class AscendCOptOutput(Target):
    """Print Ascend C kernels (options: soc)."""

    name = "ascendc"
    soc: str = DEFAULT_SOC

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        module = module.clone()
        if any(isinstance(op, GenericOp) for op in module.walk()):
            ConvertLinalgToAscendcPass().apply(ctx, module)
        kernels = [k for k in module.walk() if isinstance(k, asc.KernelOp)]
        if any(k.tile_length.value.data == 0 for k in kernels):
            AscendcPlanBuffersPass(soc=self.soc).apply(ctx, module)
        names = _names_by_kernel(module)
        for kernel in kernels:
            printed = names.get(kernel.sym_name.data) or _plain_names(kernel)
            output.write(f"// ----- op_kernel/{printed.tiling_header}\n")
            output.write(print_tiling_header(kernel, printed))
            output.write(f"// ----- op_kernel/{printed.entry}.cpp\n")
            output.write(print_kernel(kernel, printed))


def _names_by_kernel(module: ModuleOp) -> dict[str, KernelNames]:
    out = {}
    for function in module.walk():
        if not isinstance(function, func.FuncOp):
            continue
        launches = [op for op in function.walk() if isinstance(op, asc.LaunchOp)]
        try:
            info = signature_info(function)
        except LossGradError:
            continue
        for launch in launches:
            out[launch.kernel.root_reference.data] = kernel_names(info)
    return out


def _plain_names(kernel: asc.KernelOp) -> KernelNames:
    entry = sanitize(kernel.sym_name.data).lower()
    camel = "".join(part.capitalize() for part in entry.split("_"))
    n_global = len(kernel.global_args)
    inputs = kernel.num_inputs.value.data
    params = [kernel.arg_name(a) for a in kernel.global_args]
    if len(set(params)) != n_global:
        names = [*spec.INPUT_NAMES, *(f"input{k}" for k in range(len(spec.INPUT_NAMES), inputs))]
        params = [*names[:inputs], *(f"out{k}" for k in range(n_global - inputs))]
    return KernelNames(
        entry=entry,
        class_name=f"Kernel{camel}",
        tiling_struct=f"{camel}TilingData",
        tiling_header=f"{entry}_tiling.h",
        params=tuple(sanitize(p) for p in params),
    )
