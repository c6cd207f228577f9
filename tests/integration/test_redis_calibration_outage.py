"""The real redis-server paused under the calibration registry: a scope read during the
pause gets its own calibration back once Redis answers, though its generation never moved."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from ragsift.confidence.registry import CalibrationRegistry, CalibrationScope
from ragsift.retrieval.redis_calibration import RedisCalibrationStore
from ragsift.settings import RedisSettings
from tests.integration.test_redis_calibration import base, tuned

#: Longer than two of the calibration store's socket timeouts (1 s at least each):
#: both of a query's reads (its tenant's scope, its collection's) time out.
_PAUSE_MS = 4000


@pytest.fixture
def settings(redis_settings: RedisSettings, unique: str) -> Iterator[RedisSettings]:
    scoped = redis_settings.model_copy(update={"key_prefix": f"it-calout-{unique}"})
    yield scoped
    client = redis.Redis.from_url(scoped.url)
    for key in client.scan_iter(f"{scoped.key_prefix}:*"):
        client.delete(key)
    client.close()


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_scope_read_during_a_pause_is_read_again_when_redis_answers(
    settings: RedisSettings,
) -> None:
    scope = CalibrationScope("docs", "acme")
    store = RedisCalibrationStore(settings)
    default = base()
    own = tuned(default)
    store.put(scope, own)
    clock = _Clock()
    registry = CalibrationRegistry(default, store, refresh_s=5, clock=clock)
    reasons: list[str] = []
    registry.on_fallback = reasons.append
    assert registry.resolve(None, "warm").version == default.version  # generation polled
    generation = store.generation()

    pauser = redis.Redis.from_url(settings.url)
    pauser.execute_command("CLIENT", "PAUSE", _PAUSE_MS, "ALL")
    pauser.close()
    # Within the refresh period: no poll, the scope's read times out.
    assert registry.resolve("acme", "docs").version == default.version
    assert reasons == ["unreadable"]

    probe = redis.Redis.from_url(settings.url, socket_timeout=10)
    assert probe.ping()  # answered once the pause is over
    probe.close()
    assert store.generation() == generation  # a pause keeps the data and the counter
    clock.now = 6.0
    assert registry.resolve("acme", "docs").version == own.version
    assert reasons == ["unreadable"]
    store.close()
