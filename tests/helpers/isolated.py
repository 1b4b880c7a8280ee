"""Python snippets run in a fresh interpreter with their own build cache, so that a crash
(SIGBUS from a damaged library) shows as a signal instead of ending the test process, and
the process-wide caches of the library path do not hide a rebuild."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_python(
    code: str,
    cache: Path | str | None,
    *args: str,
    prefix: tuple[str, ...] = (),
    timeout: int = 1200,
) -> subprocess.CompletedProcess[str]:
    """Run `code` (sys.argv[1:] = args) from the repository root with LOSSGRAD_CACHE_DIR set
    to `cache` (None: the test process's own cache)."""
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    if cache is not None:
        env["LOSSGRAD_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [*prefix, sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def outcome(done: subprocess.CompletedProcess[str]) -> str:
    """How a process ended, a signal by its name, with the end of its stderr."""
    if done.returncode < 0:
        how = f"killed by {signal.Signals(-done.returncode).name}"
    else:
        how = f"exit status {done.returncode}"
    return f"{how}; stderr: {done.stderr[-3000:]}"


def unwritable_directory(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    """An existing directory that the process run with the returned command prefix cannot
    write to. Permission bits (mode 0555) stop a user; root ignores them, so as root the
    process runs without capabilities (util-linux setpriv), or, without setpriv, the
    directory is /sys, which the kernel refuses to create entries in for everyone."""
    directory = tmp_path / "read-only"
    directory.mkdir()
    directory.chmod(0o555)
    if os.geteuid() != 0:
        return directory, ()
    setpriv = shutil.which("setpriv")
    if setpriv:
        return directory, (setpriv, "--inh-caps=-all", "--bounding-set=-all")
    return Path("/sys"), ()
