"""The shared mix hash that Redis refuses for good reads as missing and is counted; Redis
down stays an ``OSError`` the caller logs (the process starts its scopes cold)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import ResponseError

from ragsift.confidence.mix_state import ScopeState
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.redis_calibration import RedisMixState
from ragsift.retrieval.redis_replies import RedisRefusedError, refusal_counter
from ragsift.settings import (
    CalibrationSettings,
    ConfidenceSettings,
    RedisSettings,
    Settings,
)
from ragsift.wiring import build_mix_state

pytestmark = pytest.mark.unit

DOWN = redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
WRONGTYPE = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
#: A tenant id no message or log line may carry.
TENANT = "tenant-7f3a"
STATE = ScopeState(tenant=TENANT, collection="docs", version="v", counts=(0.5,) * 20)


class FailingRedis:
    """As much of a Redis client as :class:`RedisMixState` uses; every command raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls: list[str] = []

    def _fail(self, op: str) -> Any:
        self.calls.append(op)
        raise self.error

    def hgetall(self, _key: str) -> dict[bytes, bytes]:
        return self._fail("hgetall")  # type: ignore[no-any-return]

    def hdel(self, _key: str, *_fields: Any) -> int:
        return self._fail("hdel")  # type: ignore[no-any-return]

    def hset(self, _key: str, *, mapping: dict[str, str]) -> int:
        return self._fail("hset")  # type: ignore[no-any-return]

    def delete(self, *_keys: str) -> int:
        return self._fail("delete")  # type: ignore[no-any-return]


def store_on(error: Exception, metrics: Metrics) -> RedisMixState:
    client: Any = FailingRedis(error)
    return RedisMixState(RedisSettings(), client=client, on_refused=refusal_counter(metrics, "mix"))


def refused(metrics: Metrics) -> float:
    return metrics.redis_refused.labels("mix", "states")._value.get()


def test_a_mix_hash_redis_refuses_loads_as_missing_and_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    store = store_on(WRONGTYPE, metrics)
    # Before: an OSError, logged by restore_mix and counted nowhere, at every start.
    with caplog.at_level(logging.WARNING):
        assert store.load() == []
    assert refused(metrics) == 1
    assert "WRONGTYPE" in caplog.text
    assert TENANT not in caplog.text


def test_a_save_redis_refuses_is_counted_names_the_kind_and_overwrites_nothing() -> None:
    metrics = Metrics()
    store = store_on(WRONGTYPE, metrics)
    with pytest.raises(RedisRefusedError) as caught:
        store.save([STATE])
    error = caught.value
    assert isinstance(error, OSError)  # save_mix logs it and the process keeps serving
    assert (error.store, error.key_kind, error.code) == ("mix", "states", "WRONGTYPE")
    assert "mix states hash" in error.message
    assert TENANT not in error.message
    assert refused(metrics) == 1
    # The key is another program's: ragsift never deletes what it holds.
    assert store.client.calls == ["hset"]  # type: ignore[attr-defined]


def test_redis_down_is_an_outage_not_counted_as_a_refusal() -> None:
    metrics = Metrics()
    store = store_on(DOWN, metrics)
    with pytest.raises(OSError, match="ConnectionError") as loading:
        store.load()
    with pytest.raises(OSError, match="ConnectionError") as saving:
        store.save([STATE])
    for caught in (loading, saving):
        assert not isinstance(caught.value, RedisRefusedError)
    assert refused(metrics) == 0


def test_the_wired_mix_state_counts_its_refusals(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(unanswerable_share="auto"),
        calibration=CalibrationSettings(store="redis"),
    )
    metrics = Metrics()
    store = build_mix_state(settings, metrics=metrics)
    assert isinstance(store, RedisMixState)
    store.client.close()
    store.client = FailingRedis(WRONGTYPE)  # type: ignore[assignment]
    assert store.load() == []
    assert refused(metrics) == 1
