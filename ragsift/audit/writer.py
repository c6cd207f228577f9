"""How audit bytes reach the disk: the ``RowWriter`` protocol and its OS implementation.

The sink never appends blindly: it writes at the offset where its last good
row ends, so whatever a failed attempt left behind (half a batch on a full
disk) is cut off before the retry writes the batch again.
"""

from __future__ import annotations

import errno
import os
from contextlib import suppress
from pathlib import Path
from typing import Protocol

__all__ = ["DiskWriter", "RowWriter", "fsync_directory"]

#: rw for the worker, read for its group (log shippers); evidence is not world-readable
FILE_MODE = 0o640


class RowWriter(Protocol):
    """Puts bytes in a file at a known offset; raises ``OSError`` when the disk fails."""

    def write_at(self, path: Path, offset: int, data: bytes, *, fsync: bool) -> None:
        """Write ``data`` at ``offset``, dropping anything past it first, then flush."""
        ...


class DiskWriter:
    """The real writer: ``pwrite`` at the offset, ``fsync`` when asked."""

    def write_at(self, path: Path, offset: int, data: bytes, *, fsync: bool) -> None:
        """Write ``data`` at ``offset`` of ``path`` (created if missing), then flush.

        Raises:
            OSError: the disk refused (ENOSPC, EIO...) or the file is shorter than
                ``offset`` (changed outside the sink: writing would leave a hole).
        """
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
        try:
            size = os.fstat(fd).st_size
            if size < offset:
                raise OSError(
                    errno.EIO,
                    f"{path} is {size} bytes, expected {offset}: changed outside the sink",
                )
        except OSError:
            os.close(fd)
            raise
        try:
            if size > offset:
                os.ftruncate(fd, offset)  # the remains of a failed attempt
            view = memoryview(data)
            position = offset
            while view:
                written = os.pwrite(fd, view, position)
                view = view[written:]
                position += written
            if fsync:
                os.fsync(fd)
        except OSError:
            # Leave the file as it was, if the disk lets us; else the next attempt cuts it.
            with suppress(OSError):
                os.ftruncate(fd, offset)
            raise
        finally:
            os.close(fd)


def fsync_directory(directory: Path) -> None:
    """Make a created or renamed file's directory entry durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
