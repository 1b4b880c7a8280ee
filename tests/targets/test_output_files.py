"""output_files: what each kind of output path gets, and that a regular file is only ever
replaced whole (the command-line tests cover the tools' use of it)."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from lossgrad_compiler.output_files import (
    Destination,
    OutputError,
    OutputFile,
    destination,
    write_bytes,
)


def test_new_and_regular_files_are_replaced_atomically(tmp_path: Path):
    new = tmp_path / "new.bin"
    assert destination(new, streamable=False) == Destination(new)
    write_bytes(destination(new, streamable=False), b"one")
    assert new.read_bytes() == b"one"
    write_bytes(destination(new, streamable=False), b"two")
    assert new.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["new.bin"]


def test_a_new_file_gets_the_umasks_permissions(tmp_path: Path):
    old = os.umask(0o027)
    try:
        write_bytes(destination(tmp_path / "f", streamable=False), b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o640


def test_an_error_while_writing_leaves_the_old_file(tmp_path: Path):
    path = tmp_path / "out"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), OutputFile(destination(path, streamable=False)) as output:
        output.file.write(b"half a new")
        raise RuntimeError("the compiler failed")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_nothing_but_a_regular_file_is_renamed_over(tmp_path: Path):
    """A FIFO that appears while the output is written is not replaced."""
    path = tmp_path / "out"
    output = OutputFile(destination(path, streamable=True))
    output.file.write(b"data")
    os.mkfifo(path)
    with pytest.raises(OutputError, match="it is now a FIFO; not replacing it"):
        output.commit()
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_streams_are_written_in_place_or_refused(tmp_path: Path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert destination(fifo, streamable=True) == Destination(fifo, stream=True)
    assert destination(Path("/dev/null"), streamable=True).stream
    with pytest.raises(OutputError, match=r"'.*pipe' is a FIFO: the format needs a file"):
        destination(fifo, streamable=False, refusal="the format needs a file")
    with pytest.raises(OutputError, match="is a character device: give a regular file path"):
        destination(Path("/dev/null"), streamable=False)


def test_other_file_types_are_refused(tmp_path: Path):
    with pytest.raises(OutputError, match="is a directory, not a file"):
        destination(tmp_path, streamable=True)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "sock"))
        with pytest.raises(OutputError, match="is a socket, not a file"):
            destination(tmp_path / "sock", streamable=True)
    finally:
        server.close()


def test_symbolic_links(tmp_path: Path):
    (tmp_path / "real").write_bytes(b"")
    (tmp_path / "link").symlink_to("real")
    assert destination(tmp_path / "link", streamable=False) == Destination(
        Path(os.path.realpath(tmp_path / "real"))
    )
    (tmp_path / "dangling").symlink_to("absent")
    with pytest.raises(OutputError, match="dangling symbolic link \\(to 'absent'\\)"):
        destination(tmp_path / "dangling", streamable=False)
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(OutputError, match="Too many levels of symbolic links"):
        destination(tmp_path / "loop", streamable=False)


def test_unwritable_folders_are_one_line(tmp_path: Path):
    with pytest.raises(OutputError, match=r"cannot write in .*: No such file or directory"):
        OutputFile(destination(tmp_path / "absent" / "f", streamable=False))
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OutputError, match=r"cannot create .*file"):
        OutputFile(Destination(tmp_path / "file" / "sub" / "f"), make_parents=True)
