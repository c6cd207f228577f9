"""A Redis outage while indexing holds the documents, never dead-letters what was applied.

Before: the index was written, then the cache's version bump raised, so the event was
dead-lettered though its change was made; the version never moved, and results of
the old text stayed cached for a day (a deleted document was still served). A replay
found the document indexed already and bumped nothing either.
"""

from __future__ import annotations

import json

from ragsift.errors import ServiceUnavailableError
from ragsift.ingest.indexer import Indexer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.streams.assembly import readiness_state
from ragsift.streams.routing import BatchRouter, Received
from ragsift.workers.indexer import IndexerHandler
from tests.unit.streams.scripted import RecordingSender, record_key

TOPIC = "ragsift.documents.v1"
TEXT = "Refunds are paid within fourteen days by bank transfer."


class FlakyVersions(InMemoryCache):
    """A cache that is down for ``down_for`` bumps (and ``marks_down_for`` marks)."""

    def __init__(self, down_for: int = 0, marks_down_for: int = 0) -> None:
        super().__init__()
        self.down_for = down_for
        self.marks_down_for = marks_down_for
        self.refused = 0

    @property
    def versions(self) -> dict[tuple[str, str], int]:
        return dict(self._versions)

    def _down(self, kind: str) -> None:
        left = getattr(self, kind)
        if left > 0:
            setattr(self, kind, left - 1)
            self.refused += 1
            raise ServiceUnavailableError("redis: TimeoutError", service="redis")

    async def bump_index_version(self, tenant_id: str, collection: str) -> int:
        self._down("down_for")
        return await super().bump_index_version(tenant_id, collection)

    async def mark_pending(self, tenant_id: str, collection: str, token: str) -> None:
        self._down("marks_down_for")
        await super().mark_pending(tenant_id, collection, token)


def document(doc_id: str, text: str | None = TEXT, op: str = "upsert") -> bytes:
    body = {"event_id": f"e-{doc_id}-{op}", "tenant_id": "acme", "doc_id": doc_id, "op": op}
    if text is not None:
        body["text"] = text
    return json.dumps(body).encode()


def handler_on(index: EdgeIndex, cache: FlakyVersions) -> IndexerHandler:
    """One indexer (one process's) on ``index``, with ``cache``'s versions; no sleeping."""

    async def sleep(seconds: float) -> None:
        pass

    indexer = Indexer(index, HashingEmbedder(64), cache=cache)
    return IndexerHandler(indexer, sleep=sleep)


async def feed(handler: IndexerHandler, *values: bytes) -> RecordingSender:
    sender = RecordingSender()
    router = BatchRouter(handler, sender, metrics=Metrics(), deadline_s=0.3)
    keys = [record_key("documents", v, b"k") for v in values]
    await router.process(
        [Received(v, k, TOPIC, 0, i) for i, (v, k) in enumerate(zip(values, keys, strict=True))]
    )
    return sender


async def test_an_outage_holds_the_batch_until_the_new_version_is_in(index: EdgeIndex) -> None:
    cache = FlakyVersions(down_for=5)  # longer than the 0.3 s deadline would allow
    handler = handler_on(index, cache)
    sender = await feed(handler, document("gdpr"), document("gdpr", None, op="delete"))
    assert sender.dead_letters() == []  # both applied: neither is a dead letter
    assert cache.refused == 5
    assert cache.versions[("acme", "default")] >= 1  # the version moved in the end
    assert handler.indexer.owed == frozenset()
    assert await index.documents("default", "acme") == {}


async def test_a_restart_after_a_clean_stop_trusts_a_replay_it_finds_indexed(
    index: EdgeIndex,
) -> None:
    cache = FlakyVersions()
    first = handler_on(index, cache)
    await feed(first, document("gdpr"))
    await feed(first, document("gdpr"))  # its own replay: nothing changed
    assert cache.versions == {("acme", "default"): 1}
    # Another indexer (a restart) replays it: the first one cleared its mark after its
    # bump, so nothing of it is left unbumped. Until 2026-12-03 a new indexer bumped
    # each scope once on its first no-op, so every restart emptied every scope's cache.
    second = handler_on(index, cache)
    for _ in range(2):
        assert (await feed(second, document("gdpr"))).dead_letters() == []
    assert cache.versions == {("acme", "default"): 1}
    assert await cache.pending("acme", "default") == {}


async def test_an_outage_before_the_write_holds_the_batch_with_nothing_written(
    index: EdgeIndex,
) -> None:
    # The mark must be in before the index is written: written without it, a crash
    # before the bump would leave the change unseen by the indexer that replays it.
    cache = FlakyVersions(marks_down_for=5)
    handler = handler_on(index, cache)
    sender = await feed(handler, document("gdpr"))
    assert sender.dead_letters() == []
    assert cache.refused == 5
    assert set(await index.documents("default", "acme")) == {"gdpr"}
    assert cache.versions == {("acme", "default"): 1}
    assert await cache.pending("acme", "default") == {}  # cleared once bumped


async def test_a_held_batch_makes_the_worker_not_ready_until_it_goes_through(
    index: EdgeIndex,
) -> None:
    # A worker hosting retrieval next to this indexer answers nothing while the indexer
    # holds the one loop's batch; /readyz said 200 all the while.
    seen: list[dict[str, object]] = []
    indexer = Indexer(index, HashingEmbedder(64), cache=FlakyVersions(down_for=3))

    async def sleep(seconds: float) -> None:
        seen.append(readiness_state(down=[], assigned=2, rebalancing=False, handlers=[handler]))

    handler = IndexerHandler(indexer, sleep=sleep)
    assert not handler.stalled
    sender = await feed(handler, document("gdpr"))
    assert sender.dead_letters() == []
    assert seen  # it held (the first refusal was the handling's, the rest the hold's)
    assert all(not state["ready"] for state in seen)
    assert all(state["handlers_stalled"] == ["indexer"] for state in seen)
    assert not handler.stalled  # the version went in: ready again
    assert readiness_state(down=[], assigned=2, rebalancing=False, handlers=[handler])["ready"]
