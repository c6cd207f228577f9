"""GET /v1/queries/{id} answered from Redis: another replica's result, TTL, Redis down."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from redis.exceptions import ConnectionError as RedisConnectionError

from ragsift.api import Authenticator, create_web_app
from ragsift.api.store import SharedResults
from ragsift.settings import ApiSettings, KafkaSettings
from tests.unit.api.conftest import Keys, RecordingApi, build_result


class FakeRedis:
    """The calls SharedResults makes, on a dict; ``down`` makes every call fail;
    ``reads`` counts the round trips that read."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.ttls: dict[str, int] = {}
        self.down = False
        self.reads = 0

    async def get(self, name: str) -> bytes | None:
        self.reads += 1
        if self.down:
            raise RedisConnectionError("redis is down")
        return self.data.get(name)

    async def mget(self, names: list[str]) -> list[bytes | None]:
        self.reads += 1
        if self.down:
            raise RedisConnectionError("redis is down")
        return [self.data.get(name) for name in names]

    async def set(self, name: str, value: bytes, ex: int) -> None:
        if self.down:
            raise RedisConnectionError("redis is down")
        self.data[name] = value
        self.ttls[name] = ex

    async def aclose(self) -> None:
        pass


def replica(redis: FakeRedis, keys: Keys, settings: ApiSettings, **options: Any) -> RecordingApi:
    # the fake has every call SharedResults makes
    shared = SharedResults(redis, prefix="t", ttl_s=60, **options)  # type: ignore[arg-type]
    auth = Authenticator.from_settings(settings)
    return RecordingApi(KafkaSettings(), auth=auth, settings=settings, shared=shared)


async def test_a_poll_on_another_replica_finds_the_result(
    keys: Keys, api_settings: ApiSettings
) -> None:
    redis = FakeRedis()
    first, second = replica(redis, keys, api_settings), replica(redis, keys, api_settings)
    first.accept("retrievals", build_result("q-1", "alpha"))
    assert first.shared is not None
    await first.shared.flush()
    assert set(redis.ttls.values()) == {60}
    async with TestClient(TestServer(create_web_app(second))) as client:
        found = await client.get("/v1/queries/q-1", headers=keys.header(keys.alpha))
        assert found.status == 200
        assert (await found.json())["tenant_id"] == "alpha"
        other = await client.get("/v1/queries/q-1", headers=keys.header(keys.beta))
        assert other.status == 404


async def test_redis_down_is_a_404_and_counted_not_a_500(
    keys: Keys, api_settings: ApiSettings
) -> None:
    redis = FakeRedis()
    api = replica(redis, keys, api_settings)
    redis.down = True
    api.accept("retrievals", build_result("q-2", "alpha"))
    assert api.shared is not None
    await api.shared.flush()
    async with TestClient(TestServer(create_web_app(api))) as client:
        # this replica still has it in memory
        assert (await client.get("/v1/queries/q-2", headers=keys.header(keys.alpha))).status == 200
        missing = await client.get("/v1/queries/q-3", headers=keys.header(keys.alpha))
        assert missing.status == 404
    errors = api.metrics.registry.get_sample_value("ragsift_api_shared_store_errors_total")
    assert errors == 2  # the failed write and the failed read


async def test_writes_past_the_queue_bound_are_dropped_and_counted(
    keys: Keys, api_settings: ApiSettings
) -> None:
    api = replica(FakeRedis(), keys, api_settings, max_pending=3)
    for n in range(10):
        api.accept("retrievals", build_result(f"q{n}", "alpha"))
    errors = api.metrics.registry.get_sample_value("ragsift_api_shared_store_errors_total")
    assert errors == 7


def test_the_ttl_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ttl_s must be > 0, got 0"):
        SharedResults(FakeRedis(), prefix="t", ttl_s=0)  # type: ignore[arg-type]  # a fake client


async def test_a_poll_with_many_tenants_reads_redis_in_one_round_trip(
    keys: Keys, api_settings: ApiSettings
) -> None:
    # A JWT may name many tenants: a poll looked each up in turn, one Redis round trip
    # per tenant per poll (200 here), each a network wait on the request's path.
    tenants = [f"t{n:03}" for n in range(200)]
    wide, _ = keys.store.create(tenants, ["read"])
    redis = FakeRedis()
    first, second = replica(redis, keys, api_settings), replica(redis, keys, api_settings)
    first.accept("retrievals", build_result("q-w", "t150"))
    first.accept("retrievals", build_result("q-w", "t170"))  # the same id, a later tenant
    assert first.shared is not None
    await first.shared.flush()
    async with TestClient(TestServer(create_web_app(second))) as client:
        found = await client.get("/v1/queries/q-w", headers=keys.header(wide))
        assert found.status == 200
        assert (await found.json())["tenant_id"] == "t150"  # the first tenant in order
        assert redis.reads == 1
        missing = await client.get("/v1/queries/q-none", headers=keys.header(wide))
        assert missing.status == 404
        assert redis.reads == 2
        # a result this replica holds for an earlier tenant is answered with no read
        second.accept("retrievals", build_result("q-w", "t000"))
        mine = await client.get("/v1/queries/q-w", headers=keys.header(wide))
        assert (await mine.json())["tenant_id"] == "t000"
        assert redis.reads == 2


async def test_a_failed_read_of_many_tenants_is_one_error_and_a_404(
    keys: Keys, api_settings: ApiSettings
) -> None:
    wide, _ = keys.store.create([f"t{n}" for n in range(30)], ["read"])
    redis = FakeRedis()
    api = replica(redis, keys, api_settings)
    redis.down = True
    async with TestClient(TestServer(create_web_app(api))) as client:
        assert (await client.get("/v1/queries/q", headers=keys.header(wide))).status == 404
    errors = api.metrics.registry.get_sample_value("ragsift_api_shared_store_errors_total")
    assert errors == 1
