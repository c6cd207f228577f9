"""What the real redis-server refuses for good is not an outage; what it refuses for now is.

A key of the wrong type (another program, or an older ragsift, wrote it) makes Redis
answer ``WRONGTYPE`` to every command on it, however often it is asked: retried as
"Redis is down", one such key stalled its partition for every tenant on it. A full
Redis (``OOM``, ``maxmemory`` reached) refuses writes only until memory is freed: that
stays an outage, waited out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
import redis

from ragsift.confidence.mix_state import ScopeState
from ragsift.confidence.registry import CalibrationScope
from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import RedisFeedbackStore, ScoredRecord, StoredLabel
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.retrieval.redis_cache import RedisCache
from ragsift.retrieval.redis_calibration import RedisMixState
from ragsift.retrieval.redis_replies import RedisRefusedError, refusal_counter
from ragsift.schemas import QueryEvent
from ragsift.settings import RedisSettings
from ragsift.streams.poison import is_transient
from ragsift.wiring import restore_mix, save_mix
from tests.integration.test_redis import _handbook_on_redis

SCOPE = CalibrationScope("docs", "acme")
RECORD = ScoredRecord(
    query_id="q1", tenant_id="acme", collection="docs", kept=True, signals={"top_score": 0.7}
)
LABEL = StoredLabel(record=RECORD, relevant=True, at=1.0, sampled=False)


@pytest.fixture
def settings(redis_settings: RedisSettings, unique: str) -> Iterator[RedisSettings]:
    scoped = redis_settings.model_copy(update={"key_prefix": f"it-refused-{unique}"})
    yield scoped
    client = redis.Redis.from_url(scoped.url)
    for key in client.scan_iter(f"{scoped.key_prefix}:*"):
        client.delete(key)
    client.close()


@pytest.fixture
def raw(settings: RedisSettings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.url)
    yield client
    client.close()


def refused(metrics: Metrics, store: str, key: str) -> float:
    return metrics.redis_refused.labels(store, key)._value.get()


def test_a_labels_key_of_the_wrong_type_is_refused_for_good_naming_the_key_kind(
    settings: RedisSettings, raw: redis.Redis
) -> None:
    metrics = Metrics()
    store = RedisFeedbackStore(settings, on_refused=refusal_counter(metrics, "feedback"))
    try:
        labels_key = f"{settings.key_prefix}:feedback:labels:docs\x1facme"
        raw.set(labels_key, "planted-value-7f3")  # a string, not a hash
        # Before: ServiceUnavailableError ("redis is down"): the batch held for ever.
        with pytest.raises(RedisRefusedError) as caught:
            store.put_label(SCOPE, LABEL)
        error = caught.value
        assert not is_transient(error)  # the poison guard isolates and dead-letters it
        assert error.code == "WRONGTYPE"
        assert "labels hash" in error.message
        assert "planted-value-7f3" not in error.message  # never what the key holds
        assert refused(metrics, "feedback", "labels") == 1
        # Other scopes of the same store are untouched.
        assert store.put_label(CalibrationScope("docs", "bravo"), LABEL) == "stored"
    finally:
        store.close()


def test_an_owners_key_of_the_wrong_type_fails_remember_for_good_without_the_tenants_data(
    settings: RedisSettings, raw: redis.Redis
) -> None:
    store = RedisFeedbackStore(settings)
    try:
        raw.hset(f"{settings.key_prefix}:feedback:owners:q1", "x", "1")  # a hash, not a set
        with pytest.raises(RedisRefusedError) as caught:
            store.remember([RECORD], ttl_s=60)
        # The pipeline's own message quotes the command and its arguments: not kept.
        assert "top_score" not in caught.value.message
        assert "acme" not in caught.value.message
        assert caught.value.code == "WRONGTYPE"
    finally:
        store.close()


def test_a_full_redis_stays_an_outage_waited_out(settings: RedisSettings, raw: redis.Redis) -> None:
    store = RedisFeedbackStore(settings)
    before = raw.config_get("maxmemory")["maxmemory"]
    raw.config_set("maxmemory", 1)  # with the default noeviction policy: every write is OOM
    try:
        with pytest.raises(ServiceUnavailableError) as caught:
            store.put_label(SCOPE, LABEL)
        assert is_transient(caught.value)
    finally:
        raw.config_set("maxmemory", before)
        store.close()
    assert RedisFeedbackStore(settings).put_label(SCOPE, LABEL) == "stored"


async def test_a_version_counter_of_the_wrong_type_is_unreadable_and_reset_not_an_outage(
    settings: RedisSettings, raw: redis.Redis
) -> None:
    cache = RedisCache(settings)
    try:
        raw.hset(cache._version_key("alpha", "docs"), "x", "1")  # a hash, not a counter
        # Before: the read script failed (WRONGTYPE) for the whole batch of scopes, every
        # tenant's look-up bypassed, and the cache cooled down as if Redis were down.
        alpha, bravo = await cache.index_versions([("alpha", "docs"), ("bravo", "docs")])
        assert alpha is None  # unreadable: the caller counts it and resets it
        assert bravo is not None
        reset = await cache.bump_index_version("alpha", "docs")
        assert await cache.index_versions([("alpha", "docs")]) == [reset]
        assert cache._down_until == 0.0  # never cooled down
    finally:
        await cache.close()


async def test_a_cache_entry_of_the_wrong_type_reads_as_a_miss_and_is_overwritten(
    settings: RedisSettings, raw: redis.Redis
) -> None:
    cache = RedisCache(settings)
    key = f"{settings.key_prefix}:entry"
    try:
        raw.hset(key, "x", "1")
        # Before: ServiceUnavailableError, and a cool-down as if Redis were down.
        assert await cache.get(key) is None
        assert await cache.get_many([key]) == [None]
        assert cache._down_until == 0.0
        await cache.set(key, b"fresh", ttl_s=60)
        assert await cache.get(key) == b"fresh"
    finally:
        await cache.close()


def test_a_refits_key_of_the_wrong_type_only_means_the_scopes_re_fit_again(
    settings: RedisSettings, raw: redis.Redis
) -> None:
    # One hash holds every scope's re-fit record: refused for good, dead-lettering each
    # label that reads it would dead-letter every label of every tenant.
    metrics = Metrics()
    store = RedisFeedbackStore(settings, on_refused=refusal_counter(metrics, "feedback"))
    try:
        raw.set(f"{settings.key_prefix}:feedback:refits", "planted-value-7f3")
        assert store.last_refit(SCOPE) is None
        store.mark_refit(SCOPE, "digest", 1.0)  # not recorded, not raised
        assert store.last_refit(SCOPE) is None
        assert refused(metrics, "feedback", "refits") == 3
        assert store.put_label(SCOPE, LABEL) == "stored"
    finally:
        store.close()


async def test_the_pipeline_answers_every_tenant_through_a_version_key_of_the_wrong_type(
    redis_settings: RedisSettings, unique: str, tmp_path: Path
) -> None:
    async with _handbook_on_redis(redis_settings, f"it-refused-{unique}", tmp_path) as on:
        cache, pipeline, metrics = on.cache, on.pipeline, on.metrics

        def ask(query_id: str, tenant: str = "alpha") -> QueryEvent:
            return QueryEvent(query_id=query_id, tenant_id=tenant, query="How are refunds paid?")

        version_key = cache._version_key("alpha", "default")
        await cache.client.delete(version_key)
        await cache.client.hset(version_key, "x", "1")  # a hash where a counter was
        outputs = await pipeline.process([ask("q1"), ask("q2", tenant="bravo")])
        assert all(isinstance(o, PipelineOutput) for o in outputs)

        def looked_up(result: str) -> float:
            labels = {"backend": "redis", "result": result}
            return metrics.registry.get_sample_value("ragsift_cache_requests_total", labels) or 0

        # Before: the batch's look-up failed (every tenant's), counted as Redis down.
        assert looked_up("error") == 0
        assert looked_up("corrupt") == 1  # the counter, reset
        [again] = await pipeline.process([ask("q3")])
        assert isinstance(again, PipelineOutput)
        assert again.result.cache.hit  # the reset counter's cache refilled


class SeenMix:
    """The mix monitor as :func:`restore_mix` and :func:`save_mix` see it: one scope seen."""

    def __init__(self, state: ScopeState) -> None:
        self.state = state

    def restore(self, states: list[ScopeState]) -> int:
        return len(states)

    def export(self) -> list[ScopeState]:
        return [self.state]


def test_a_mix_hash_of_the_wrong_type_reads_as_missing_and_is_left_as_it_is(
    settings: RedisSettings, raw: redis.Redis
) -> None:
    metrics = Metrics()
    store = RedisMixState(settings, on_refused=refusal_counter(metrics, "mix"))
    state = ScopeState(tenant="tenant-7f3a", collection="docs", version="v", counts=(0.5,) * 20)
    pipeline = cast(RetrievalPipeline, SimpleNamespace(mix=SeenMix(state)))
    try:
        raw.set(store.key, "planted-value-7f3")  # a string, not a hash
        # Before: an OSError at load and at every save, counted nowhere.
        assert store.load() == []
        assert restore_mix(pipeline, store) == 0  # the scopes start cold, no error
        assert save_mix(pipeline, store) == 0  # logged; the process keeps serving
        assert refused(metrics, "mix", "states") == 3
        assert raw.get(store.key) == b"planted-value-7f3"  # not ragsift's to delete
        # Redis full is an outage, not a refusal: the next save tries again.
        before = raw.config_get("maxmemory")["maxmemory"]
        raw.delete(store.key)
        raw.config_set("maxmemory", 1)
        try:
            with pytest.raises(OSError, match="OutOfMemoryError") as caught:
                store.save([state])
            assert not isinstance(caught.value, RedisRefusedError)
        finally:
            raw.config_set("maxmemory", before)
        assert refused(metrics, "mix", "states") == 3
        assert save_mix(pipeline, store) == 1
        assert restore_mix(pipeline, store) == 1
    finally:
        store.client.close()
