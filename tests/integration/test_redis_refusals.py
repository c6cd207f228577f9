"""What the real redis-server refuses for good is not an outage; what it refuses for now is.

A key of the wrong type (another program, or an older ragsift, wrote it) makes Redis
answer ``WRONGTYPE`` to every command on it, however often it is asked: retried as
"Redis is down", one such key stalled its partition for every tenant on it. A full
Redis (``OOM``, ``maxmemory`` reached) refuses writes only until memory is freed: that
stays an outage, waited out.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from ragsift.confidence.registry import CalibrationScope
from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import RedisFeedbackStore, ScoredRecord, StoredLabel
from ragsift.retrieval.redis_replies import RedisRefusedError, refusal_counter
from ragsift.settings import RedisSettings
from ragsift.streams.poison import is_transient

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
