"""The SQLite feedback store's run-time errors are ragsift's: a store another process
holds may answer later; a full disk or a damaged file says what to do. Both were raw
``sqlite3`` tracebacks out of `ragsift feedback` and a 500 from the console."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ragsift.confidence.registry import CalibrationScope
from ragsift.errors import ConfigurationError, ServiceUnavailableError
from ragsift.retrieval.feedback_store import ScoredRecord, SqliteFeedbackStore, StoredLabel

SCOPE = CalibrationScope("docs", "acme")
RECORD = ScoredRecord(
    query_id="q1", tenant_id="acme", collection="docs", kept=True, signals={"top_score": 0.5}
)


class Failing:
    """A connection whose writes fail with ``error`` (reads go through)."""

    def __init__(self, inner: sqlite3.Connection, error: str) -> None:
        self.inner, self.error = inner, error

    def execute(self, sql: str, *args: Any) -> Any:
        if not sql.lstrip().upper().startswith("SELECT"):
            raise sqlite3.OperationalError(self.error)
        return self.inner.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        raise sqlite3.OperationalError(self.error)

    def __enter__(self) -> Failing:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self.inner.__exit__(*exc)


def failing(tmp_path: Path, error: str) -> SqliteFeedbackStore:
    store = SqliteFeedbackStore(tmp_path / "feedback.sqlite")
    store._db = Failing(store._db, error)  # type: ignore[assignment]
    return store


def test_a_store_held_by_another_process_is_unavailable_for_now(tmp_path: Path) -> None:
    store = failing(tmp_path, "database is locked")
    with pytest.raises(ServiceUnavailableError, match="another ragsift process holds it"):
        store.put_label(SCOPE, StoredLabel(record=RECORD, relevant=True, at=1.0))
    with pytest.raises(ServiceUnavailableError):
        store.remember([RECORD], 60)
    with pytest.raises(ServiceUnavailableError):
        store.mark_refit(SCOPE, "d", 1.0)


def test_a_full_disk_says_so_and_keeps_nothing_half_written(tmp_path: Path) -> None:
    store = failing(tmp_path, "database or disk is full")
    with pytest.raises(ConfigurationError, match="disk is full: free space"):
        store.put_label(SCOPE, StoredLabel(record=RECORD, relevant=True, at=1.0))
    assert store.labels(SCOPE) == []


def test_a_file_damaged_after_opening_says_what_to_do(tmp_path: Path) -> None:
    store = SqliteFeedbackStore(tmp_path / "feedback.sqlite")
    store.remember([RECORD], 60)
    store._db.close()  # stands in for a file that can no longer be read
    store._db = sqlite3.connect(tmp_path / "feedback.sqlite", check_same_thread=False)
    (tmp_path / "feedback.sqlite").write_bytes(b"not a database" * 512)
    with pytest.raises(ConfigurationError, match="is not usable"):
        store.labels(SCOPE)


def test_unreadable_rows_are_counted_not_only_logged(tmp_path: Path) -> None:
    # Passed over with a warning alone: "every drop counted" did not hold for them.
    from ragsift.observability.metrics import Metrics
    from ragsift.retrieval.feedback_store import unreadable_counter

    metrics = Metrics()
    path = tmp_path / "feedback.sqlite"
    store = SqliteFeedbackStore(path, on_unreadable=unreadable_counter(metrics))
    scope = CalibrationScope("docs", "acme")
    store.labels(scope)  # the tables exist
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO labels VALUES (?, ?, ?, ?)", ("docs\x1facme", "a", "oops", 0))
        db.execute("INSERT INTO labels VALUES (?, ?, ?, ?)", ("docs\x1facme", "b", "{}", 0))
    assert store.labels(scope) == []
    count = metrics.registry.get_sample_value(
        "ragsift_feedback_rows_unreadable_total", {"kind": "label"}
    )
    assert count == 2.0
    store.close()


@pytest.mark.parametrize("at", ["abc", "", b"\x00\xff"])
def test_a_damaged_refit_record_reads_as_none_as_redis_reads_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, at: object
) -> None:
    """Its time not a number, last_refit raised ValueError: every later label of the scope
    then failed (`ragsift feedback` exit 1, "could not convert string to float"), though
    each was stored. Damaged, it only means the scope's next labels may re-fit again."""
    path = tmp_path / "feedback.sqlite"
    unreadable: list[tuple[str, int]] = []
    store = SqliteFeedbackStore(path, on_unreadable=lambda kind, n: unreadable.append((kind, n)))
    store.mark_refit(CalibrationScope("docs", "globex"), "other", 5.0)
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO refits VALUES (?, ?, ?)", ("docs\x1facme", "d", at))
    assert store.last_refit(SCOPE) is None
    assert "unreadable re-fit record of acme/docs" in caplog.text
    assert unreadable == [("refit", 1)]  # counted in ragsift_feedback_rows_unreadable_total
    assert store.last_refit(CalibrationScope("docs", "globex")) == ("other", 5.0)  # untouched
    store.mark_refit(SCOPE, "d2", 7.0)  # the next re-fit writes a good one over it
    assert store.last_refit(SCOPE) == ("d2", 7.0)
    store.close()


@pytest.mark.parametrize("field", ["collection", "tenant_id", "query_id"])
def test_a_result_row_missing_its_scope_is_passed_over_and_counted(
    tmp_path: Path, field: str
) -> None:
    """A row with an empty collection read well and failed later, building its scope
    ("a calibration scope needs a collection"): `ragsift feedback` exited 1."""
    path = tmp_path / "feedback.sqlite"
    unreadable: list[tuple[str, int]] = []
    store = SqliteFeedbackStore(path, on_unreadable=lambda kind, n: unreadable.append((kind, n)))
    good = ScoredRecord(
        query_id="q1", tenant_id="acme", collection="docs", kept=True, signals={"top_score": 0.5}
    )
    store.remember([good], ttl_s=60)
    damaged = good.model_dump() | {field: ""}
    with sqlite3.connect(path) as db:
        db.execute("UPDATE scored SET body = ? WHERE query_id = 'q1'", (json.dumps(damaged),))
    assert store.recall("q1", "acme") is None
    assert unreadable == [("result", 1)]
    store.close()
