"""`python -m benchmarks.device_check prepare|run` (scripts/device_check.sh calls it)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from benchmarks.device_check import bundle, cases
from benchmarks.device_check.install import install_missing


def class_shape(text: str) -> tuple[int, int]:
    """'4096x32000' as (4096, 32000)."""
    rows, sep, classes = text.partition("x")
    if not (sep and rows.isdigit() and classes.isdigit()) or int(classes) == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NxC with C >= 1, as 256x10")
    return int(rows), int(classes)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="scripts/device_check.sh", description="IREE modules checked and timed on a GPU"
    )
    phases = top.add_subparsers(dest="phase", required=True)
    prepare = phases.add_parser("prepare", help="compile and write the bundle (this machine)")
    prepare.add_argument("--bundle", type=Path, default=bundle.DEFAULT_BUNDLE)
    prepare.add_argument("--backend", choices=("cuda", "llvm-cpu"), default="cuda")
    prepare.add_argument("--arch", help="GPU (default sm_80) or CPU (default host)")
    prepare.add_argument("--sizes", type=int, nargs="+", default=cases.SIZES, help="log2 n")
    prepare.add_argument(
        "--class-shapes", type=class_shape, nargs="*", default=cases.CLASS_SHAPES,
        metavar="NxC", help="[N, C] of the classification cases",
    )  # fmt: skip
    prepare.add_argument("--types", nargs="+", default=cases.TYPES)
    prepare.add_argument("--no-wheels", action="store_true", help="carry no runtime wheels")
    run = phases.add_parser("run", help="install, check and time (the device)")
    run.add_argument("--bundle", type=Path, default=bundle.DEFAULT_BUNDLE)
    run.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out/device-check")))
    run.add_argument("--site", type=Path, help="where the wheels go (default: a scratch folder)")
    run.add_argument("--budget-s", type=float, default=360.0, help="cases start within it")
    run.add_argument("--turn-s", type=float, default=0.5, help="timed turns per case")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.phase == "prepare":
        # deferred: the device, which runs only `run`, has neither xDSL nor IREE's compiler
        from benchmarks.device_check.prepare import prepare, size_report

        manifest = prepare(
            args.bundle, args.backend, args.arch, tuple(args.sizes), tuple(args.types),
            with_wheels=not args.no_wheels, class_shapes=tuple(args.class_shapes),
        )  # fmt: skip
        print(f"{len(manifest.cases)} cases in {len(manifest.modules)} modules")
        print(size_report(args.bundle, Path.cwd()))
        return 0
    site = args.site or Path(tempfile.mkdtemp(prefix="device-check-site-"))
    installed = install_missing(args.bundle, site)
    print(f"installed into {site}: {', '.join(installed)}" if installed else "installed: none")
    # deferred: run imports iree.runtime and ml_dtypes, which the wheels may have brought
    from benchmarks.device_check.run import run

    return run(args.bundle, args.out, args.budget_s, args.turn_s)


if __name__ == "__main__":
    sys.exit(main())
