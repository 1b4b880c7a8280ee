"""Writing the command-line tools' output files without damaging what `-o` names.

A regular file is replaced atomically: the data goes to a temporary file with a short name in
the same folder, is flushed to disk and renamed over the destination, so a failure leaves the
old file (or nothing) behind, and an output name as long as the file system allows still
works. A symbolic link is followed and its target replaced the same way; a dangling link is
refused, as `cp` refuses to write through one. A FIFO or a character device (a pipe,
/dev/null, a terminal) is written to directly when the format can be streamed, and refused
otherwise. Nothing that is not a regular file is ever renamed over."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


class OutputError(Exception):
    """An output path the tool must not or cannot write (a one-line message)."""


@dataclass(frozen=True)
class Destination:
    """Where an output goes: `path` is the file to write (a symbolic link's target), and
    `stream` says it is a FIFO or character device, written in place and never renamed."""

    path: Path
    stream: bool = False


def destination(path: Path, *, streamable: bool, refusal: str = "") -> Destination:
    """Classify an output path. `streamable`: the format can be written to a FIFO or device;
    otherwise `refusal` says why it cannot (completes "'PATH' is a FIFO: ...")."""
    try:
        info = os.stat(path)  # follows symbolic links
    except FileNotFoundError:
        if path.is_symlink():
            raise OutputError(
                f"'{path}' is a dangling symbolic link (to '{os.readlink(path)}'); "
                "not writing through it: create its target or remove the link"
            ) from None
        return Destination(path)
    except OSError as err:
        raise OutputError(f"cannot write '{path}': {err.strerror or err}") from None
    if stat.S_ISREG(info.st_mode):
        return Destination(Path(os.path.realpath(path)) if path.is_symlink() else path)
    kind = file_kind(info.st_mode)
    if stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode):
        if streamable:
            return Destination(path, stream=True)
        raise OutputError(f"'{path}' is a {kind}: {refusal or 'give a regular file path'}")
    raise OutputError(f"'{path}' is a {kind}, not a file")


def file_kind(mode: int) -> str:
    """The name of a file type, for messages."""
    kinds = (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISREG, "regular file"),
    )
    return next((name for test, name in kinds if test(mode)), "special file")


class OutputFile:
    """One output being written: `file` takes the data; `commit()` puts it in place,
    `discard()` drops it. As a context manager it commits on success, discards on error.

    A regular destination is written to `.<8 hex digits>.tmp` in its folder (created with the
    permissions a new file gets, or those of the file it replaces), flushed with fsync and
    renamed over the destination; a stream destination is opened and written directly."""

    def __init__(self, where: Destination, *, text: bool = False, make_parents: bool = False):
        self.destination = where
        self._temporary: Path | None = None
        mode = "w" if text else "wb"
        encoding = "utf-8" if text else None
        if where.stream:
            descriptor = _open(where.path, os.O_WRONLY | os.O_NOCTTY)
            self.file: IO[Any] = os.fdopen(descriptor, mode, encoding=encoding)
            return
        folder = where.path.parent
        if make_parents:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise OutputError(f"cannot create '{folder}': {err.strerror or err}") from None
        descriptor, self._temporary = _create_temporary(folder)
        try:
            _copy_permissions(where.path, descriptor)
            self.file = os.fdopen(descriptor, mode, encoding=encoding)
        except BaseException:
            os.close(descriptor)
            self._temporary.unlink(missing_ok=True)
            raise

    def commit(self) -> None:
        """Make the written data the destination's content."""
        try:
            self.file.flush()
            if self._temporary is None:
                self.file.close()
                return
            os.fsync(self.file.fileno())
            self.file.close()
            _check_replaceable(self.destination.path)
            os.replace(self._temporary, self.destination.path)
        except OSError as err:
            self.discard()
            raise OutputError(
                f"cannot write '{self.destination.path}': {err.strerror or err}"
            ) from None
        except BaseException:
            self.discard()
            raise
        self._temporary = None
        _fsync_folder(self.destination.path.parent)

    def discard(self) -> None:
        """Drop the written data; the destination is left as it was (a stream keeps what
        was already written to it)."""
        with contextlib.suppress(OSError):
            self.file.close()
        if self._temporary is not None:
            self._temporary.unlink(missing_ok=True)
            self._temporary = None

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def write_bytes(where: Destination, data: bytes, *, make_parents: bool = False) -> None:
    """Write `data` to `where` (atomically unless it is a stream)."""
    with OutputFile(where, make_parents=make_parents) as output:
        output.file.write(data)


def _open(path: Path, flags: int) -> int:
    try:
        return os.open(path, flags)
    except OSError as err:
        raise OutputError(f"cannot write '{path}': {err.strerror or err}") from None


def _create_temporary(folder: Path) -> tuple[int, Path]:
    """A new file with a short random name in `folder` (mode 0666 less the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        candidate = folder / f".{secrets.token_hex(4)}.tmp"
        try:
            return os.open(candidate, flags, 0o666), candidate
        except FileExistsError:
            continue
        except OSError as err:
            raise OutputError(f"cannot write in '{folder}': {err.strerror or err}") from None
    raise OutputError(f"cannot create a temporary file in '{folder}'")


def _copy_permissions(replaced: Path, descriptor: int) -> None:
    """A replaced file keeps its permission bits (a new one gets the umask's)."""
    try:
        info = os.stat(replaced)
    except OSError:
        return
    if stat.S_ISREG(info.st_mode):
        os.fchmod(descriptor, stat.S_IMODE(info.st_mode))


def _check_replaceable(path: Path) -> None:
    """Refuse at the last moment if something that is not a regular file appeared there."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EEXIST, f"it is now a {file_kind(info.st_mode)}; not replacing it")


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable (best effort: not every file system allows it)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
