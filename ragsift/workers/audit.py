"""The audit sink: evidence events → append-only JSONL files, duplicates dropped.

At-least-once delivery can replay evidence; every evidence id is derived from
the event that caused it, so the sink drops ids it has already written. Files
rotate by size (``audit.jsonl`` → ``audit-<UTC time>.jsonl``); each batch is
flushed and fsynced before the handler returns, so an offset is committed only
after its evidence is on disk.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from ragsift.schemas import EvidenceEvent
from ragsift.workers.base import Emit, Outcome

__all__ = ["AuditFileSink", "AuditSinkHandler"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # rotate at 64 MiB: easy to ship, quick to scan
DEFAULT_REMEMBER = 1_000_000  # ids kept for dedup (~100 MB worst case); replays are recent
CURRENT = "audit.jsonl"


class AuditFileSink:
    """Writes evidence events once each to rotated JSONL files under ``directory``."""

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        remember: int = DEFAULT_REMEMBER,
    ):
        if max_bytes < 1024:
            raise ValueError(f"max_bytes must be >= 1024, got {max_bytes}")
        if remember < 1:
            raise ValueError(f"remember must be >= 1, got {remember}")
        self.directory = directory
        self.max_bytes = max_bytes
        self.remember = remember
        self._seen: OrderedDict[str, None] = OrderedDict()
        directory.mkdir(parents=True, exist_ok=True)
        self._load_recent_ids()
        self.duplicates = 0

    @property
    def path(self) -> Path:
        """The file being appended to."""
        return self.directory / CURRENT

    def files(self) -> list[Path]:
        """All audit files, oldest first."""
        rotated = sorted(self.directory.glob("audit-*.jsonl"))
        return [*rotated, self.path] if self.path.exists() else rotated

    def write(self, events: Sequence[EvidenceEvent]) -> int:
        """Append the events not seen before; return how many were written."""
        lines = []
        for event in events:
            if event.id in self._seen:
                self.duplicates += 1
                continue
            self._remember(event.id)
            lines.append(event.model_dump_json())
        if not lines:
            return 0
        self._maybe_rotate()
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return len(lines)

    def read_all(self) -> list[dict[str, object]]:
        """Every event in every file, oldest first (for tests and `ragsift tail`)."""
        rows: list[dict[str, object]] = []
        for file in self.files():
            with file.open(encoding="utf-8") as handle:
                rows.extend(json.loads(line) for line in handle if line.strip())
        return rows

    def _remember(self, event_id: str) -> None:
        self._seen[event_id] = None
        if len(self._seen) > self.remember:
            self._seen.popitem(last=False)

    def _maybe_rotate(self) -> None:
        if self.path.exists() and self.path.stat().st_size >= self.max_bytes:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            self.path.rename(self.directory / f"audit-{stamp}.jsonl")

    def _load_recent_ids(self) -> None:
        """Re-learn the ids of the newest files so a restarted sink still dedups."""
        loaded = 0
        for file in reversed(self.files()):
            with file.open(encoding="utf-8") as handle:
                ids = [json.loads(line).get("id") for line in handle if line.strip()]
            for event_id in reversed(ids):
                if isinstance(event_id, str) and loaded < self.remember:
                    self._seen[event_id] = None
                    self._seen.move_to_end(event_id, last=False)
                    loaded += 1
            if loaded >= self.remember:
                break


class AuditSinkHandler:
    """Handler for the ``audit`` topic: writes each evidence event once, emits nothing."""

    name = "audit"
    source = "audit"

    def __init__(self, sink: AuditFileSink):
        self.sink = sink

    @property
    def model(self) -> type[BaseModel]:
        """Evidence events in."""
        return EvidenceEvent

    async def handle_batch(self, events: Sequence[EvidenceEvent]) -> list[Outcome]:
        """Write the batch; one empty outcome per event."""
        self.sink.write(events)
        empty: list[Emit] = []
        return [list(empty) for _ in events]

    async def close(self) -> None:
        """Nothing held open between batches."""
