"""GET /v1/queries/{id} through the real Redis: written by one replica, read with a TTL."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from ragsift.api.store import SharedResults
from ragsift.settings import RedisSettings
from tests.unit.api.conftest import build_result


async def test_a_result_written_by_one_replica_is_read_by_another_and_expires(
    redis_settings: RedisSettings, unique: str
) -> None:
    prefix = f"test-{unique}"
    writer = SharedResults(aioredis.from_url(redis_settings.url), prefix=prefix, ttl_s=30)
    reader = SharedResults(aioredis.from_url(redis_settings.url), prefix=prefix, ttl_s=30)
    body = build_result("q-shared", "alpha").model_dump_json().encode()
    try:
        writer.put(("result", "alpha", "q-shared"), body)
        await writer.flush()
        assert await reader.get(("result", "alpha", "q-shared")) == body
        assert await reader.get(("result", "beta", "q-shared")) is None
        ttl = await reader.client.ttl(reader.key(("result", "alpha", "q-shared")))
        assert 0 < ttl <= 30
    finally:
        await writer.client.delete(writer.key(("result", "alpha", "q-shared")))
        await writer.close()
        await reader.close()


async def test_many_keys_are_read_in_order_in_one_round_trip(
    redis_settings: RedisSettings, unique: str
) -> None:
    shared = SharedResults(aioredis.from_url(redis_settings.url), prefix=f"test-{unique}", ttl_s=30)
    keys = [("result", f"t{n}", "q-many") for n in range(50)]
    body = build_result("q-many", "t40").model_dump_json().encode()
    info = aioredis.from_url(redis_settings.url)
    try:
        shared.put(keys[40], body)
        await shared.flush()
        before = await info.info("commandstats")
        found = await shared.get_many(keys)
        after = await info.info("commandstats")
        assert found == [None] * 40 + [body] + [None] * 9
        assert _calls(after, "mget") - _calls(before, "mget") == 1
        assert _calls(after, "get") == _calls(before, "get")
    finally:
        await shared.client.delete(shared.key(keys[40]))
        await shared.close()
        await info.aclose()


def _calls(stats: dict[str, Any], command: str) -> int:
    """Calls of ``command`` the server has served (``INFO commandstats``)."""
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
