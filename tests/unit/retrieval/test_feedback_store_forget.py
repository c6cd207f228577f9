"""`forget`: a scope's labels and re-fit record go, every other scope's stay (SQLite store;
the Redis store's is in tests/integration/test_redis_calibration.py)."""

from __future__ import annotations

from pathlib import Path

from ragsift.confidence.registry import CalibrationScope
from ragsift.retrieval.feedback_store import ScoredRecord, SqliteFeedbackStore, StoredLabel

ACME = CalibrationScope("docs", "acme")
#: Scopes whose names begin or end like acme/docs', or are its parts: none is touched.
OTHERS = (
    CalibrationScope("docs", "acme2"),
    CalibrationScope("docs2", "acme"),
    CalibrationScope("docs"),
    CalibrationScope("docs", "ácmé"),
)


def label(scope: CalibrationScope, i: int) -> StoredLabel:
    record = ScoredRecord(
        query_id=f"q{i}",
        tenant_id=scope.tenant or "t",
        collection=scope.collection,
        kept=True,
        signals={"top_score": 0.5},
    )
    return StoredLabel(record=record, relevant=i % 2 == 0, at=float(i))


def test_forget_drops_the_scopes_labels_and_refit_and_nothing_else(tmp_path: Path) -> None:
    store = SqliteFeedbackStore(tmp_path / "feedback.sqlite")
    for scope in (ACME, *OTHERS):
        for i in range(3):
            store.put_label(scope, label(scope, i))
        store.mark_refit(scope, f"digest-{scope}", 1.0)
    assert store.forget(ACME) == 3
    assert store.labels(ACME) == []
    assert store.last_refit(ACME) is None
    for scope in OTHERS:
        assert len(store.labels(scope)) == 3
        assert store.last_refit(scope) == (f"digest-{scope}", 1.0)
    assert store.forget(ACME) == 0  # again: nothing left, no error
    # A label given after it is the scope's first again.
    assert store.put_label(ACME, label(ACME, 0)) == "stored"
    assert len(store.labels(ACME)) == 1
    store.close()
