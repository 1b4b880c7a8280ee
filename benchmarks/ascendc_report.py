"""The static report of the Ascend C kernels (no hardware, no compiler: read from the IR).

    .venv/bin/python benchmarks/ascendc_report.py                    # none and mean, 1M elements
    .venv/bin/python benchmarks/ascendc_report.py --soc ascend950 --elements 5000000
    .venv/bin/python benchmarks/ascendc_report.py --reductions mean --details
    .venv/bin/python benchmarks/ascendc_report.py --no-ascendnpu-ir  # without the vendor columns

Per kernel: vector instructions per tile (and how many are Casts) beside CANN's A2 kernels
for the same case (ascendc_cann.py; docs/ascend-c.md, "CANN's kernels"), vector repeats per
128 elements, data copies per tile, the planned tile length, UB bytes in buffers, and the
cores and tiles per core the tiling function gives for --elements. Where a kernel has more
instructions than CANN's, the report says why, measured: the instructions left after
taking out the Casts, and for CANN's half-precision KlDivTargetBackward sample, how many
results its half arithmetic would change.

With the extra `ascend` installed, a second table sets each kernel beside AscendNPU IR's plan
for the same signature (ascendnpu_ir_plan.py): HIVM vector ops per element and how many are
casts, the tile, the UB in use, and the vector cores its own tiling function gives work for
--elements.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendc.host_printer import block_elements
from lossgrad_compiler.backends.ascendc.project import lower_to_ascendc
from lossgrad_compiler.dialects import ascendc as asc
from lossgrad_compiler.dialects.ascendc.soc import DEFAULT_SOC
from lossgrad_compiler.dialects.ascendc.soc import soc as soc_named
from lossgrad_compiler.frontend.lowering import lower_signatures
from lossgrad_compiler.frontend.signature import signature_of

try:  # imported as benchmarks.ascendc_report (the tests)
    from benchmarks.ascendc_cann import (
        COMPARED,
        CannKernel,
        HalfMismatch,
        cann_kernel,
        sample_in_half,
    )
except ModuleNotFoundError:  # run as a script: benchmarks/ is sys.path[0]
    from ascendc_cann import COMPARED, CannKernel, HalfMismatch, cann_kernel, sample_in_half

if TYPE_CHECKING:
    try:
        from benchmarks.ascendnpu_ir_plan import VendorPlan
    except ModuleNotFoundError:
        from ascendnpu_ir_plan import VendorPlan

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


@dataclass(frozen=True)
class KernelReport:
    op: str
    variant: str  # "log_target=0", "beta=0", ...
    dtype: str
    scalar_g: bool
    reduction: str
    instructions: tuple[str, ...]  # the vector instructions of one tile, in order
    widths: tuple[int, ...]  # bytes of the widest element each instruction touches
    copies_in: int
    copies_out: int
    tile_length: int
    ub_bytes: int
    ub_capacity: int
    block_elements: int
    cann_kernel: CannKernel | None

    @property
    def vector_ops(self) -> int:
        return len(self.instructions)

    @property
    def casts(self) -> int:
        return self.instructions.count("cast")

    @property
    def cann(self) -> int | None:
        return None if self.cann_kernel is None else self.cann_kernel.calls

    @property
    def repeats_per_128(self) -> int:
        """Vector repeats per 128 elements: 256 bytes per repeat, at the widest element."""
        return sum(128 * w // 256 for w in self.widths)

    @property
    def ub_fraction(self) -> float:
        return self.ub_bytes / self.ub_capacity

    @property
    def label(self) -> str:
        g = "scalar" if self.scalar_g else "tensor"
        return f"{self.op} {self.variant} {self.reduction} {self.dtype} {g} g"

    def cores(self, elements: int, vector_cores: int) -> int:
        blocks = math.ceil(elements / self.block_elements)
        return max(1, min(vector_cores, blocks))

    def tiles_per_core(self, elements: int, vector_cores: int) -> int:
        blocks = math.ceil(elements / self.block_elements)
        per_core = math.ceil(blocks / self.cores(elements, vector_cores)) * self.block_elements
        return math.ceil(per_core / self.tile_length)


def _widest_bytes(op: asc.VectorOp) -> int:
    """Bytes of the widest tile element among the instruction's operands (masks excluded)."""
    bits = [
        asc.element_bits(v.type.element_type)
        for v in op.operands
        if isinstance(v.type, asc.LocalTensorType)
    ]
    return max((b for b in bits if b > 1), default=32) // 8


def kernel_report(
    op_type: str, attrs: dict[str, Any], dtype: str, scalar_g: bool, soc: str = DEFAULT_SOC
) -> KernelReport:
    t = DTYPES[dtype]
    shapes = {"grad_output": () if scalar_g else (4,), "self": (4,), "target": (4,)}
    infos = {n: spec.TensorInfo(np.dtype(t), s) for n, s in shapes.items()}
    checked = spec.validate(op_type, infos, attrs)
    lowered = lower_to_ascendc(lower_signatures([signature_of(checked)]), soc)
    kernel = next(k for k in lowered.walk() if isinstance(k, asc.KernelOp))
    compute = kernel.loop.stage("compute")
    vector = [op for op in compute.ops if isinstance(op, asc.VectorOp)]
    copies = [op for op in kernel.walk() if isinstance(op, asc.CopyInOp | asc.CopyOutOp)]
    variant = ",".join(f"{k}={v}" for k, v in attrs.items() if k != "reduction")
    return KernelReport(
        op=op_type,
        variant=variant,
        dtype=dtype,
        scalar_g=scalar_g,
        reduction=attrs["reduction"],
        instructions=tuple(op.name.removeprefix("ascendc.") for op in vector),
        widths=tuple(_widest_bytes(op) for op in vector),
        copies_in=sum(isinstance(c, asc.CopyInOp) for c in copies),
        copies_out=sum(isinstance(c, asc.CopyOutOp) for c in copies),
        tile_length=kernel.tile_length.value.data,
        ub_bytes=kernel.ub_bytes.value.data,
        ub_capacity=kernel.ub_capacity.value.data,
        block_elements=block_elements(kernel),
        cann_kernel=cann_kernel(op_type, dict(attrs), dtype, scalar_g),
    )


def arithmetic_excess(r: KernelReport) -> int:
    """Vector instructions other than Casts beyond those of CANN's kernel (0 if none)."""
    if r.cann_kernel is None:
        return 0
    return max(0, (r.vector_ops - r.casts) - (r.cann_kernel.calls - r.cann_kernel.casts))


ORDER_EXCESS: dict[tuple[str, str], tuple[int, str]] = {
    ("KlDivTargetBackward", "log_target=1"): (
        1,
        "The excess is PyTorch's order of autograd's two terms, (ge*(t - x))*exp(t) + "
        "ge*exp(t), which the contract follows so that exported graphs fuse exactly: two "
        "products by exp(t) where CANN's kernel groups ge*(exp(t)*((t + 1) - x)).",
    ),
}
"""Arithmetic beyond CANN's kernel that the contract's order of operations costs, per
(operator, variant): how many instructions, and why."""


def excess_reason(r: KernelReport, half: HalfMismatch | None) -> str:
    """Why a kernel has more vector instructions per tile than CANN's, from the counts."""
    assert r.cann_kernel is not None
    ours, theirs = r.vector_ops - r.casts, r.cann_kernel.calls - r.cann_kernel.casts
    text = (
        f"{r.vector_ops} vs {r.cann} vector ops per tile; without Casts {ours} vs {theirs}, "
        f"Casts {r.casts} vs {r.cann_kernel.casts}."
    )
    known, why = ORDER_EXCESS.get((r.op, r.variant), (0, ""))
    if arithmetic_excess(r) > known:
        return text + " More arithmetic than CANN's kernel."
    if arithmetic_excess(r):
        text += " " + why
    if r.casts <= r.cann_kernel.casts:
        return text
    in_half = r.cann_kernel.compute_bytes == 2
    text += (
        (" Beyond it, the Casts" if arithmetic_excess(r) else " The excess is the Casts")
        + " of the contract's float32 compute"
        + (" (CANN computes this type in half precision)." if in_half else ".")
    )
    if half is not None:
        text += (
            f" CANN's instruction order in half, measured on {half.elements:,} random inputs:"
            f" {100 * half.fraction:.1f}% of results differ from reference.py, by up to"
            f" {half.max_ulps} ulp."
        )
    return text


def report_cases(
    reductions: Sequence[str] = ("none", "mean"),
) -> Iterator[tuple[str, dict, str, bool]]:
    for op in spec.OPERATORS.values():
        if op.name not in COMPARED:  # nothing of CANN's to set beside it
            continue
        variants = (
            [{"beta": 0.0}, {"beta": 1.0}]
            if op is spec.SMOOTH_L1_LOSS_BACKWARD
            else [{"log_target": 0}, {"log_target": 1}]
        )
        for variant in variants:
            for reduction in [r for r in reductions if r in {x.value for x in op.reductions}]:
                for dtype in DTYPES:
                    for scalar_g in (False, True):
                        yield op.name, {"reduction": reduction, **variant}, dtype, scalar_g


def table(reports: Sequence[KernelReport], elements: int, vector_cores: int) -> str:
    lines = [
        f"| operator | variant | reduction | type | grad_output | vector ops / tile | CANN | "
        f"casts (CANN) | repeats / 128 el. (CANN) | copies in+out | tile | UB used | "
        f"cores @ {elements:,} | tiles / core |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for r in reports:
        c = r.cann_kernel
        cann = "" if c is None else str(c.calls)
        casts = f"{r.casts}" + ("" if c is None else f" ({c.casts})")
        repeats = f"{r.repeats_per_128}" + ("" if c is None else f" ({c.repeats_per_128})")
        lines.append(
            f"| {r.op} | {r.variant} | {r.reduction} | {r.dtype} | "
            f"{'scalar' if r.scalar_g else 'tensor'} | {r.vector_ops} | {cann} | "
            f"{casts} | {repeats} | {r.copies_in}+{r.copies_out} | {r.tile_length} | "
            f"{r.ub_bytes:,} / {r.ub_capacity:,} ({100 * r.ub_fraction:.1f}%) | "
            f"{r.cores(elements, vector_cores)} | {r.tiles_per_core(elements, vector_cores)} |"
        )
    return "\n".join(lines)


def vendor_plans(
    reports: Sequence[KernelReport], soc: str, elements: int
) -> list[VendorPlan] | str:
    """AscendNPU IR's plan per kernel, or why it is not available."""
    try:  # deferred: AscendNPU IR and its CPU runner are an optional extra
        try:
            from benchmarks.ascendnpu_ir_plan import vendor_plan
        except ModuleNotFoundError:
            from ascendnpu_ir_plan import vendor_plan
        return [
            vendor_plan(r.op, _attrs(r), DTYPES[r.dtype], r.scalar_g, soc, elements)
            for r in reports
        ]
    except (ImportError, RuntimeError) as err:
        return f"AscendNPU IR's plan is not available: {err}"


def _attrs(r: KernelReport) -> dict[str, Any]:
    name, value = r.variant.split("=")
    return {"reduction": r.reduction, name: float(value) if name == "beta" else int(value)}


def vendor_table(
    reports: Sequence[KernelReport], plans: Sequence[VendorPlan], elements: int, cores: int
) -> str:
    lines = [
        f"| operator | variant | reduction | type | grad_output | vector ops (AscendNPU IR) | "
        f"casts (AscendNPU IR) | tile (AscendNPU IR) | UB used (AscendNPU IR, est.) | "
        f"cores @ {elements:,} (AscendNPU IR) |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r, p in zip(reports, plans, strict=True):
        lines.append(
            f"| {r.op} | {r.variant} | {r.reduction} | {r.dtype} | "
            f"{'scalar' if r.scalar_g else 'tensor'} | {r.vector_ops} ({p.vector_ops}) | "
            f"{r.casts} ({p.casts}) | {r.tile_length} ({p.tile}) | "
            f"{r.ub_bytes:,} ({p.ub_bytes:,} = {p.buffers} x {p.tile * p.smallest_bytes:,}) | "
            f"{r.cores(elements, cores)} ({p.blocks}) |"
        )
    return "\n".join(lines)


def half_measurement(r: KernelReport) -> HalfMismatch | None:
    """The half-precision replay of CANN's kernel, where CANN computes in half."""
    if r.cann_kernel is None or r.cann_kernel.compute_bytes != 2:
        return None
    attrs = {"reduction": r.reduction, "log_target": int(r.variant.split("=")[1])}
    return sample_in_half(attrs, r.scalar_g)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Static report of the Ascend C kernels.")
    parser.add_argument("--soc", default=DEFAULT_SOC)
    parser.add_argument("--elements", type=int, default=1_000_000, help="size for the core split")
    parser.add_argument("--reductions", default="none,mean", help="comma-separated reductions")
    parser.add_argument("--details", action="store_true", help="list each kernel's instructions")
    parser.add_argument(
        "--no-ascendnpu-ir", action="store_true", help="leave out AscendNPU IR's plan"
    )
    args = parser.parse_args(argv)
    chip = soc_named(args.soc)
    reports = [
        kernel_report(*case, soc=args.soc) for case in report_cases(args.reductions.split(","))
    ]
    print(
        f"Ascend C kernels on {chip.name} ({chip.description}): "
        f"UB {chip.ub_bytes:,} bytes, {chip.vector_cores} vector cores.\n"
    )
    print(table(reports, args.elements, chip.vector_cores))
    worse = [r for r in reports if r.cann is not None and r.vector_ops > r.cann]
    low_ub = [r for r in reports if r.ub_fraction < 0.9]
    only_casts = [r for r in worse if arithmetic_excess(r) == 0]
    print(f"\n{len(reports)} kernels; {len(worse)} with more vector ops per tile than CANN's "
          f"({len(only_casts)} of them only by Casts); "
          f"{len(low_ub)} using less than 90% of the UB.")  # fmt: skip
    for r in worse:
        print(f"  more than CANN: {r.label}: {excess_reason(r, half_measurement(r))}")
    if not args.no_ascendnpu_ir:
        plans = vendor_plans(reports, args.soc, args.elements)
        if isinstance(plans, str):
            print(f"\n{plans}")
        else:
            print("\nBeside AscendNPU IR's plan for the same signatures (in parentheses):\n")
            print(vendor_table(reports, plans, args.elements, chip.vector_cores))
    if args.details:
        for r in reports:
            g = "scalar" if r.scalar_g else "tensor"
            print(f"{r.op} {r.variant} {r.reduction} {r.dtype} {g}: {' '.join(r.instructions)}")


if __name__ == "__main__":
    main()
