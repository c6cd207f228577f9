"""Two workers storing a label of the same query at once, on the real redis-server.

During a rebalance two calibration workers can hold the same feedback partition
for a moment, and both apply its labels. A store that read the label's row and
wrote it in two steps let the second writer decide on a row the first had just
replaced: a reported label took the place of a sampled one (which ``keep_sampled``
keeps), and a duplicate was counted as a new label. The races here are made
deterministic: the first worker's whole ``put_label`` runs between the second's
read and its write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from ragsift.confidence.registry import CalibrationScope
from ragsift.errors import ServiceUnavailableError
from ragsift.retrieval import redis_feedback_store
from ragsift.retrieval.feedback_store import RedisFeedbackStore, ScoredRecord, StoredLabel
from ragsift.settings import RedisSettings

SCOPE = CalibrationScope("docs", "acme")
RECORD = ScoredRecord(
    query_id="q1", tenant_id="acme", collection="docs", kept=True, signals={"top_score": 0.7}
)
SAMPLED = StoredLabel(record=RECORD, relevant=False, at=1.0)
REPORTED = StoredLabel(record=RECORD, relevant=True, at=2.0, sampled=False)


@pytest.fixture
def settings(redis_settings: RedisSettings, unique: str) -> Iterator[RedisSettings]:
    scoped = redis_settings.model_copy(update={"key_prefix": f"it-race-{unique}"})
    yield scoped
    client = redis.Redis.from_url(scoped.url)
    for key in client.scan_iter(f"{scoped.key_prefix}:*"):
        client.delete(key)
    client.close()


@pytest.fixture
def workers(settings: RedisSettings) -> Iterator[tuple[RedisFeedbackStore, RedisFeedbackStore]]:
    """Two workers' stores: each its own connection pool, as two processes have."""
    first, second = RedisFeedbackStore(settings), RedisFeedbackStore(settings)
    yield first, second
    first.close()
    second.close()


def interleaved(monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], Any]) -> list[Any]:
    """Run ``meanwhile`` once, after the next ``put_label`` read the row and before it
    wrote one (the store decides what to write between the two); what it returned."""
    real = redis_feedback_store.put_outcome
    done: list[Any] = []

    def deciding(*args: Any) -> Any:
        if not done:
            done.append(None)  # before the call: ``meanwhile`` decides too
            done[0] = meanwhile()
        return real(*args)

    monkeypatch.setattr(redis_feedback_store, "put_outcome", deciding)
    return done


def test_a_report_racing_a_sampled_label_does_not_take_its_place(
    workers: tuple[RedisFeedbackStore, RedisFeedbackStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = workers
    # The sampled label is stored while the report's worker decides on the empty row.
    done = interleaved(monkeypatch, lambda: first.put_label(SCOPE, SAMPLED))
    put = second.put_label(SCOPE, REPORTED, keep_sampled=True)
    # As in either order one after the other: the sampled label stays.
    assert first.labels(SCOPE) == [SAMPLED]
    assert (done, put) == (["stored"], "kept_sampled")


def test_a_label_applied_by_two_workers_at_once_is_stored_once(
    workers: tuple[RedisFeedbackStore, RedisFeedbackStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = workers
    done = interleaved(monkeypatch, lambda: first.put_label(SCOPE, SAMPLED))
    put = second.put_label(SCOPE, SAMPLED.model_copy(update={"at": 1.5}))
    # The duplicate is "unchanged" (else counted as a second new label), its row the first's.
    assert (done, put) == (["stored"], "unchanged")
    assert first.labels(SCOPE) == [SAMPLED]


def test_a_changed_label_racing_another_replaces_it(
    workers: tuple[RedisFeedbackStore, RedisFeedbackStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = workers
    relevant = SAMPLED.model_copy(update={"relevant": True, "at": 3.0})
    done = interleaved(monkeypatch, lambda: first.put_label(SCOPE, SAMPLED))
    assert second.put_label(SCOPE, relevant) == "stored"  # the later label wins, as in order
    assert done == ["stored"]
    assert first.labels(SCOPE) == [relevant]


def test_many_workers_storing_one_label_at_once_store_it_once(settings: RedisSettings) -> None:
    stores = [RedisFeedbackStore(settings) for _ in range(8)]
    start = threading.Barrier(len(stores))
    puts: list[str] = []

    def put(store: RedisFeedbackStore) -> None:
        start.wait(timeout=30)
        puts.append(store.put_label(SCOPE, SAMPLED))

    threads = [threading.Thread(target=put, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(puts) == ["stored"] + ["unchanged"] * (len(stores) - 1)
    assert stores[0].labels(SCOPE) == [SAMPLED]
    for store in stores:
        store.close()


def test_a_row_that_keeps_changing_under_a_put_is_a_service_error(
    workers: tuple[RedisFeedbackStore, RedisFeedbackStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = workers
    real = redis_feedback_store.put_outcome
    turns = iter(range(1000))

    def others_write_first(*args: Any) -> Any:
        # Another writer replaces the row between each read and write of ``second``.
        n = next(turns)
        first.client.hset(f"{first.prefix}:labels:docs\x1facme", "q1", f"row {n}")
        return real(*args)

    monkeypatch.setattr(redis_feedback_store, "put_outcome", others_write_first)
    with pytest.raises(ServiceUnavailableError, match="changed by another writer"):
        second.put_label(SCOPE, SAMPLED)
