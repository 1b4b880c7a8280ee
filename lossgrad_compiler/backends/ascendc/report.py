"""The static report of the Ascend C kernels: vector instructions per tile, data copies, tile
length, UB bytes and the cores a given size uses, beside CANN's own kernels' figures
(ascend-c.md §2.6). Nothing runs: the numbers are read from the planned IR and from the
tiling function's formulas.

    python -m lossgrad_compiler.backends.ascendc.report [--soc ascend910b] [--elements N]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendc.host_printer import block_elements
from lossgrad_compiler.backends.ascendc.project import lower_to_ascendc
from lossgrad_compiler.backends.ascendc.soc import DEFAULT_SOC
from lossgrad_compiler.backends.ascendc.soc import soc as soc_named
from lossgrad_compiler.dialects import ascendc as asc

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


@dataclass(frozen=True)
class KernelReport:
    op: str
    variant: str  # "log_target=0", "beta=0", ...
    dtype: str
    scalar_g: bool
    reduction: str
    instructions: tuple[str, ...]  # the vector instructions of one tile, in order
    copies_in: int
    copies_out: int
    tile_length: int
    ub_bytes: int
    ub_capacity: int
    block_elements: int
    cann: int | None

    @property
    def vector_ops(self) -> int:
        return len(self.instructions)

    @property
    def ub_fraction(self) -> float:
        return self.ub_bytes / self.ub_capacity

    def cores(self, elements: int, vector_cores: int) -> int:
        blocks = math.ceil(elements / self.block_elements)
        return max(1, min(vector_cores, blocks))

    def tiles_per_core(self, elements: int, vector_cores: int) -> int:
        blocks = math.ceil(elements / self.block_elements)
        per_core = math.ceil(blocks / self.cores(elements, vector_cores)) * self.block_elements
        return math.ceil(per_core / self.tile_length)


def cann_vector_ops(op: str, attrs: dict[str, Any], dtype: str, scalar_g: bool) -> int | None:
    """Vector API calls per tile of CANN's A2 kernels for the same case (ascend-c.md §2.6)."""
    half = dtype != "f32"
    mean = attrs["reduction"] in ("mean", "batchmean")
    if op == spec.KL_DIV_BACKWARD.name:
        log = bool(attrs["log_target"])
        base = 3 if log else 2
        return base + ((2 if scalar_g else 3) if half else 0)
    if op == spec.KL_DIV_TARGET_BACKWARD.name:
        # The sample computes fp16 in half, and scales only for mean: it ignores batchmean,
        # which needs the same Muls, so batchmean is counted like mean.
        log = bool(attrs["log_target"])
        table = {"f32": 5, "f16": 5, "bf16": 9} if log else {"f32": 6, "f16": 6, "bf16": 10}
        return table[dtype] + (1 if mean else 0)
    if op == spec.SMOOTH_L1_LOSS_BACKWARD.name:  # the port: 15 vector ops + 4 UB copies (fp32)
        return (19 if half else 15) + (1 if mean else 0)
    return None


def kernel_report(
    op_type: str, attrs: dict[str, Any], dtype: str, scalar_g: bool, soc: str = DEFAULT_SOC
) -> KernelReport:
    from lossgrad_compiler.driver import lower_signatures
    from lossgrad_compiler.frontend.signature import signature_of

    t = DTYPES[dtype]
    shapes = {"grad_output": () if scalar_g else (4,), "self": (4,), "target": (4,)}
    infos = {n: spec.TensorInfo(np.dtype(t), s) for n, s in shapes.items()}
    checked = spec.validate(op_type, infos, attrs)
    lowered = lower_to_ascendc(lower_signatures([signature_of(checked)]), soc)
    kernel = next(k for k in lowered.walk() if isinstance(k, asc.KernelOp))
    compute = kernel.loop.stage("compute")
    instructions = tuple(op.name.removeprefix("ascendc.") for op in compute.ops
                         if isinstance(op, asc.VectorOp))  # fmt: skip
    copies = [op for op in kernel.walk() if isinstance(op, asc.CopyInOp | asc.CopyOutOp)]
    variant = ",".join(f"{k}={v}" for k, v in attrs.items() if k != "reduction")
    return KernelReport(
        op=op_type,
        variant=variant,
        dtype=dtype,
        scalar_g=scalar_g,
        reduction=attrs["reduction"],
        instructions=instructions,
        copies_in=sum(isinstance(c, asc.CopyInOp) for c in copies),
        copies_out=sum(isinstance(c, asc.CopyOutOp) for c in copies),
        tile_length=kernel.tile_length.value.data,
        ub_bytes=kernel.ub_bytes.value.data,
        ub_capacity=kernel.ub_capacity.value.data,
        block_elements=block_elements(kernel),
        cann=cann_vector_ops(op_type, dict(attrs), dtype, scalar_g),
    )


def report_cases(
    reductions: Sequence[str] = ("none", "mean"),
) -> Iterator[tuple[str, dict, str, bool]]:
    for op in spec.OPERATORS.values():
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
        f"copies in+out | tile | UB used | cores @ {elements:,} | tiles / core |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in reports:
        cann = "" if r.cann is None else str(r.cann)
        lines.append(
            f"| {r.op} | {r.variant} | {r.reduction} | {r.dtype} | "
            f"{'scalar' if r.scalar_g else 'tensor'} | {r.vector_ops} | {cann} | "
            f"{r.copies_in}+{r.copies_out} | {r.tile_length} | "
            f"{r.ub_bytes:,} / {r.ub_capacity:,} ({100 * r.ub_fraction:.1f}%) | "
            f"{r.cores(elements, vector_cores)} | {r.tiles_per_core(elements, vector_cores)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Static report of the Ascend C kernels.")
    parser.add_argument("--soc", default=DEFAULT_SOC)
    parser.add_argument("--elements", type=int, default=1_000_000, help="size for the core split")
    parser.add_argument("--reductions", default="none,mean", help="comma-separated reductions")
    parser.add_argument("--details", action="store_true", help="list each kernel's instructions")
    args = parser.parse_args(argv)
    target = soc_named(args.soc)
    reports = [
        kernel_report(*case, soc=args.soc) for case in report_cases(args.reductions.split(","))
    ]
    print(
        f"Ascend C kernels on {target.name} ({target.description}): "
        f"UB {target.ub_bytes:,} bytes, {target.vector_cores} vector cores.\n"
    )
    print(table(reports, args.elements, target.vector_cores))
    worse = [r for r in reports if r.cann is not None and r.vector_ops > r.cann]
    low_ub = [r for r in reports if r.ub_fraction < 0.9]
    print(f"\n{len(reports)} kernels; {len(worse)} with more vector ops per tile than CANN's; "
          f"{len(low_ub)} using less than 90% of the UB.")  # fmt: skip
    for r in worse:
        print(f"  more than CANN: {r.op} {r.variant} {r.reduction} {r.dtype} "
              f"{'scalar' if r.scalar_g else 'tensor'} g: {r.vector_ops} vs {r.cann}")  # fmt: skip
    if args.details:
        for r in reports:
            g = "scalar" if r.scalar_g else "tensor"
            print(f"{r.op} {r.variant} {r.reduction} {r.dtype} {g}: {' '.join(r.instructions)}")


if __name__ == "__main__":
    main()
