"""Writers that fail on purpose, standing in for a full or broken disk."""

from __future__ import annotations

import errno
from pathlib import Path

from ragsift.audit import DiskWriter


class FailingWriter(DiskWriter):
    """Raises ``OSError(code)`` for the first ``failures`` writes, after writing half.

    Writing half the batch first is what a disk that fills up mid-write does:
    the retry must not leave that half in the file.
    """

    def __init__(self, failures: int, code: int = errno.ENOSPC):
        self.failures = failures
        self.code = code
        self.calls = 0

    def write_at(self, path: Path, offset: int, data: bytes, *, fsync: bool) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            with path.open("ab") as handle:
                handle.write(data[: len(data) // 2])
            raise OSError(self.code, "injected disk failure")
        super().write_at(path, offset, data, fsync=fsync)
