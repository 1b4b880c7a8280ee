"""The on-disk cache of the native builds (ORT kernel library, Ascend C emulation): where it
is, whether an entry is whole, and what the user sees while a long build runs.

An entry is trusted only when its manifest, written atomically after its files were renamed
into place, matches them: size and SHA-256 of every file. A file that was truncated or
damaged after the build (a full disk, a copy cut short, a crash before the data reached the
disk) is rebuilt instead of being loaded, which for a shared library would end the process
with SIGBUS."""

from __future__ import annotations

import contextlib
import errno
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


def cache_origin() -> str:
    """Where the cache's location comes from, for messages."""
    configured = os.environ.get(ENV_CACHE)
    return f"${ENV_CACHE}={configured}" if configured else f"the default (${ENV_CACHE} is not set)"


def cache_dir_problem(err: OSError, directory: Path) -> str:
    """One line naming the directory, the variable that chose it and what went wrong."""
    origin = cache_origin()
    reason = err.strerror or type(err).__name__
    failed = f" ({err.filename})" if err.filename and str(err.filename) != str(directory) else ""
    advice = (
        f"free space there or set ${ENV_CACHE} to a directory with room"
        if err.errno in SPACE_ERRNOS
        else f"set ${ENV_CACHE} to a writable directory"
    )
    return f"cannot use the build cache {directory} from {origin}: {reason}{failed}; {advice}"


def prepare_cache_dir(directory: Path) -> None:
    """Create `directory` (and its parents); CacheDirError names the variable on failure."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not directory.is_dir():
            raise NotADirectoryError(20, os.strerror(20), str(directory))
    except OSError as err:
        raise CacheDirError(cache_dir_problem(err, directory)) from None


# --------------------------------------------------------------------------- full disks

# The errors of a file system without room: no space, over quota, over RLIMIT_FSIZE.
SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
SPACE_MESSAGES = (*(os.strerror(code) for code in SPACE_ERRNOS), "File size limit exceeded")
SPACE_FORMAT = 1


def out_of_space(directory: Path, what: str, line: str) -> str:
    """One line: building `what` in the cache `directory` ran out of room (`line`)."""
    return (
        f"cannot build {what} in the build cache {directory} from {cache_origin()}: {line}; "
        f"free space there or set ${ENV_CACHE} to a directory with room"
    )


def space_problem(compiler_output: str) -> str | None:
    """The compiler's (or linker's) line saying that a file system had no room, or None.
    GNU ld ends with "final link failed: No space left on device", as with "can't write":
    a full disk is an environment fault, not a defect of the source."""
    for line in compiler_output.splitlines():
        if any(message in line for message in SPACE_MESSAGES):
            return line.strip()
    return None


def free_bytes(directory: Path | str) -> int:
    """Bytes an unprivileged process may still write on the file system of `directory`."""
    try:
        info = os.statvfs(directory)
    except OSError:
        return 0
    return info.f_bavail * info.f_frsize


def remember_space_failure(marker: Path, message: str, places: list[Path | str]) -> None:
    """Record that a build ran out of space, with the room left in `places` (the cache and
    the compiler's temporary directory), so that later processes do not compile again in
    vain. Best effort: a file system too full for the marker is too full for the source
    too, so the next attempt fails at once anyway."""
    record = {
        "format": SPACE_FORMAT,
        "message": message,
        "free": {str(p): free_bytes(p) for p in places},
    }
    with contextlib.suppress(OSError):
        write_atomically(marker, json.dumps(record, indent=1, sort_keys=True).encode("utf-8"))


def remembered_space_failure(marker: Path) -> str | None:
    """The message of an earlier out-of-space build of the same entry while none of the
    places it recorded has gained room since (more than twice as much free, plus 1 MiB);
    None when there is none or it is worth trying again (the marker is then removed)."""
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
        if record.get("format") != SPACE_FORMAT:
            raise ValueError(marker.name)
        message, free = str(record["message"]), dict(record["free"])
        gained = any(free_bytes(p) > 2 * int(then) + (1 << 20) for p, then in free.items())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        gained = True  # an unreadable marker is no reason to refuse a build
    if gained:
        with contextlib.suppress(OSError):
            marker.unlink()
        return None
    return message


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
    """Write `path` through a temporary file in its folder (made if missing), renamed into
    place, so that a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
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
