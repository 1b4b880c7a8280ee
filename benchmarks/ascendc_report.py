"""The static report of the Ascend C kernels (no hardware, no compiler: read from the IR).

    .venv/bin/python benchmarks/ascendc_report.py                    # none and mean, 1M elements
    .venv/bin/python benchmarks/ascendc_report.py --soc ascend950 --elements 5000000
    .venv/bin/python benchmarks/ascendc_report.py --reductions mean --details

Per kernel: vector instructions per tile beside CANN's A2 kernels for the same case
(reference/ascend-c.md §2.6), data copies per tile, the planned tile length, UB bytes in
buffers, and the cores and tiles per core the tiling function gives for --elements.
"""

from __future__ import annotations

from lossgrad_compiler.backends.ascendc.report import main

if __name__ == "__main__":
    main()
