"""The real redis-server: a round trip with a TTL."""

from __future__ import annotations

import redis.asyncio as aioredis

from ragsift.settings import RedisSettings


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
