"""The audit file sink: evidence events → hash-chained, append-only JSONL, once each.

At-least-once delivery can replay evidence; every evidence id is derived from
the event that caused it, so the sink drops ids it has already written. A copy
whose ``data`` differs from the row written under its id is dropped too, but
counted as a conflict: a forgery that got in first (anyone who may write the
audit topic can derive an id), or a replay scored against a state that moved
since the first delivery (a document ingested, a calibration re-fit, a
traffic-mix alarm raised or cleared): same id, not always the same data. An id
is remembered only once its row is on disk, so a failed write followed by a
redelivery writes the row instead of dropping it as a duplicate. Files rotate
by size (``audit.jsonl`` → ``audit-<UTC time>.jsonl``); the chain runs on across
rotations and restarts. ``write`` raises ``OSError`` when the disk fails and
leaves the sink exactly as it was, so the caller can simply try again.

Several processes may write one folder (a console and an ``ask`` on one data dir,
two workers given one ``--audit-dir``): each start and each batch holds an
exclusive lock on ``.audit.lock`` and first takes in what the others wrote since
(their rows' ids and the chain head). Before, each process wrote at the size it
had seen and cut what it found past it as the remains of its own failed attempt:
another process's rows were destroyed, and ``audit verify`` still read an intact
chain.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ragsift.audit.chain import HASH, SEQ, ChainHead, seal
from ragsift.audit.repair import TornTail, repair_torn_tail
from ragsift.audit.writer import FILE_MODE, DiskWriter, RowWriter, fsync_directory
from ragsift.file_lock import exclusive
from ragsift.schemas import EvidenceEvent

__all__ = ["CURRENT", "DEFAULT_MAX_BYTES", "DEFAULT_REMEMBER", "AuditFileSink", "FsyncPolicy"]

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # rotate at 64 MiB: easy to ship, quick to scan
DEFAULT_REMEMBER = 1_000_000  # ids kept for dedup (~100 MB worst case); replays are recent
MIN_MAX_BYTES = 1024
CURRENT = "audit.jsonl"
#: Held while a sink starts or writes a batch (see the module docstring).
LOCK = ".audit.lock"

FsyncPolicy = Literal["batch", "off"]
"""``batch``: fsync each batch before it counts as written; ``off``: leave it to the OS."""


class AuditFileSink:
    """Writes evidence events once each to rotated, hash-chained JSONL files.

    Args:
        directory: where the files live (created if missing).
        max_bytes: the current file is rotated once it reaches this size.
        remember: how many recent ids are kept for dedup.
        hmac_key: when set, every row also carries an HMAC with this key.
        fsync: when a batch counts as durable (see :data:`FsyncPolicy`).
        writer: how bytes reach the disk (tests inject failing writers).

    Raises:
        OSError: a torn tail could not be repaired (its bytes could not be saved).
    """

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        remember: int = DEFAULT_REMEMBER,
        hmac_key: bytes | None = None,
        fsync: FsyncPolicy = "batch",
        writer: RowWriter | None = None,
    ):
        if max_bytes < MIN_MAX_BYTES:
            raise ValueError(f"max_bytes must be >= {MIN_MAX_BYTES}, got {max_bytes}")
        if remember < 1:
            raise ValueError(f"remember must be >= 1, got {remember}")
        if hmac_key is not None and not hmac_key:
            raise ValueError("hmac_key must not be empty (leave it unset for no HMAC)")
        if fsync not in ("batch", "off"):
            raise ValueError(f"fsync must be 'batch' or 'off', got {fsync!r}")
        self.directory = directory
        self.max_bytes = max_bytes
        self.remember = remember
        self.fsync = fsync
        self.duplicates = 0
        #: duplicates whose data differs from the row written under their id
        self.conflicts = 0
        self._key = hmac_key
        self._writer: RowWriter = writer or DiskWriter()
        #: recent ids -> a digest of their row's data (None for a row without one)
        self._seen: OrderedDict[str, bytes | None] = OrderedDict()
        directory.mkdir(parents=True, exist_ok=True)
        self.head = ChainHead()
        self._remains: tuple[int, int | None] | None = None
        with self._exclusive():  # another sink's batch is never mid-write here
            #: what start-up cut off a torn last line, if anything
            self.repaired: TornTail | None = repair_torn_tail(self.path)
            self._size, self._inode = self._stat()
            self._load_state()
            if self.path.exists():  # made read-only or immutable: say so now, not at a batch
                try:
                    os.close(os.open(self.path, os.O_WRONLY))
                except OSError as exc:
                    # Found at the first batch instead, a one-shot `ask` held its answer
                    # and retried for ever (a sink holds evidence until the disk takes it).
                    raise OSError(
                        exc.errno, f"the audit trail {self.path} cannot be written ({exc.strerror})"
                    ) from exc
        log.info(
            "audit sink at %s: chain head seq %d hash %s", self.path, self.head.seq, self.head.hash
        )

    @property
    def path(self) -> Path:
        """The file being appended to."""
        return self.directory / CURRENT

    def files(self) -> list[Path]:
        """All audit files, oldest first."""
        return self.chain_files(self.directory)

    @staticmethod
    def chain_files(directory: Path) -> list[Path]:
        """A sink folder's files in chain order: rotated ones by time, then the current one."""
        rotated = sorted(directory.glob("audit-*.jsonl"))
        current = directory / CURRENT
        return [*rotated, current] if current.exists() else rotated

    def write(self, events: Sequence[EvidenceEvent]) -> int:
        """Append the events not seen before; return how many were written.

        Raises:
            OSError: the disk failed; nothing was written or remembered, so the
                same call can be retried.
        """
        with self._exclusive():
            self._catch_up()
            try:
                return self._write(events)
            except OSError:
                # What the failed attempt left (when the writer could not cut it) is
                # this sink's to cut, not rows to take in, unless another writes after.
                self._remains = self._stat()
                raise

    def _write(self, events: Sequence[EvidenceEvent]) -> int:
        head = self.head
        batch: dict[str, bytes] = {}
        digests: dict[str, bytes | None] = {}
        for event in events:
            payload = json.loads(event.model_dump_json())
            digest = _digest(payload)
            if event.id in self._seen or event.id in batch:
                self.duplicates += 1
                known = self._seen[event.id] if event.id in self._seen else digests[event.id]
                if known is not None and known != digest:
                    self.conflicts += 1
                    log.warning(
                        "evidence %s arrived again with other data; the row written first"
                        " stays (a forgery, or the query rescored since)",
                        event.id,
                    )
                continue
            row = seal(payload, head, self._key)
            head = head.next(row[HASH])
            batch[event.id] = _line(row)
            digests[event.id] = digest
        if not batch:
            return 0
        self._maybe_rotate()
        created = self._size == 0
        data = b"".join(batch.values())
        self._writer.write_at(self.path, self._size, data, fsync=self.fsync == "batch")
        if created and self.fsync == "batch":
            fsync_directory(self.directory)
        # Durable: only now do the rows count, and their ids stop later copies.
        self._size += len(data)
        self._inode = self._stat()[1]
        self._remains = None
        self.head = head
        for event_id in batch:
            self._remember(event_id, digests[event_id])
        return len(batch)

    def _exclusive(self) -> AbstractContextManager[None]:
        """The folder's lock, across processes."""
        return exclusive(self.directory / LOCK, FILE_MODE)

    def _stat(self) -> tuple[int, int | None]:
        """The current file's size and inode (0 and None while there is none)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return 0, None
        return stat.st_size, stat.st_ino

    def _catch_up(self) -> None:
        """Take in what other sinks wrote to the folder since this one last did."""
        size, inode = self._stat()
        if (size, inode) == (self._size, self._inode) or (size, inode) == self._remains:
            return  # unchanged, or only this sink's failed attempt: cut by the next write
        if inode == self._inode and size > self._size:
            # Appended to: the rows' ids and the chain head are taken in. Bytes after
            # the last whole line are the remains of a failed attempt (a writer holds
            # the lock to its end), cut by the next write at the offset kept here.
            with self.path.open("rb") as handle:
                handle.seek(self._size)
                tail = handle.read(size - self._size)
            whole = tail[: tail.rfind(b"\n") + 1]
            for line in whole.splitlines():
                row = _parsed(line)
                if row is None:
                    continue
                if isinstance(row.get(HASH), str) and isinstance(row.get(SEQ), int):
                    self.head = ChainHead(row[HASH], row[SEQ])
                if isinstance(row.get("id"), str):
                    self._remember(row["id"], _digest(row))
            self._size += len(whole)
            return
        # Rotated, replaced or cut by another process: learn the folder again (a
        # process that died mid-batch left a torn line: cut, as at a start).
        self.repaired = repair_torn_tail(self.path) or self.repaired
        self._size, self._inode = self._stat()
        self._seen.clear()
        self._load_state()

    def read_all(self) -> list[dict[str, object]]:
        """Every event in every file, oldest first (for tests and the demo)."""
        rows: list[dict[str, object]] = []
        for file in self.files():
            with file.open(encoding="utf-8") as handle:
                rows.extend(json.loads(line) for line in handle if line.strip())
        return rows

    def _remember(self, event_id: str, digest: bytes | None) -> None:
        self._seen[event_id] = digest
        if len(self._seen) > self.remember:
            self._seen.popitem(last=False)

    def _maybe_rotate(self) -> None:
        if self._size < self.max_bytes:
            return
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        rotated = self.directory / f"audit-{stamp}.jsonl"
        self.path.rename(rotated)
        self._size = 0
        if self.fsync == "batch":
            fsync_directory(self.directory)
        log.info("audit file rotated to %s; chain head seq %d hash %s", rotated, *self._head())

    def _head(self) -> tuple[int, str]:
        return self.head.seq, self.head.hash

    def _load_state(self) -> None:
        """Re-learn recent ids (dedup) and the chain head from the newest files."""
        loaded = 0
        head: ChainHead | None = None
        for file in reversed(self.files()):
            for line_no, row in _rows_backwards(file):
                if head is None:
                    head = _head_of(row, file, line_no)
                event_id = row.get("id")
                if isinstance(event_id, str) and loaded < self.remember:
                    self._seen[event_id] = _digest(row)
                    self._seen.move_to_end(event_id, last=False)
                    loaded += 1
            if loaded >= self.remember:
                break
        self.head = head or ChainHead()


def _line(row: dict[str, Any]) -> bytes:
    return json.dumps(row, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def _head_of(row: dict[str, Any], file: Path, line_no: int) -> ChainHead:
    """The head a newest row leaves: its hash, or a fresh chain after unchained rows."""
    row_hash, seq = row.get(HASH), row.get(SEQ)
    if isinstance(row_hash, str) and isinstance(seq, int):
        return ChainHead(row_hash, seq)
    # Rows written before the chain existed: the chain starts after them.
    log.warning("audit file %s line %d has no chain fields: starting a new chain", file, line_no)
    return ChainHead()


def _rows_backwards(file: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The file's rows with their line numbers, newest first; bad lines logged and skipped.

    A bad line in the middle of a file must not stop the sink from starting (it
    would crash-loop); ``ragsift audit verify`` names it.
    """
    with file.open("rb") as handle:
        lines = handle.read().split(b"\n")
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if not line.strip():
            continue
        row = _parsed(line)
        if row is None:
            log.error("audit file %s line %d is not a JSON object: skipped", file, index + 1)
            continue
        yield index + 1, row


def _parsed(line: bytes) -> dict[str, Any] | None:
    """A line's row, or None when it is not a JSON object."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):  # bad JSON or UTF-8, huge ints; deep nesting
        return None
    return row if isinstance(row, dict) else None


def _digest(row: dict[str, Any]) -> bytes | None:
    """A short digest of a row's (or an event's) ``data``: what a replay repeats."""
    data = row.get("data")
    if data is None:
        return None
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(canonical.encode("utf-8", "surrogatepass"), digest_size=8).digest()
