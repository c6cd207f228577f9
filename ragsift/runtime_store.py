"""Results you can come back to (B5): the embedded runtime's small SQLite store.

One row per (tenant, query id): the retrieval result, and the report and
decision built from it, as their JSON. The store is bounded: past
``max_results`` rows the oldest are pruned on write. It lives at
``<data_dir>/results.sqlite3``, so ``ragsift assess`` in another process (or
after a restart) finds what ``ask``, ``demo`` or the console answered.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ragsift.errors import RagsiftError, shown_value, unusable_store
from ragsift.schemas import Decision, Report, RetrievalResult

__all__ = ["STORE_FILE", "ResultStore", "StoredAnswer"]

log = logging.getLogger(__name__)

STORE_FILE = "results.sqlite3"
#: a second writer (another ragsift process on the same data dir) waits this long for the lock
BUSY_TIMEOUT_S = 5.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    query_id TEXT NOT NULL,
    result TEXT NOT NULL,
    report TEXT,
    decision TEXT,
    UNIQUE (tenant_id, query_id)
)
"""


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """What the pipeline made of one query: its result, and its report and decision if built."""

    result: RetrievalResult
    report: Report | None = None
    decision: Decision | None = None


class ResultStore:
    """A bounded SQLite table of answers, newest kept.

    Args:
        path: the database file (created, with its folder, when missing).
        max_results: rows kept; the oldest are deleted past it, ``>= 1``.

    Raises:
        ConfigurationError: ``path`` is not an SQLite file this store can use.
    """

    def __init__(self, path: Path, *, max_results: int):
        if max_results < 1:
            raise ValueError(f"max_results must be >= 1, got {max_results}")
        self.path = path
        self.max_results = max_results
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
            self._db.execute(_SCHEMA)
            self._db.commit()
        except sqlite3.DatabaseError as exc:  # damaged, a folder, locked, read-only
            raise unusable_store(
                "results store", path, exc, "the results kept in it are then not found by assess"
            ) from exc

    def put(self, answer: StoredAnswer) -> None:
        """Keep an answer (replacing an older one for the same query), then prune."""
        r = answer.result
        with self._db:
            # delete + insert, not upsert: a re-asked query becomes the newest row
            self._db.execute(
                "DELETE FROM answers WHERE tenant_id = ? AND query_id = ?",
                (r.tenant_id, r.query_id),
            )
            self._db.execute(
                "INSERT INTO answers (tenant_id, query_id, result, report, decision)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    r.tenant_id,
                    r.query_id,
                    r.model_dump_json(),
                    answer.report.model_dump_json() if answer.report else None,
                    answer.decision.model_dump_json() if answer.decision else None,
                ),
            )
            self._db.execute(
                "DELETE FROM answers WHERE seq <= (SELECT seq FROM answers ORDER BY seq DESC"
                " LIMIT 1 OFFSET ?)",
                (self.max_results,),
            )

    def get(self, query_id: str, tenant_id: str | None = None) -> StoredAnswer | None:
        """The newest answer for ``query_id`` (of ``tenant_id`` when given), or None."""
        sql = "SELECT result, report, decision FROM answers WHERE query_id = ?"
        args: tuple[str, ...] = (query_id,)
        if tenant_id is not None:
            sql += " AND tenant_id = ?"
            args += (tenant_id,)
        row = self._db.execute(sql + " ORDER BY seq DESC LIMIT 1", args).fetchone()
        if row is None:
            return None
        answer = _answer(row)
        if answer is None:
            raise RagsiftError(
                f"the stored answer of {shown_value(query_id)} in {self.path} does not read"
                " (damaged, or written by a newer release): ask the question again",
                query_id=query_id,
            )
        return answer

    def recent(self, limit: int) -> list[StoredAnswer]:
        """The newest ``limit`` answers, oldest first."""
        rows = self._db.execute(
            "SELECT result, report, decision FROM answers ORDER BY seq DESC LIMIT ?", (limit,)
        ).fetchall()
        return [a for row in reversed(rows) if (a := _answer(row)) is not None]

    def __len__(self) -> int:
        (count,) = self._db.execute("SELECT COUNT(*) FROM answers").fetchone()
        return int(count)

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def _answer(row: tuple[str, str | None, str | None]) -> StoredAnswer | None:
    """The stored answer, or None (logged) when its row does not read: damaged, or
    written by a newer release (the models refuse fields they do not know). One such
    row stopped the console from starting, since it reads the recent answers."""
    result, report, decision = row
    try:
        return StoredAnswer(
            RetrievalResult.model_validate_json(result),
            Report.model_validate_json(report) if report else None,
            Decision.model_validate_json(decision) if decision else None,
        )
    except ValueError as exc:  # pydantic's ValidationError: not JSON, or not the model
        log.warning("results store: passed over a stored answer that does not read: %.300s", exc)
        return None
