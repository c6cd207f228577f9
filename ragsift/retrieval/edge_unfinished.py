"""A shard folder whose creation did not finish: cleared, so the next ingest goes on.

A collection's shard is created, given its payload indexes and flushed under the index
folder's creation lock, and its metadata file is written last: a folder without one,
seen under that lock, is a creation a process did not finish (killed, Ctrl-C). It was
an error asking the user to remove the folder by hand, while ``ask`` sent them back to
the ``ingest`` that had just refused: a circle. Nothing can have been indexed into it
(writes need the metadata file), but a shard that lost its metadata file some other way
may hold data: one that opens with points stays an error; one that opens empty is
removed; one that does not open is moved aside, not deleted.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import qdrant_edge as qe

from ragsift.errors import ConfigurationError

__all__ = ["UNFINISHED_DIR", "clear_unfinished"]

log = logging.getLogger(__name__)

#: Where a shard folder that does not open is moved, under the index folder (a dotfile:
#: not a collection).
UNFINISHED_DIR = ".unfinished"


def _points(shard_dir: Path) -> int | None:
    """The shard's point count, or None when it does not open."""
    try:
        shard = qe.EdgeShard.load(str(shard_dir), None)
    except Exception:  # the binding raises bare Exceptions: half-made files
        return None
    try:
        return int(shard.info().points_count)
    finally:
        shard.close()


def clear_unfinished(shard_dir: Path, sidecar: Path) -> None:
    """Clear ``shard_dir``, a folder without its metadata file ``sidecar``; the caller
    holds the creation lock. Raises ConfigurationError when it holds points."""
    points = _points(shard_dir)
    if points:
        raise ConfigurationError(
            f"shard directory {str(shard_dir)!r} holds {points} point{'s' * (points != 1)}"
            " but has no metadata"
            f" file {str(sidecar)!r}: restore both from a backup, or remove the directory"
            " and ingest again"
        )
    if points == 0:
        shutil.rmtree(shard_dir)
        log.warning("removed %s: an empty shard whose creation did not finish", shard_dir)
        return
    aside = shard_dir.parent / UNFINISHED_DIR / f"{shard_dir.name}-{time.time_ns()}"
    aside.parent.mkdir(exist_ok=True)
    shard_dir.rename(aside)
    log.warning(
        "moved %s to %s: a shard whose creation did not finish (an interrupted ingest);"
        " nothing was indexed in it, remove it when you like",
        shard_dir,
        aside,
    )
