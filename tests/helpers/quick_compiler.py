"""A $CXX for the tests whose subject is the build machinery, not the code the optimiser
writes: the cache and its bookkeeping, a damaged or missing library, a full disk, the headers
an installed package compiles with. It logs every command and runs the real compiler on it,
with -O0 appended to a compile: a whole kernel library then builds in about 30 seconds
instead of several minutes (g++ 12, one core). The command the product gives, its cache key
and the files it writes are unchanged; only that library's speed is not the product's, and
the tests that check the kernels' results and code build them with the product's flags."""

from __future__ import annotations

import shlex
from pathlib import Path

from lossgrad_compiler.backends.ort.build import find_compiler

LINK_FAILS = (
    '  echo "/usr/bin/ld: final link failed: No space left on device" >&2\n'
    '  echo "collect2: error: ld returned 1 exit status" >&2\n'
    "  exit 1\n"
)
"""What GNU ld prints on a full disk."""


def quick_compiler(folder: Path, *, fail_links: bool = False) -> tuple[Path, Path]:
    """The wrapper (in `folder`) and its log, one line per command; with `fail_links` a
    compile fails as GNU ld does on a full disk instead of running."""
    folder.mkdir(parents=True, exist_ok=True)
    log, wrapper = folder / "compiler.log", folder / "quick-cxx"
    real = shlex.join(find_compiler())
    compile_ = LINK_FAILS if fail_links else f'  exec {real} "$@" -O0\n'
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(log))}\n'
        'case "$*" in *.cc*)\n'
        f"{compile_}"
        ";;\nesac\n"
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, log


def compiles(log: Path) -> list[str]:
    """The compile commands (those naming a .cc file) the wrapper logged."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if ".cc" in line]
