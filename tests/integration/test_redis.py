"""The real redis-server: a round trip with a TTL; the cache's handling of what it finds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.retrieval.redis_cache import RedisCache
from ragsift.schemas import QueryEvent
from ragsift.settings import RedisSettings, Settings
from ragsift.wiring import build_pipeline
from tests.factories import low_bar_confidence

TEXT = "Alpha handbook: refunds are paid within fourteen days by bank transfer."


async def test_redis_round_trip_with_ttl(redis_settings: RedisSettings, unique: str) -> None:
    client = aioredis.from_url(redis_settings.url)
    key = f"it:roundtrip:{unique}"
    try:
        assert await client.ping()
        await client.set(key, b"\x00payload\xff", ex=120)
        assert await client.get(key) == b"\x00payload\xff"
        ttl = await client.ttl(key)
        assert 0 < ttl <= 120
        await client.delete(key)
        assert await client.get(key) is None
    finally:
        await client.aclose()


# -- issue 12: what is in Redis never fails a batch ------------------------------------------


async def test_redis_cache_unreadable_version_reads_as_none_and_bump_resets_it(
    redis_settings: RedisSettings, unique: str
) -> None:
    cache = RedisCache(redis_settings.model_copy(update={"key_prefix": f"it-{unique}"}))
    try:
        key = cache._version_key("alpha", "docs")
        await cache.client.set(key, b"not-a-number")
        alpha, bravo = await cache.index_versions([("alpha", "docs"), ("bravo", "docs")])
        assert alpha is None
        assert bravo is not None
        assert bravo > 10**15
        assert await cache.index_version("alpha", "docs") is None
        reset = await cache.bump_index_version("alpha", "docs")
        assert reset > 10**15  # far above any count of ingestions, so no stale entry
        assert await cache.index_versions([("alpha", "docs")]) == [reset]
        assert await cache.bump_index_version("alpha", "docs") == reset + 1
        assert await cache.bump_index_version("bravo", "docs") == bravo + 1
    finally:
        await cache.client.delete(*[k async for k in cache.client.scan_iter(f"it-{unique}:*")])
        await cache.close()


async def test_a_lost_version_counter_never_hands_out_a_version_again(
    redis_settings: RedisSettings, unique: str
) -> None:
    # An evicted or deleted counter used to read as 0 and count up again from there,
    # so entries stored a day before under versions 0, 1, 2... were served once more.
    cache = RedisCache(redis_settings.model_copy(update={"key_prefix": f"it-{unique}"}))
    try:
        key = cache._version_key("alpha", "docs")
        handed_out = [await cache.index_version("alpha", "docs")]
        for _ in range(3):
            handed_out.append(await cache.bump_index_version("alpha", "docs"))
        await cache.client.delete(key)
        [after_read] = await cache.index_versions([("alpha", "docs")])
        assert after_read is not None
        assert after_read > max(v or 0 for v in handed_out)
        await cache.client.delete(key)
        after_bump = await cache.bump_index_version("alpha", "docs")
        assert after_bump > after_read
        assert await cache.index_version("alpha", "docs") == after_bump
    finally:
        await cache.client.delete(*[k async for k in cache.client.scan_iter(f"it-{unique}:*")])
        await cache.close()


@dataclass
class _OnRedis:
    """The handbook indexed for tenant ``alpha``, and a pipeline caching on Redis."""

    settings: Settings
    cache: RedisCache
    pipeline: RetrievalPipeline
    metrics: Metrics


@asynccontextmanager
async def _handbook_on_redis(
    redis_settings: RedisSettings, prefix: str, tmp_path: Path
) -> AsyncIterator[_OnRedis]:
    settings = Settings(
        data_dir=tmp_path,
        redis=redis_settings.model_copy(update={"key_prefix": prefix}),
        confidence=low_bar_confidence(),
    )
    cache = RedisCache(settings.redis)
    index = EdgeIndex(tmp_path / "edge")
    metrics = Metrics()
    embedder = HashingEmbedder()
    try:
        await Indexer(index, embedder, cache=cache).ingest(
            "alpha", "default", [SourceDocument("handbook.md", TEXT)]
        )
        pipeline = build_pipeline(
            settings, index=index, embedder=embedder, metrics=metrics, cache=cache
        )
        yield _OnRedis(settings, cache, pipeline, metrics)
    finally:
        await cache.client.delete(*[k async for k in cache.client.scan_iter(f"{prefix}:*")])
        await cache.close()
        await index.close()


async def test_pipeline_on_redis_treats_garbage_values_and_counters_as_misses(
    redis_settings: RedisSettings, unique: str, tmp_path: Path
) -> None:
    prefix = f"it-{unique}"
    async with _handbook_on_redis(redis_settings, prefix, tmp_path) as on:
        cache, pipeline, metrics = on.cache, on.pipeline, on.metrics

        def ask(query_id: str) -> QueryEvent:
            return QueryEvent(query_id=query_id, tenant_id="alpha", query="How are refunds paid?")

        [first] = await pipeline.process([ask("q1")])
        assert isinstance(first, PipelineOutput)
        [stored] = [k async for k in cache.client.scan_iter(f"{prefix}:r:*")]
        await cache.client.set(stored, b"\xff garbage from an older release", ex=60)
        [second] = await pipeline.process([ask("q2")])
        assert isinstance(second, PipelineOutput)
        assert not second.result.cache.hit
        assert [h.text for h in second.result.hits] == [TEXT]
        [third] = await pipeline.process([ask("q3")])
        assert isinstance(third, PipelineOutput)
        assert third.result.cache.hit  # the garbage was overwritten by the fresh result

        await cache.client.set(cache._version_key("alpha", "default"), b"v2-oops")
        [fourth] = await pipeline.process([ask("q4")])
        assert isinstance(fourth, PipelineOutput)
        assert not fourth.result.cache.hit
        corrupt = metrics.registry.get_sample_value(
            "ragsift_cache_requests_total", {"backend": "redis", "result": "corrupt"}
        )
        assert corrupt == 2
        [fifth] = await pipeline.process([ask("q5")])
        assert isinstance(fifth, PipelineOutput)
        assert fifth.result.cache.hit  # the counter was reset and the cache refilled


async def test_redis_ttls_reads_every_key_in_one_round_trip(
    redis_settings: RedisSettings, unique: str
) -> None:
    cache = RedisCache(redis_settings.model_copy(update={"key_prefix": f"it-{unique}"}))
    keys = [f"it-{unique}:k{i}" for i in range(4)]
    try:
        await cache.client.set(keys[0], b"a", ex=120)
        await cache.client.set(keys[1], b"b", ex=30)
        await cache.client.set(keys[2], b"no expiry")
        left = await cache.ttls(keys)  # keys[3] is absent
        assert left[0] is not None
        assert 110 < left[0] <= 120
        assert left[1] is not None
        assert 20 < left[1] <= 30
        assert left[2:] == [None, None]
        assert await cache.ttls([]) == []
    finally:
        await cache.client.delete(*keys)
        await cache.close()


async def test_a_batch_of_cache_hits_reads_their_ttls_in_one_round_trip(
    redis_settings: RedisSettings, unique: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each hit says how long it has left; asking Redis once per hit made a batch of
    hits wait one round trip per query."""
    questions = ["How are refunds paid?", "Within how many days?", "By what transfer?"]
    async with _handbook_on_redis(redis_settings, f"it-{unique}", tmp_path) as on:
        settings, cache, pipeline = on.settings, on.cache, on.pipeline

        def batch(tag: str) -> list[QueryEvent]:
            return [
                QueryEvent(query_id=f"{tag}{i}", tenant_id="alpha", query=q)
                for i, q in enumerate(questions)
            ]

        fresh = await pipeline.process(batch("a"))
        assert all(isinstance(o, PipelineOutput) and not o.result.cache.hit for o in fresh)
        calls: list[int] = []
        asked = cache.ttls

        async def counted(keys: list[str]) -> list[int | None]:
            calls.append(len(keys))
            return await asked(keys)

        monkeypatch.setattr(cache, "ttls", counted)
        again = await pipeline.process(batch("b"))
        assert calls == [len(questions)]
        for out in again:
            assert isinstance(out, PipelineOutput)
            assert out.result.cache.hit
            assert out.result.cache.ttl_seconds is not None
            assert 0 < out.result.cache.ttl_seconds <= settings.cache.ttl_high_s
