"""Two processes storing a label of one query in the same SQLite feedback store.

The embedded console and `ragsift feedback` (or `ragsift review`) may each apply a
label of the same query to the data dir's store at once. Read, then written, the
second decided on the row it read before the first wrote, and replaced it: a
report took the place of the sampled label ``keep_sampled`` keeps. The race is
made deterministic: the other process writes between this one's read and write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragsift.confidence.registry import CalibrationScope
from ragsift.errors import ServiceUnavailableError
from ragsift.retrieval import feedback_store
from ragsift.retrieval.feedback_store import ScoredRecord, SqliteFeedbackStore, StoredLabel

SCOPE = CalibrationScope("docs", "acme")
RECORD = ScoredRecord(
    query_id="q1", tenant_id="acme", collection="docs", kept=True, signals={"top_score": 0.5}
)
SAMPLED = StoredLabel(record=RECORD, relevant=False, at=1.0)
REPORTED = StoredLabel(record=RECORD, relevant=True, at=2.0, sampled=False)


def test_a_label_written_meanwhile_by_another_process_waits_for_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "feedback.sqlite"
    mine, other = SqliteFeedbackStore(path), SqliteFeedbackStore(path)
    other._db.execute("PRAGMA busy_timeout = 0")  # refused at once, not after 5 s
    real = feedback_store.put_outcome
    meanwhile: list[Any] = []

    def deciding(*args: Any) -> Any:
        if not meanwhile:  # the other process's sampled label, between read and write
            meanwhile.append(None)
            try:
                meanwhile[0] = other.put_label(SCOPE, SAMPLED)
            except ServiceUnavailableError as exc:
                meanwhile[0] = exc
        return real(*args)

    monkeypatch.setattr(feedback_store, "put_outcome", deciding)
    assert mine.put_label(SCOPE, REPORTED, keep_sampled=True) == "stored"
    # The other waits (here: is told to try again, as the calibration handler does)...
    assert isinstance(meanwhile[0], ServiceUnavailableError)
    assert "another ragsift process holds it" in str(meanwhile[0])
    assert mine.labels(SCOPE) == [REPORTED]
    # ...and then decides on the row as it is: the sampled label replaces the report.
    assert other.put_label(SCOPE, SAMPLED) == "stored"
    assert mine.labels(SCOPE) == [SAMPLED]
    mine.close()
    other.close()
