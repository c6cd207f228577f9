"""The Redis result cache of the streaming workers.

Values are serialized results with a TTL by confidence level; index versions
are plain counters (``INCR``), shared by every replica, so an ingestion on any
indexer invalidates the tenant's entries everywhere. Redis trouble never fails
a query: every error is raised as :class:`ServiceUnavailableError` (the
pipeline counts it and bypasses the cache), and after an error the cache stays
bypassed for a short cool-down instead of making every query wait for a
socket timeout while Redis is down.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ragsift.errors import ServiceUnavailableError
from ragsift.settings import RedisSettings

__all__ = ["RedisCache"]

T = TypeVar("T")

# After a Redis error, skip Redis this long before trying again: a down Redis
# costs one timeout per second, not one per query.
COOL_DOWN_S = 1.0


# INCR, or reset an unreadable counter: one atomic script, so two replicas bumping a
# corrupted counter at once both end above every version used before.
_BUMP_SCRIPT = """
local bumped = redis.pcall('INCR', KEYS[1])
if type(bumped) == 'table' and bumped.err then
  redis.call('SET', KEYS[1], ARGV[1])
  return tonumber(ARGV[1])
end
return bumped
"""


def _version(raw: Any) -> int | None:
    """A stored index version: 0 when absent, None when it is not an integer."""
    if raw is None:
        return 0
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


class RedisCache:
    """:class:`~ragsift.retrieval.cache.ResultCache` on Redis."""

    backend = "redis"

    def __init__(
        self,
        settings: RedisSettings,
        *,
        client: aioredis.Redis | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        password = settings.password.get_secret_value() if settings.password else None
        self.client = client or aioredis.from_url(
            settings.url,
            password=password,
            socket_timeout=settings.socket_timeout_s,
            socket_connect_timeout=settings.socket_timeout_s,
        )
        self.prefix = settings.key_prefix
        self._clock = clock
        self._down_until = 0.0

    async def _call(self, op: Callable[[], Awaitable[T]]) -> T:
        if self._clock() < self._down_until:
            raise ServiceUnavailableError("redis is cooling down after an error", service="redis")
        try:
            return await op()
        except (RedisError, OSError, TimeoutError) as exc:
            self._down_until = self._clock() + COOL_DOWN_S
            raise ServiceUnavailableError(
                f"redis: {type(exc).__name__}: {exc}", service="redis", retry_after=COOL_DOWN_S
            ) from exc

    async def get(self, key: str) -> bytes | None:
        """The cached value, or None on a miss."""
        value: Any = await self._call(lambda: self.client.get(key))
        return bytes(value) if value is not None else None

    async def set(self, key: str, value: bytes, ttl_s: int) -> None:
        """Store ``value`` for ``ttl_s`` seconds; non-positive TTLs store nothing."""
        if ttl_s <= 0:
            return
        await self._call(lambda: self.client.set(key, value, ex=ttl_s))

    async def ttl(self, key: str) -> int | None:
        """Seconds left for ``key``, None when absent or without expiry."""
        left: int = await self._call(lambda: self.client.ttl(key))
        return left if left >= 0 else None

    async def ttls(self, keys: Sequence[str]) -> list[int | None]:
        """Seconds left for each key, in order (None when absent or without expiry): one
        pipelined round trip of ``TTL`` commands, not one round trip per key."""
        if not keys:
            return []

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.ttl(key)
                return list(await pipe.execute())

        left: list[Any] = await self._call(read)
        return [int(t) if t >= 0 else None for t in left]

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The cached value of each key, in order (None on a miss): one ``MGET``."""
        if not keys:
            return []
        values: list[Any] = await self._call(lambda: self.client.mget(keys))
        return [bytes(v) if v is not None else None for v in values]

    async def set_many(self, items: Sequence[tuple[str, bytes, int]]) -> None:
        """Store each ``(key, value, ttl_s)`` in one pipelined round trip (TTL <= 0: not stored)."""
        stored = [(key, value, ttl_s) for key, value, ttl_s in items if ttl_s > 0]
        if not stored:
            return

        async def write() -> None:
            async with self.client.pipeline(transaction=False) as pipe:
                for key, value, ttl_s in stored:
                    pipe.set(key, value, ex=ttl_s)
                await pipe.execute()

        await self._call(write)

    def _version_key(self, tenant_id: str, collection: str) -> str:
        return f"{self.prefix}:v:{tenant_id}:{collection}"

    async def index_version(self, tenant_id: str, collection: str) -> int | None:
        """The tenant's index version (0 before any ingestion, None when not an integer)."""
        raw: Any = await self._call(
            lambda: self.client.get(self._version_key(tenant_id, collection))
        )
        return _version(raw)

    async def index_versions(self, scopes: Sequence[tuple[str, str]]) -> list[int | None]:
        """The index version of each ``(tenant_id, collection)``, in order: one ``MGET``.

        A value that is not an integer gives None (see ``ResultCache.index_versions``).
        """
        if not scopes:
            return []
        keys = [self._version_key(tenant_id, collection) for tenant_id, collection in scopes]
        raw: list[Any] = await self._call(lambda: self.client.mget(keys))
        return [_version(v) for v in raw]

    async def bump_index_version(self, tenant_id: str, collection: str) -> int:
        """Increment the tenant's index version; its old cache keys are never read again.

        A counter ``INCR`` refuses (not an integer) is reset, atomically, to the clock
        in milliseconds: far above any count of ingestions, so no entry stored under an
        earlier version can be read again.
        """
        key = self._version_key(tenant_id, collection)
        reset_to = int(time.time() * 1000)
        version: Any = await self._call(lambda: self.client.eval(_BUMP_SCRIPT, 1, key, reset_to))
        return int(version)

    async def close(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()
