"""Where the feedback loop keeps scored results and their labels: the protocol, and the
embedded runtime's SQLite store (the workers' Redis one: :mod:`.redis_feedback_store`).

A label is joined to the result it refers to by tenant and query id: the
calibration worker (or the embedded bus) *remembers* each scored result's signals
for the join window; a feedback event then stores ``(signals, label)`` under the
result's scope, keyed by query id, so a duplicate or replayed label rewrites the
same entry. Labels outlive the join window (they carry their own signals).

Query ids are the clients' own, so two tenants may send the same one: results are
kept per tenant, and one tenant's query never takes the place of another's.
Results remembered under the query id alone (before 2026-11-30) are still read,
for their tenant only, until their window ends.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from ragsift.confidence.registry import CalibrationScope
from ragsift.errors import ServiceUnavailableError, unusable_store
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_rows import (
    Put,
    ScoredRecord,
    StoredLabel,
    Unreadable,
    put_outcome,
    readable_rows,
    scope_key,
)
from ragsift.retrieval.redis_feedback_store import RedisFeedbackStore

__all__ = [
    "FeedbackStore",
    "RedisFeedbackStore",
    "ScoredRecord",
    "SqliteFeedbackStore",
    "StoredLabel",
    "unreadable_counter",
]

log = logging.getLogger(__name__)
_Row = TypeVar("_Row", bound=BaseModel)


class FeedbackStore(Protocol):
    """Scored results for the join window, labels per scope, and each scope's last re-fit."""

    def remember(self, records: list[ScoredRecord], ttl_s: int) -> None:
        """Keep each record for ``ttl_s`` seconds (the join window)."""
        ...

    def recall(self, query_id: str, tenant_id: str) -> ScoredRecord | None:
        """The tenant's record of ``query_id`` if still within its window."""
        ...

    def owners(self, query_id: str) -> list[str]:
        """The tenants holding a record of ``query_id`` within its window, sorted."""
        ...

    def put_label(
        self, scope: CalibrationScope, label: StoredLabel, *, keep_sampled: bool = False
    ) -> Put:
        """Store the label of ``label.record.query_id``; say what became of it.

        ``keep_sampled``: a reported ``label`` leaves a sampled one in place (the result
        is a member of the random label sample, whatever its labels say).
        """
        ...

    def labels(self, scope: CalibrationScope) -> list[StoredLabel]:
        """Every label of ``scope``, oldest first."""
        ...

    def last_refit(self, scope: CalibrationScope) -> tuple[str, float] | None:
        """(labels digest, time) of the scope's last re-fit, or None."""
        ...

    def mark_refit(self, scope: CalibrationScope, digest: str, at: float) -> None:
        """Record a re-fit of ``scope`` on the labels with ``digest``."""
        ...

    def forget(self, scope: CalibrationScope) -> int:
        """Drop every label of ``scope`` and its re-fit record; how many labels there were."""
        ...

    def close(self) -> None:
        """Release the connection (the owner calls it once, at shutdown)."""
        ...


def unreadable_counter(metrics: Metrics) -> Unreadable:
    """What counts a store's unreadable rows in ``ragsift_feedback_rows_unreadable_total``."""
    return lambda kind, n: metrics.feedback_rows_unreadable.labels(kind).inc(n)


class SqliteFeedbackStore:
    """The embedded runtime's store: one SQLite file under the data dir."""

    def __init__(
        self, path: str | Path, *, clock: Any = time.time, on_unreadable: Unreadable | None = None
    ):
        self.on_unreadable = on_unreadable
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            # WAL without a sync per commit: a label is one small write, and losing the
            # last few on a power cut costs a re-label, not a corrupt file.
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            with self._db:
                self._db.executescript(
                    "CREATE TABLE IF NOT EXISTS results"
                    " (query_id TEXT PRIMARY KEY, body TEXT NOT NULL, expires REAL NOT NULL);"
                    "CREATE TABLE IF NOT EXISTS scored (tenant_id TEXT NOT NULL,"
                    " query_id TEXT NOT NULL, body TEXT NOT NULL, expires REAL NOT NULL,"
                    " PRIMARY KEY (tenant_id, query_id));"
                    "CREATE INDEX IF NOT EXISTS scored_query ON scored (query_id);"
                    "CREATE TABLE IF NOT EXISTS labels (scope TEXT NOT NULL,"
                    " query_id TEXT NOT NULL, body TEXT NOT NULL, at REAL NOT NULL,"
                    " PRIMARY KEY (scope, query_id));"
                    "CREATE TABLE IF NOT EXISTS refits"
                    " (scope TEXT PRIMARY KEY, digest TEXT NOT NULL, at REAL NOT NULL);"
                )
        except sqlite3.DatabaseError as exc:  # damaged, a folder, locked, read-only
            raise unusable_store(
                "feedback store", self.path, exc, "its labels are then not counted"
            ) from exc

    @contextmanager
    def _failing(self) -> Iterator[None]:
        """SQLite's errors as ragsift's: one held by another process (past the 5 s
        busy wait) may answer later; any other (damaged, disk full, read-only) says
        what to do. They were tracebacks out of `ragsift feedback` and the console."""
        try:
            yield
        except sqlite3.Error as exc:
            if "locked" in str(exc).lower() or "busy" in str(exc).lower():
                raise ServiceUnavailableError(
                    f"feedback store {self.path}: {exc} (another ragsift process holds it)",
                    service="sqlite",
                ) from exc
            raise unusable_store("feedback store", self.path, exc, "its labels") from exc

    def remember(self, records: list[ScoredRecord], ttl_s: int) -> None:
        """Keep each record for ``ttl_s`` seconds (see :class:`FeedbackStore`)."""
        now = self._clock()
        with self._failing(), self._lock, self._db:
            for table in ("results", "scored"):  # results: kept by query id alone, before
                self._db.execute(f"DELETE FROM {table} WHERE expires < ?", (now,))
            self._db.executemany(
                "INSERT OR REPLACE INTO scored VALUES (?, ?, ?, ?)",
                [(r.tenant_id, r.query_id, r.model_dump_json(), now + ttl_s) for r in records],
            )

    def _found(self, query_id: str) -> list[ScoredRecord]:
        now = self._clock()
        with self._failing(), self._lock:
            rows = self._db.execute(
                "SELECT body FROM scored WHERE query_id = ? AND expires >= ?"
                " UNION ALL SELECT body FROM results WHERE query_id = ? AND expires >= ?",
                (query_id, now, query_id, now),
            ).fetchall()
        return readable_rows(
            ScoredRecord, (body for (body,) in rows), "result rows", self.on_unreadable
        )

    def recall(self, query_id: str, tenant_id: str) -> ScoredRecord | None:
        """The tenant's record of ``query_id`` within its window (see :class:`FeedbackStore`)."""
        return next((r for r in self._found(query_id) if r.tenant_id == tenant_id), None)

    def owners(self, query_id: str) -> list[str]:
        """The tenants holding ``query_id`` within its window (see :class:`FeedbackStore`)."""
        return sorted({r.tenant_id for r in self._found(query_id)})

    def put_label(
        self, scope: CalibrationScope, label: StoredLabel, *, keep_sampled: bool = False
    ) -> Put:
        """Store a label, keyed by query id (see :class:`FeedbackStore`)."""
        key = (scope_key(scope), label.record.query_id)
        with self._failing(), self._lock, self._db:
            # Written from the read on: another process's label of the query waits, or
            # it was decided on the row read before this one, and replaced it.
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute(
                "SELECT body FROM labels WHERE scope = ? AND query_id = ?", key
            ).fetchone()
            put = put_outcome(
                None if row is None else row[0], label, keep_sampled, self.on_unreadable
            )
            if put == "stored":
                self._db.execute(
                    "INSERT OR REPLACE INTO labels VALUES (?, ?, ?, ?)",
                    (*key, label.model_dump_json(), label.at),
                )
        return put

    def labels(self, scope: CalibrationScope) -> list[StoredLabel]:
        """The scope's labels, oldest first (see :class:`FeedbackStore`)."""
        with self._failing(), self._lock:
            rows = self._db.execute(
                "SELECT body FROM labels WHERE scope = ? ORDER BY at, query_id",
                (scope_key(scope),),
            ).fetchall()
        return readable_rows(
            StoredLabel, (body for (body,) in rows), "label rows", self.on_unreadable
        )

    def last_refit(self, scope: CalibrationScope) -> tuple[str, float] | None:
        """The scope's last re-fit (see :class:`FeedbackStore`)."""
        with self._failing(), self._lock:
            row = self._db.execute(
                "SELECT digest, at FROM refits WHERE scope = ?", (scope_key(scope),)
            ).fetchone()
        try:
            return None if row is None else (str(row[0]), float(row[1]))
        except (ValueError, TypeError) as exc:  # damaged: read as Redis's is (below)
            log.warning("feedback store: unreadable re-fit record of %s: %r", scope, exc)
            if self.on_unreadable is not None:
                self.on_unreadable("refit", 1)
            return None

    def mark_refit(self, scope: CalibrationScope, digest: str, at: float) -> None:
        """Record a re-fit (see :class:`FeedbackStore`)."""
        with self._failing(), self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO refits VALUES (?, ?, ?)", (scope_key(scope), digest, at)
            )

    def forget(self, scope: CalibrationScope) -> int:
        """Drop the scope's labels and re-fit record (see :class:`FeedbackStore`)."""
        with self._failing(), self._lock, self._db:
            gone = self._db.execute("DELETE FROM labels WHERE scope = ?", (scope_key(scope),))
            self._db.execute("DELETE FROM refits WHERE scope = ?", (scope_key(scope),))
        return int(gone.rowcount)

    def close(self) -> None:
        """Close the database."""
        self._db.close()
