"""An exclusive lock on a file, across processes (``flock``): one writer at a time in a
folder that several ragsift processes share (the audit sink, Qdrant Edge's creation of
a collection). Advisory and local: a network file system without ``flock`` is not covered.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["exclusive"]


@contextmanager
def exclusive(path: Path, mode: int = 0o640) -> Iterator[None]:
    """Hold ``path``'s lock (the file is created if missing) until the block ends; the
    lock goes with its descriptor, so a process that dies releases it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
