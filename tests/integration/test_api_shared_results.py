"""GET /v1/queries/{id} through the real Redis: written by one replica, read with a TTL."""

from __future__ import annotations

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
