"""Recent results and reports the API keeps for waiting and polling callers, bounded by bytes,
and (:class:`SharedResults`) in Redis with a TTL, so a poll finds them on any replica.

Entries are keyed by (tenant, query id): one tenant's id never finds another
tenant's result. Each entry is kept as the encoded event (the bytes read from
Kafka), so its size is its encoded length and the bound is on real memory, not
on a count of entries whose size varies a hundredfold with ``k``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence

import redis.asyncio as aioredis
from redis.exceptions import RedisError

__all__ = ["RecentEvents", "SharedResults", "StoreKey"]

log = logging.getLogger(__name__)

#: (kind, tenant, query id); kind is "result" or "report"
StoreKey = tuple[str, str, str]
#: dict slot, key tuple and bytes header: what an entry costs beyond its payload
ENTRY_OVERHEAD_BYTES = 200
#: writes to Redis waiting at most: a few seconds of results at a busy API's rate
DEFAULT_MAX_PENDING_WRITES = 10_000


class RecentEvents:
    """An LRU of encoded events, at most ``max_bytes`` in total."""

    def __init__(self, max_bytes: int, on_evict: Callable[[], None] | None = None):
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._on_evict = on_evict
        self._entries: OrderedDict[StoreKey, bytes] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: StoreKey) -> bool:
        return key in self._entries

    def get(self, key: StoreKey) -> bytes | None:
        """The encoded event, or None."""
        return self._entries.get(key)

    def put(self, key: StoreKey, value: bytes) -> None:
        """Keep ``value`` (replacing any older one), evicting the oldest past the bound."""
        cost = len(value) + ENTRY_OVERHEAD_BYTES
        if cost > self.max_bytes:
            # larger than the whole store: keeping it would evict everything else
            if self._on_evict is not None:
                self._on_evict()
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= len(old) + ENTRY_OVERHEAD_BYTES
        self._entries[key] = value
        self.bytes += cost
        while self.bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.bytes -= len(evicted) + ENTRY_OVERHEAD_BYTES
            if self._on_evict is not None:
                self._on_evict()


class SharedResults:
    """Results and reports in Redis with a TTL: what any API replica answers a poll from.

    Every replica reads every result, so every replica writes it: the writes are
    idempotent ``SET … EX``. A write waits in a bounded queue for the writer task;
    when Redis is slow or down, writes past the bound are dropped and counted
    (the replica's own :class:`RecentEvents` still answers for its lifetime).

    Args:
        client: the Redis client.
        prefix: key prefix (``RAGSIFT_REDIS_KEY_PREFIX``).
        ttl_s: how long an entry lives, ``> 0``.
        max_pending: writes waiting at most; past it new writes are dropped.
        on_error: called once per write dropped or failed, and per failed read.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str,
        ttl_s: int,
        max_pending: int = DEFAULT_MAX_PENDING_WRITES,
        on_error: Callable[[], None] | None = None,
    ):
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0, got {ttl_s}")
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s
        self._pending: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue(maxsize=max_pending)
        self.on_error = on_error

    def key(self, key: StoreKey) -> str:
        """The Redis key of a (kind, tenant, query id)."""
        kind, tenant, query_id = key
        return f"{self.prefix}:api:{kind}:{tenant}:{query_id}"

    def put(self, key: StoreKey, value: bytes) -> None:
        """Queue a write (never waits; a full queue drops it, counted)."""
        try:
            self._pending.put_nowait((self.key(key), value))
        except asyncio.QueueFull:
            self._error()

    async def get(self, key: StoreKey) -> bytes | None:
        """The stored bytes, or None (absent, expired, or Redis unreachable: counted)."""
        return (await self.get_many([key]))[0]

    async def get_many(self, keys: Sequence[StoreKey]) -> list[bytes | None]:
        """Each key's stored bytes in order, None where absent or expired, in one round
        trip (``MGET``): a credential with many tenants is one read per poll, not one per
        tenant. Redis unreachable: all None, counted once."""
        if not keys:
            return []
        try:
            values = await self.client.mget([self.key(key) for key in keys])
        except (RedisError, OSError):
            self._error()
            return [None] * len(keys)
        return [value if isinstance(value, bytes) else None for value in values]

    async def flush(self) -> None:
        """Write everything queued now (the writer task's step; tests call it directly)."""
        while not self._pending.empty():
            name, value = self._pending.get_nowait()
            await self._write(name, value)

    async def run(self) -> None:
        """Write queued entries until cancelled."""
        while True:
            name, value = await self._pending.get()
            await self._write(name, value)

    async def _write(self, name: str, value: bytes) -> None:
        try:
            await self.client.set(name, value, ex=self.ttl_s)
        except (RedisError, OSError) as exc:
            log.warning("cannot store %s in Redis: %s", name, exc)
            self._error()

    def _error(self) -> None:
        if self.on_error is not None:
            self.on_error()

    async def close(self) -> None:
        """Close the Redis connection."""
        await self.client.aclose()
