"""On the real redis-server: document events that change nothing indexed leave the
tenant's version counter (and so its cached results) alone; a change still moves it."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from ragsift.ingest.indexer import Indexer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.redis_cache import RedisCache
from ragsift.schemas import DocumentEvent
from ragsift.settings import RedisSettings

TEXT = "Refunds are paid within fourteen days by bank transfer."


def event(doc_id: str, op: str = "upsert") -> DocumentEvent:
    body = {"event_id": f"e-{doc_id}-{op}", "tenant_id": "acme", "doc_id": doc_id, "op": op}
    return DocumentEvent.model_validate({**body, "text": TEXT} if op == "upsert" else body)


async def test_redeliveries_and_deletes_of_nothing_leave_the_redis_counter(
    redis_settings: RedisSettings, unique: str, tmp_path: Path
) -> None:
    cache = RedisCache(redis_settings.model_copy(update={"key_prefix": f"it:{unique}"}))
    index = EdgeIndex(tmp_path / "edge")
    metrics = Metrics(CollectorRegistry())
    indexer = Indexer(index, HashingEmbedder(64), cache=cache, metrics=metrics)
    try:
        await indexer.apply(event("gdpr"))
        version = await cache.index_version("acme", "default")
        for _ in range(3):  # redeliveries, and tombstones of documents acme never had
            await indexer.apply(event("gdpr"))
            await indexer.apply(event("never", op="delete"))
        assert await cache.index_version("acme", "default") == version
        skipped = metrics.registry.get_sample_value
        assert skipped("ragsift_index_version_bumps_skipped_total", {"reason": "unchanged"}) == 3
        assert skipped("ragsift_index_version_bumps_skipped_total", {"reason": "absent"}) == 3
        await indexer.apply(event("gdpr", op="delete"))  # removes its chunks: bumps
        assert await cache.index_version("acme", "default") == (version or 0) + 1
    finally:
        await cache.client.delete(*[k async for k in cache.client.scan_iter(f"it:{unique}:*")])
        await cache.close()
        await index.close()


class Crash(BaseException):
    """The indexer process dies here: nothing after it runs."""


class CrashingCache(RedisCache):
    """The indexer that dies between its index write and its bump."""

    async def bump_index_version(self, tenant_id: str, collection: str) -> int:
        raise Crash("killed before the bump")


async def test_a_crash_before_the_bump_is_seen_by_the_next_indexer_a_clean_stop_is_not(
    redis_settings: RedisSettings, unique: str, tmp_path: Path
) -> None:
    settings = redis_settings.model_copy(update={"key_prefix": f"it:{unique}"})
    cache = RedisCache(settings)
    index = EdgeIndex(tmp_path / "edge")
    scope = ("acme", "default")

    def indexer_on(on: RedisCache) -> Indexer:
        return Indexer(index, HashingEmbedder(64), cache=on, metrics=Metrics(CollectorRegistry()))

    try:
        clean = indexer_on(cache)  # a batch, as the handler runs it: marked, applied, settled
        await clean.versions.prepare([scope])
        await clean.apply(event("gdpr"))
        await clean.settle()
        version = await cache.index_version(*scope)
        assert await cache.pending(*scope) == {}
        restarted = indexer_on(cache)  # a clean restart: the replay is trusted
        await restarted.versions.prepare([scope])
        assert (await restarted.apply(event("gdpr"))).index_version is None
        await restarted.settle()
        assert await cache.index_version(*scope) == version

        crashing = CrashingCache(settings)
        dying = indexer_on(crashing)
        await dying.versions.prepare([scope])
        with pytest.raises(Crash):  # the delete is written, the process dies
            await dying.apply(event("gdpr", op="delete"))
        await crashing.close()
        [token] = await cache.pending(*scope)  # its mark outlived it, in Redis
        assert 0 <= (await cache.pending(*scope))[token] < 60
        after = indexer_on(cache)
        await after.versions.prepare([scope])
        bumped = await after.apply(event("gdpr", op="delete"))  # finds nothing to delete
        await after.settle()
        assert bumped.index_version == await cache.index_version(*scope) == (version or 0) + 1
        assert list(await cache.pending(*scope)) == [token]  # young: it may be a live write
        # Once older than any live write can be, the bump that sees it drops it.
        assert await cache.bump_clearing(*scope, 3_600.0) == (version or 0) + 2
        assert list(await cache.pending(*scope)) == [token]
        assert await cache.bump_clearing(*scope, 0.0) == (version or 0) + 3
        assert await cache.pending(*scope) == {}
    finally:
        await cache.client.delete(*[k async for k in cache.client.scan_iter(f"it:{unique}:*")])
        await cache.close()
        await index.close()


async def test_a_pending_key_of_another_type_is_read_as_a_write_of_unknown_age(
    redis_settings: RedisSettings, unique: str
) -> None:
    cache = RedisCache(redis_settings.model_copy(update={"key_prefix": f"it:{unique}"}))
    key = f"it:{unique}:p:acme:default"
    try:
        await cache.client.set(key, "not a hash")  # not the cache's own: nothing trusted
        assert await cache.pending("acme", "default") == {"": 1e18}
        await cache.bump_clearing("acme", "default", 10_800.0)
        assert await cache.client.exists(key) == 0  # dropped by the bump
        await cache.client.rpush(key, "x")
        await cache.mark_pending("acme", "default", "me:1")  # a write drops it too
        assert list(await cache.pending("acme", "default")) == ["me:1"]
        await cache.clear_pending("acme", "default", ["me:1"])
        assert await cache.client.exists(key) == 0
        # A field that is not an indexer's token as written: its time is no number, its
        # name no UTF-8. It reads as a write of unknown age, and the bump drops it.
        await cache.client.hset(key, b"\xff\xfe", "soon")
        await cache.client.hset(key, "文書\x07" * 5_000, "not a time")
        await cache.mark_pending("acme", "default", "me:2")
        ages = await cache.pending("acme", "default")
        assert sorted(age > 1e9 for age in ages.values()) == [False, True, True]
        await cache.bump_clearing("acme", "default", 10_800.0)
        assert list(await cache.pending("acme", "default")) == ["me:2"]  # a live one stays
    finally:
        await cache.client.delete(*[k async for k in cache.client.scan_iter(f"it:{unique}:*")])
        await cache.close()
