"""An indexer trusts that an event changed nothing only where no write is left unbumped.

Each write of a scope is marked pending in the cache first and the mark is cleared
once the write is bumped (``ragsift.ingest.versions``). Before 2026-12-03 a new
indexer could not tell a crash between a write and its bump from a clean stop, so it
bumped each scope once on its first no-op (every restart emptied every scope's cache),
and trusted every later no-op, even one a crashed replica's write was left behind by.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry

from ragsift.errors import ServiceUnavailableError
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.versions import STALE_S
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import ChunkRecord
from ragsift.streams.routing import BatchRouter, Received
from ragsift.workers.indexer import IndexerHandler
from tests.unit.streams.scripted import RecordingSender, record_key

TOPIC = "ragsift.documents.v1"
TEXT = "Refunds are paid within fourteen days by bank transfer."
SCOPE = ("acme", "default")


class Crash(BaseException):
    """The process dies here (nothing after it runs, nothing of it is settled)."""


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class SharedCache(InMemoryCache):
    """The Redis every replica shares: it outlives them. ``crash_at_bump`` kills the
    indexer bumping; ``marks_unread`` and ``bumps_down`` are how many reads of the marks
    and bumps fail as a Redis that does not answer."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.crash_at_bump = False
        self.marks_unread = 0
        self.bumps_down = 0

    async def bump_index_version(self, tenant_id: str, collection: str) -> int:
        if self.crash_at_bump:
            raise Crash("killed between the index write and its bump")
        if self.bumps_down > 0:
            self.bumps_down -= 1
            raise ServiceUnavailableError("redis: TimeoutError", service="redis")
        return await super().bump_index_version(tenant_id, collection)

    async def pending(self, tenant_id: str, collection: str) -> dict[str, float]:
        if self.marks_unread > 0:
            self.marks_unread -= 1
            raise ServiceUnavailableError("redis: TimeoutError", service="redis")
        return await super().pending(tenant_id, collection)


class Probes:
    """A reprober that records what it was told changed."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str | None, str]] = []

    def touched(self, tenant: str | None, collection: str, *, settled: bool = False) -> None:
        self.scopes.append((tenant, collection))

    async def close(self) -> None:
        return None


def document(doc_id: str, op: str = "upsert", text: str = TEXT) -> bytes:
    body = {"event_id": f"e-{doc_id}-{op}", "tenant_id": "acme", "doc_id": doc_id, "op": op}
    return json.dumps({**body, "text": text} if op == "upsert" else body).encode()


def replica(index: EdgeIndex, cache: InMemoryCache, probes: Probes | None = None) -> IndexerHandler:
    """One indexer process on the shared ``index`` and ``cache``; no sleeping."""

    async def sleep(seconds: float) -> None:
        pass

    metrics = Metrics(CollectorRegistry())
    indexer = Indexer(index, HashingEmbedder(64), cache=cache, metrics=metrics)
    # Probes stands in for the Reprober: the handler only calls touched() and close().
    return IndexerHandler(indexer, probes, sleep=sleep)  # type: ignore[arg-type]


async def feed(handler: IndexerHandler, *values: bytes) -> RecordingSender:
    sender = RecordingSender()
    router = BatchRouter(handler, sender, metrics=Metrics(), deadline_s=5.0)
    keys = [record_key("documents", v, b"k") for v in values]
    await router.process(
        [Received(v, k, TOPIC, 0, i) for i, (v, k) in enumerate(zip(values, keys, strict=True))]
    )
    return sender


def skipped(handler: IndexerHandler, reason: str) -> float:
    metrics = handler.indexer.versions.metrics
    assert metrics is not None
    value = metrics.registry.get_sample_value(
        "ragsift_index_version_bumps_skipped_total", {"reason": reason}
    )
    return value or 0.0


async def test_a_clean_restart_trusts_no_ops(index: EdgeIndex) -> None:
    cache = SharedCache(Clock())
    await feed(replica(index, cache), document("gdpr"), document("old"))
    await feed(replica(index, cache), document("old", op="delete"))
    assert await cache.index_version(*SCOPE) == 3  # a bump per change
    assert await cache.pending(*SCOPE) == {}  # every write bumped, every mark cleared
    # The next process (a restart, a replica taking the partitions over) is handed the
    # same events again: nothing was left unbumped, so its cached results stand.
    restarted = replica(index, cache)
    sender = await feed(restarted, document("gdpr"), document("old", op="delete"))
    assert sender.dead_letters() == []
    assert await cache.index_version(*SCOPE) == 3
    assert skipped(restarted, "unchanged") == skipped(restarted, "absent") == 1


@pytest.mark.parametrize("op", ["upsert", "delete"])
async def test_a_crash_between_the_write_and_its_bump_is_bumped_by_the_next_indexer(
    index: EdgeIndex, op: str
) -> None:
    clock = Clock()
    cache = SharedCache(clock)
    await feed(replica(index, cache), document("gdpr"))
    assert await cache.index_version(*SCOPE) == 1
    # The change is written, then the process dies before its bump: results of the
    # old text stay cached under version 1, and the event is not committed.
    cache.crash_at_bump = True
    change = document("gdpr", text=TEXT + " Or by cheque.") if op == "upsert" else None
    redelivered = change or document("gdpr", op="delete")
    with pytest.raises(Crash):
        await feed(replica(index, cache), redelivered)
    cache.crash_at_bump = False
    assert len(await cache.pending(*SCOPE)) == 1  # its mark outlived it
    assert await cache.index_version(*SCOPE) == 1
    # The next process gets the event again and finds nothing left to change, but the
    # mark says a write may be unbumped: it bumps.
    after = replica(index, cache)
    await feed(after, redelivered)
    assert await cache.index_version(*SCOPE) == 2
    # The dead one's mark is young: it may be a live replica writing now, so it stays,
    # and a no-op bumps again, until it is older than any live write can be.
    await feed(after, redelivered)
    assert await cache.index_version(*SCOPE) == 3
    clock.now += STALE_S + 1
    await feed(after, redelivered)
    assert await cache.index_version(*SCOPE) == 4
    assert await cache.pending(*SCOPE) == {}  # that bump dropped it
    await feed(after, redelivered)
    assert await cache.index_version(*SCOPE) == 4  # trusted from here on


async def test_a_live_replicas_mark_is_bumped_for_and_left_to_it(index: EdgeIndex) -> None:
    # Two replicas during a rebalance: one has marked the scope for its batch (it may be
    # writing now) when the other meets a no-op there.
    cache = SharedCache(Clock())
    old_owner, new_owner = replica(index, cache), replica(index, cache)
    await feed(old_owner, document("gdpr"))
    await old_owner.indexer.versions.prepare([SCOPE])
    await feed(new_owner, document("gdpr"))
    assert await cache.index_version(*SCOPE) == 2  # not trusted: the write may be in flight
    assert len(await cache.pending(*SCOPE)) == 1  # and its mark is left to it
    await old_owner.settle()  # it finished: bumped what it wrote, cleared its mark
    assert await cache.pending(*SCOPE) == {}
    await feed(new_owner, document("gdpr"))
    assert await cache.index_version(*SCOPE) == 2


async def test_marks_that_cannot_be_read_are_never_trusted(index: EdgeIndex) -> None:
    cache = SharedCache(Clock())
    await feed(replica(index, cache), document("gdpr"))
    # Redis stops answering as a no-op asks for the scope's marks, and stays down for
    # the bump: the bump is owed, and the batch held (not committed) until it is in.
    cache.marks_unread, cache.bumps_down = 1, 3
    held = replica(index, cache)
    sender = await feed(held, document("gdpr"))
    assert sender.dead_letters() == []
    assert cache.bumps_down == 0
    assert await cache.index_version(*SCOPE) == 2
    assert held.indexer.owed == frozenset()
    assert skipped(held, "unchanged") == 0


async def test_a_write_that_fails_part_way_is_bumped(index: EdgeIndex) -> None:
    # The old chunks are deleted, then the upsert of the new ones fails: the event is
    # dead-lettered, and what was cached of the deleted text must go with it.
    cache = SharedCache(Clock())
    handler = replica(index, cache)
    await feed(handler, document("gdpr"))
    upsert = index.upsert

    async def failing(collection: str, records: Sequence[ChunkRecord]) -> int:
        raise ServiceUnavailableError("qdrant: write refused", service="qdrant")

    index.upsert = failing  # type: ignore[method-assign]  # the write fails after the delete
    sender = await feed(handler, document("gdpr", text=TEXT + " Or by cheque."))
    index.upsert = upsert  # type: ignore[method-assign]
    assert len(sender.dead_letters()) == 1
    assert await index.documents("default", "acme") == {}
    assert await cache.index_version(*SCOPE) == 2
    assert await cache.pending(*SCOPE) == {}


async def test_no_ops_probe_nothing_again(index: EdgeIndex) -> None:
    cache, probes = SharedCache(Clock()), Probes()
    handler = replica(index, cache, probes)
    await feed(handler, document("gdpr"))
    assert probes.scopes == [SCOPE]
    # Redeliveries and tombstones of documents never indexed change nothing: before,
    # each one queued a re-probe of the scope (counted not_due at best, a full probe
    # run where the scope had no calibration of its own) and put off a due one by the
    # quiet period; a tombstone naming any collection had it probed (no_collection).
    bogus = json.dumps(
        {"event_id": "x", "tenant_id": "acme", "doc_id": "d", "op": "delete", "collection": "zz"}
    ).encode()
    await feed(handler, document("gdpr"), document("never", op="delete"), bogus)
    assert probes.scopes == [SCOPE]
    await feed(handler, document("gdpr", op="delete"))  # a change: probed again
    assert probes.scopes == [SCOPE, SCOPE]
