"""The Redis result cache of the streaming workers.

Values are serialized results with a TTL by confidence level; index versions
are counters (``INCR``), shared by every replica, so an ingestion on any
indexer invalidates the tenant's entries everywhere. A counter starts at Redis's
clock in microseconds, not at 0, and starts there again when it is lost
(evicted, deleted) or unreadable: a version is never handed out twice, so an
entry stored under an earlier version is never read again. Redis trouble never fails
a query: every error is raised as :class:`ServiceUnavailableError` (the
pipeline counts it and bypasses the cache), and after an error the cache stays
bypassed for a short cool-down instead of making every query wait for a
socket timeout while Redis is down. A reply Redis repeats for good for one key
(:func:`~ragsift.retrieval.redis_replies.refused`) is no outage and starts no
cool-down: an entry or a counter of the wrong type reads as a miss (an unreadable
counter) and is overwritten, since every key under the prefix is the cache's own.
Each scope's pending marks (the indexers' writes not yet covered by a bump,
``ragsift.ingest.versions``) are a hash beside its counter, without a TTL either.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from ragsift.errors import ServiceUnavailableError
from ragsift.retrieval.redis_replies import RedisRefusedError, refused, reply_code
from ragsift.settings import RedisSettings

__all__ = ["RedisCache"]

T = TypeVar("T")

# After a Redis error, skip Redis this long before trying again: a down Redis
# costs one timeout per second, not one per query.
COOL_DOWN_S = 1.0


# Redis's clock in microseconds, as a decimal string: where a counter starts. It is
# above every version a counter handed out before (those are a start plus one per
# ingestion, and ingestions do not come a million a second), so a counter that was
# lost or reset never hands out a version an entry may still be stored under.
_NOW_US = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
"""

# Read counters; one that is missing starts at the clock (atomically, so every replica
# reading it at once gets the same start). A value that is not an integer is returned
# as it is, for the caller to see as unreadable; so is a key of another type ('': GET
# refuses it with WRONGTYPE, which failed the whole batch's look-up, every tenant's).
_READ_SCRIPT = (
    _NOW_US
    + """
local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    v = ''
  elseif not v then
    redis.call('SET', key, now)
    v = now
  end
  out[i] = v
end
return out
"""
)

# INCR a counter, or start a missing or unreadable one at the clock: one atomic script,
# so two replicas bumping a lost or corrupted counter at once both end above every
# version used before.
_BUMP_SCRIPT = (
    _NOW_US
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  local bumped = redis.pcall('INCR', KEYS[1])
  if not (type(bumped) == 'table' and bumped.err) then
    return bumped
  end
end
redis.call('SET', KEYS[1], now)
return now
"""
)


# Indexers' pending tokens (``ragsift.ingest.versions``): a hash per scope, token ->
# Redis's clock in seconds when it was recorded (a time that is not a number: as old
# as can be). A key of another type under it (not
# the cache's own) is dropped before a write, and read as one token of unknown age
# (so the reader bumps, as it must when it cannot tell what was written).
_NOW_S = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now_s = tonumber(t[1]) + tonumber(t[2]) / 1000000
local kind = redis.call('TYPE', KEYS[#KEYS]).ok
"""
_FOREIGN = "if kind ~= 'hash' and kind ~= 'none' then redis.call('DEL', KEYS[#KEYS]) end\n"

_MARK_SCRIPT = (
    _NOW_S
    + _FOREIGN
    + "redis.call('HSET', KEYS[1], ARGV[1], string.format('%.6f', now_s))\nreturn 1\n"
)

_PENDING_SCRIPT = (
    _NOW_S
    + """
if kind ~= 'hash' then
  if kind == 'none' then return {} end
  return {'', '1e18'}
end
local out = {}
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  out[#out + 1] = flat[i]
  out[#out + 1] = string.format('%.6f', now_s - (tonumber(flat[i + 1]) or 0))
end
return out
"""
)

# The bump of _BUMP_SCRIPT, then every token older than ARGV[1] seconds dropped, in one
# atomic script: the bump comes after every write made under them.
_BUMP_CLEAR_SCRIPT = (
    _NOW_US
    + _NOW_S
    + _FOREIGN
    + """
local bumped = nil
if redis.call('EXISTS', KEYS[1]) == 1 then
  bumped = redis.pcall('INCR', KEYS[1])
  if type(bumped) == 'table' and bumped.err then bumped = nil end
end
if not bumped then
  redis.call('SET', KEYS[1], now)
  bumped = now
end
local flat = {}
if redis.call('EXISTS', KEYS[2]) == 1 then flat = redis.call('HGETALL', KEYS[2]) end
for i = 1, #flat, 2 do
  if now_s - (tonumber(flat[i + 1]) or 0) > tonumber(ARGV[1]) then
    redis.call('HDEL', KEYS[2], flat[i])
  end
end
return bumped
"""
)

_CLEAR_SCRIPT = (
    _NOW_S
    + _FOREIGN
    + """
if #ARGV > 0 then redis.call('HDEL', KEYS[1], unpack(ARGV)) end
return 1
"""
)


def _version(raw: Any) -> int | None:
    """A stored index version; None when it is not an integer."""
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
        # EVALSHA, falling back to EVAL once per connection that has not seen the script.
        self._read_versions = self.client.register_script(_READ_SCRIPT)
        self._bump_version = self.client.register_script(_BUMP_SCRIPT)
        self._mark = self.client.register_script(_MARK_SCRIPT)
        self._read_pending = self.client.register_script(_PENDING_SCRIPT)
        self._bump_clear = self.client.register_script(_BUMP_CLEAR_SCRIPT)
        self._clear = self.client.register_script(_CLEAR_SCRIPT)
        self._clock = clock
        self._down_until = 0.0

    async def _call(self, op: Callable[[], Awaitable[T]], kind: str = "entry") -> T:
        """``op()``; Redis down is :class:`ServiceUnavailableError` (and a cool-down), a
        command it refuses for good on a key of ``kind`` (``entry``, ``version``) is
        :class:`RedisRefusedError`, no cool-down: the other keys are served."""
        if self._clock() < self._down_until:
            raise ServiceUnavailableError("redis is cooling down after an error", service="redis")
        try:
            return await op()
        except (RedisError, OSError, TimeoutError) as exc:
            if refused(exc):  # one key's or command's fault, not Redis down: no cool-down
                raise RedisRefusedError(
                    f"redis cache: Redis refuses a command ({type(exc).__name__})",
                    store="cache",
                    key_kind=kind,
                    code=reply_code(exc) if isinstance(exc, ResponseError) else "client",
                ) from exc
            self._down_until = self._clock() + COOL_DOWN_S
            raise ServiceUnavailableError(
                f"redis: {type(exc).__name__}: {exc}", service="redis", retry_after=COOL_DOWN_S
            ) from exc

    async def get(self, key: str) -> bytes | None:
        """The cached value, or None on a miss (an entry of another type: a miss, which
        the next ``set`` overwrites, as ``MGET`` reads it)."""
        try:
            value: Any = await self._call(lambda: self.client.get(key))
        except RedisRefusedError as exc:
            if exc.code != "WRONGTYPE":
                raise
            return None
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
        """The tenant's index version (None when not an integer); a missing counter starts."""
        [version] = await self.index_versions([(tenant_id, collection)])
        return version

    async def index_versions(self, scopes: Sequence[tuple[str, str]]) -> list[int | None]:
        """The index version of each ``(tenant_id, collection)``, in order: one script call.

        A missing counter starts at the clock (a scope never ingested into, or a counter
        Redis lost: either way no entry can be under the new version); a value that is
        not an integer gives None (see ``ResultCache.index_versions``).
        """
        if not scopes:
            return []
        keys = [self._version_key(tenant_id, collection) for tenant_id, collection in scopes]
        raw: list[Any] = await self._call(lambda: self._read_versions(keys=keys), "version")
        return [_version(v) for v in raw]

    async def bump_index_version(self, tenant_id: str, collection: str) -> int:
        """Increment the tenant's index version; its old cache keys are never read again.

        A counter that is missing, or that ``INCR`` refuses (not an integer), starts
        again, atomically, at Redis's clock in microseconds: above every version handed
        out before, so no entry stored under an earlier version can be read again.
        """
        key = self._version_key(tenant_id, collection)
        version: Any = await self._call(lambda: self._bump_version(keys=[key]), "version")
        return int(version)

    def _pending_key(self, tenant_id: str, collection: str) -> str:
        return f"{self.prefix}:p:{tenant_id}:{collection}"

    async def mark_pending(self, tenant_id: str, collection: str, token: str) -> None:
        """Record ``token`` on the scope at Redis's clock (every replica's is the same)."""
        key = self._pending_key(tenant_id, collection)
        await self._call(lambda: self._mark(keys=[key], args=[token]), "pending")

    async def pending(self, tenant_id: str, collection: str) -> dict[str, float]:
        """Every token on the scope with its age by Redis's clock, in one script call."""
        key = self._pending_key(tenant_id, collection)
        flat: list[Any] = await self._call(lambda: self._read_pending(keys=[key]), "pending")
        names = [bytes(n).decode(errors="replace") for n in flat[::2]]
        return {name: float(age) for name, age in zip(names, flat[1::2], strict=True)}

    async def bump_clearing(self, tenant_id: str, collection: str, older_than_s: float) -> int:
        """Bump the scope's version and drop every token older than ``older_than_s``,
        atomically (``bump_index_version``'s rules for the counter)."""
        keys = [self._version_key(tenant_id, collection), self._pending_key(tenant_id, collection)]
        args = [repr(float(older_than_s))]
        version: Any = await self._call(lambda: self._bump_clear(keys=keys, args=args), "version")
        return int(version)

    async def clear_pending(self, tenant_id: str, collection: str, tokens: Sequence[str]) -> None:
        """Drop ``tokens`` from the scope."""
        key = self._pending_key(tenant_id, collection)
        await self._call(lambda: self._clear(keys=[key], args=list(tokens)), "pending")

    async def close(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()
