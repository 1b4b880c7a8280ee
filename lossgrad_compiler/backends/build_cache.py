"""The on-disk cache of the native builds (ORT kernel library, Ascend C emulation): where it
is, whether an entry is whole, and what the user sees while a long build runs.

An entry is trusted only when its manifest, written atomically after its files were renamed
into place, matches them: size and SHA-256 of every file. A file that was truncated or
damaged after the build (a full disk, a copy cut short, a crash before the data reached the
disk) is rebuilt instead of being loaded, which for a shared library would end the process
with SIGBUS."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

ENV_CACHE = "LOSSGRAD_CACHE_DIR"
MANIFEST_FORMAT = 1


class CacheDirError(OSError):
    """The cache directory cannot hold builds (not a directory, not writable, ...)."""


def default_cache_root() -> Path:
    return Path.home() / ".cache" / "lossgrad_compiler"


def cache_root() -> Path:
    """$LOSSGRAD_CACHE_DIR, else ~/.cache/lossgrad_compiler."""
    configured = os.environ.get(ENV_CACHE)
    return Path(configured) if configured else default_cache_root()


def cache_dir_problem(err: OSError, directory: Path) -> str:
    """One line naming the directory, the variable that chose it and what went wrong."""
    configured = os.environ.get(ENV_CACHE)
    origin = (
        f"${ENV_CACHE}={configured}" if configured else f"the default (${ENV_CACHE} is not set)"
    )
    reason = err.strerror or type(err).__name__
    failed = f" ({err.filename})" if err.filename and str(err.filename) != str(directory) else ""
    return (
        f"cannot use the build cache {directory} from {origin}: {reason}{failed}; "
        f"set ${ENV_CACHE} to a writable directory"
    )


def prepare_cache_dir(directory: Path) -> None:
    """Create `directory` (and its parents); CacheDirError names the variable on failure."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not directory.is_dir():
            raise NotADirectoryError(20, os.strerror(20), str(directory))
    except OSError as err:
        raise CacheDirError(cache_dir_problem(err, directory)) from None


# --------------------------------------------------------------------------- manifests


def file_digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def write_manifest(manifest: Path, files: Mapping[str, Path]) -> None:
    """Record size and SHA-256 of `files` (name relative to the manifest's folder → path),
    atomically: a reader sees the complete manifest or none."""
    entries = {
        name: {"size": path.stat().st_size, "sha256": file_digest(path)}
        for name, path in files.items()
    }
    text = json.dumps({"format": MANIFEST_FORMAT, "files": entries}, indent=1, sort_keys=True)
    write_atomically(manifest, text.encode("utf-8"))


def manifest_problem(manifest: Path) -> str | None:
    """None when every file the manifest lists has its recorded size and checksum, else what
    is wrong."""
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8"))
        files = recorded["files"]
        if recorded.get("format") != MANIFEST_FORMAT or not isinstance(files, dict) or not files:
            return f"{manifest.name} has an unknown format"
    except FileNotFoundError:
        return f"it has no manifest {manifest.name} (an interrupted build, or an older version)"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        return f"{manifest.name} is unreadable ({type(err).__name__})"
    for name, expected in files.items():
        path = manifest.parent / name
        try:
            size = path.stat().st_size
            if size != expected["size"]:
                return f"{name} has {size} bytes, {expected['size']} were built"
            if file_digest(path) != expected["sha256"]:
                return f"{name} does not match the checksum recorded when it was built"
        except FileNotFoundError:
            return f"{name} is missing"
        except OSError as err:
            return f"{name} is unreadable ({err.strerror})"
        except (KeyError, TypeError):
            return f"{manifest.name} is unreadable"
    return None


def write_atomically(path: Path, data: bytes) -> None:
    """Write `path` through a temporary file in its folder, renamed into place."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def cached_build(
    folder: Path,
    product: str,
    notice: tuple[str, str, str],
    build: Callable[[Path], Mapping[str, Path]],
) -> Path:
    """`folder / product`, from the cache when its manifest checks out, else built now:
    `build(folder)` writes the files and returns those the manifest records, and the build is
    announced by build_notice(*notice) (what, why, duration)."""
    manifest = folder / "manifest.json"
    if manifest_problem(manifest) is None:
        return folder / product
    prepare_cache_dir(folder)
    with build_notice(*notice):
        files = build(folder)
    write_manifest(manifest, files)
    return folder / product


# --------------------------------------------------------------------------- build notices


@contextmanager
def build_notice(
    what: str, why: str, duration: str, stream: TextIO | None = None
) -> Iterator[None]:
    """Say on stderr that a long build starts: what, why, roughly how long. On a terminal a
    spinner with the elapsed seconds follows until the build ends; elsewhere (logs, CI) the
    notice is one plain line."""
    stream = stream if stream is not None else sys.stderr
    line = f"lossgrad: building {what} ({why}); {duration}"
    interactive = _is_terminal(stream)
    if not interactive:
        print(f"{line} ...", file=stream, flush=True)
        yield
        return
    done = threading.Event()
    start = time.monotonic()

    def spin() -> None:
        for mark in itertools.cycle("|/-\\"):
            _write(stream, f"\r{line} {mark} {time.monotonic() - start:.0f} s")
            if done.wait(0.25):
                return

    spinner = threading.Thread(target=spin, name="lossgrad-build-notice", daemon=True)
    spinner.start()
    outcome = "failed"
    try:
        yield
        outcome = "done"
    finally:
        done.set()
        spinner.join()
        _write(stream, f"\r{line}: {outcome} in {time.monotonic() - start:.0f} s\n")


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _write(stream: TextIO, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):  # a closed or broken stderr never stops a build
        pass
