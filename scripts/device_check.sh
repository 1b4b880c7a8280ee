#!/bin/sh
# The device check (docs/device-check.md): level 2 compiled by IREE here, run, checked and
# timed on a GPU machine that has no compiler and no package registry.
#
#   scripts/device_check.sh prepare [--backend cuda|llvm-cpu] [--sizes 16 18 20 22 24] [--no-wheels]
#       this machine: compile, record the reference's digests, download the runtime wheels
#       into build/device-bundle (carried to the device; it must stay under 64 MiB)
#   scripts/device_check.sh run [--bundle build/device-bundle] [--out "$OUT"]
#       the device: install the carried wheels into a scratch folder, run every case on the
#       module's device, check it against reference.py and time it beside PyTorch; writes
#       table.md, results.json and log.txt
#
# prepare runs with .venv's Python (xDSL, iree-base-compiler, pip), run with python3 (the
# device's: numpy, torch); PYTHON overrides either. `<phase> --help` lists the options.
set -eu
cd "$(dirname "$0")/.."
case "${1:-}" in
prepare)
    python=${PYTHON:-.venv/bin/python}
    [ -x "$python" ] || python=python3
    ;;
run)
    python=${PYTHON:-python3}
    # IREE's CUDA driver opens libcuda.so by that name (benchmarks/device_check/libcuda.py)
    links=$("$python" -m benchmarks.device_check.libcuda)
    if [ -n "$links" ]; then
        export LD_LIBRARY_PATH="$links${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    ;;
*)
    echo "usage: $0 prepare|run [options]  ($0 prepare --help)" >&2
    exit 2
    ;;
esac
PYTHONUNBUFFERED=1 exec "$python" -m benchmarks.device_check "$@"
