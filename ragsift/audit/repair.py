"""Start-up repair of an audit file whose last line was torn by a crash.

A crash (or power loss) in the middle of a write leaves a partial last line.
The partial line was never acknowledged (the batch's offsets are committed only
after the write returns), so the broker redelivers it; cutting it off loses
nothing. The cut bytes are kept in ``<file>.torn-<offset>`` for the record.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ragsift.audit.writer import FILE_MODE, fsync_directory

__all__ = ["TornTail", "repair_torn_tail"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TornTail:
    """What a repair cut off: where, how many bytes, and where they were kept."""

    path: Path
    offset: int
    length: int
    kept_in: Path


def repair_torn_tail(path: Path) -> TornTail | None:
    """Cut ``path`` back to its last whole JSON line; ``None`` when it was whole.

    The last line is torn when it has no newline, or when it is not a JSON object
    (a crash can leave zero-filled blocks that do end in a newline). Only the last
    line is judged: a bad line in the middle is tampering or disk damage, left in
    place for ``ragsift audit verify`` to report.

    Raises:
        OSError: the cut bytes could not be saved; the file is left untouched.
    """
    if not path.exists():
        return None
    data = path.read_bytes()
    if not data:
        return None
    cut = _whole_prefix(data)
    if cut == len(data):
        return None
    kept_in = path.with_name(f"{path.name}.torn-{cut}")
    # Saved and flushed before the file is cut: the evidence of the tear survives a crash.
    fd = os.open(kept_in, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.write(fd, data[cut:])
        os.fsync(fd)
    finally:
        os.close(fd)
    os.truncate(path, cut)
    fsync_directory(path.parent)
    torn = TornTail(path, cut, len(data) - cut, kept_in)
    log.warning(
        "audit file %s had a torn last line: cut %d bytes at offset %d (kept in %s)",
        path,
        torn.length,
        cut,
        kept_in,
    )
    return torn


def _whole_prefix(data: bytes) -> int:
    """Length of ``data`` up to and including its last whole, parseable line."""
    end = data.rfind(b"\n") + 1  # 0 when there is no newline at all
    if end == 0:
        return 0
    start = data.rfind(b"\n", 0, end - 1) + 1
    if not _is_row(data[start:end]):
        return start
    return end


def _is_row(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, huge ints; deep nesting
        return False
