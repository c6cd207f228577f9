"""Result caching: the cache protocol, cache keys, TTL by confidence, in-memory backend.

Key = hash of (tenant, collection, the tenant's index version, normalized query,
retrieval parameters, embedder id, calibration version). A change of what a
tenant has indexed bumps its index version, so stale entries are never read
again and simply expire; an event that changes nothing (a redelivery, a delete
of a document not indexed) leaves it, and the cache, alone
(``ragsift.ingest.versions``, which also keeps each scope's pending marks here: the
writes of an indexer not yet covered by a bump). TTL grows with confidence (K3): high results
live longest, no_relevant_context is not cached by default.
"""

from __future__ import annotations

import hashlib
import json
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ragsift.lru import Recent
from ragsift.settings import CacheSettings

__all__ = [
    "InMemoryCache",
    "ResultCache",
    "cache_key",
    "normalize_query",
    "ttl_for_status",
]


@runtime_checkable
class ResultCache(Protocol):
    """Where serialized retrieval results are kept, plus per-tenant index versions."""

    backend: str

    async def get(self, key: str) -> bytes | None:
        """The cached value, or None on a miss."""
        ...

    async def set(self, key: str, value: bytes, ttl_s: int) -> None:
        """Store ``value`` for ``ttl_s`` seconds (> 0)."""
        ...

    async def ttl(self, key: str) -> int | None:
        """Seconds left for ``key``, None when absent."""
        ...

    async def ttls(self, keys: Sequence[str]) -> list[int | None]:
        """Seconds left for each key, in order (None when absent), in one round trip."""
        ...

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The cached value of each key, in order (None on a miss), in one round trip."""
        ...

    async def set_many(self, items: Sequence[tuple[str, bytes, int]]) -> None:
        """Store each ``(key, value, ttl_s)`` (``ttl_s`` > 0), in one round trip."""
        ...

    async def index_version(self, tenant_id: str, collection: str) -> int | None:
        """The tenant's index version (None when unreadable).

        A version is never handed out twice for a scope, even after a shared store lost
        its counter: the in-memory cache starts at 0 and loses its entries with it; Redis
        starts (and restarts) a counter at its clock.
        """
        ...

    async def index_versions(self, scopes: Sequence[tuple[str, str]]) -> list[int | None]:
        """The index version of each ``(tenant_id, collection)``, in order, in one round trip.

        None marks a counter that is not an integer (corrupted, or written by something
        else): the caller must not read or write entries under it, and may reset it with
        :meth:`bump_index_version`.
        """
        ...

    async def bump_index_version(self, tenant_id: str, collection: str) -> int:
        """Increment and return the tenant's index version (invalidates its cache keys).

        An unreadable counter is reset to a version no earlier entry can carry.
        """
        ...

    async def mark_pending(self, tenant_id: str, collection: str, token: str) -> None:
        """Record (or refresh, with the time now) an indexer's ``token`` on the scope: it
        may write the scope's index before its next bump (``ragsift.ingest.versions``)."""
        ...

    async def pending(self, tenant_id: str, collection: str) -> dict[str, float]:
        """Every token recorded on the scope, with its age in seconds."""
        ...

    async def bump_clearing(self, tenant_id: str, collection: str, older_than_s: float) -> int:
        """:meth:`bump_index_version`, then drop every token on the scope older than
        ``older_than_s``, at once: the new version covers every write made under them."""
        ...

    async def clear_pending(self, tenant_id: str, collection: str, tokens: Sequence[str]) -> None:
        """Drop ``tokens`` from the scope (its writes under them are all bumped)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


def normalize_query(query: str) -> str:
    """Case-, width- and whitespace-insensitive form of a query for the cache key."""
    return " ".join(unicodedata.normalize("NFKC", query).casefold().split())


def cache_key(
    *,
    tenant_id: str,
    collection: str,
    index_version: int,
    query: str,
    params: Mapping[str, Any],
    embedder_id: str,
    calibration_version: str,
    prefix: str = "ragsift",
) -> str:
    """The cache key of a retrieval; tenant and collection stay readable for operators."""
    material = json.dumps(
        {
            "v": index_version,
            "q": normalize_query(query),
            "p": dict(sorted(params.items())),
            "e": embedder_id,
            "c": calibration_version,
        },
        sort_keys=True,
        default=str,
    )
    digest = hashlib.blake2b(material.encode("utf-8"), digest_size=16).hexdigest()
    return f"{prefix}:r:{tenant_id}:{collection}:{digest}"


def ttl_for_status(status: str, settings: CacheSettings) -> int:
    """Seconds to cache a result of this A4 status; 0 means do not cache."""
    return {
        "high_confidence": settings.ttl_high_s,
        "medium_confidence": settings.ttl_medium_s,
        "low_confidence": settings.ttl_low_s,
        "no_relevant_context": settings.ttl_none_s,
    }.get(status, 0)


class InMemoryCache:
    """A bounded LRU cache with per-entry expiry: the embedded runtime's backend.

    Args:
        max_entries: least recently used entries are evicted past this size.
        clock: seconds source (monotonic by default; tests pass a fake).
    """

    backend = "memory"

    def __init__(self, max_entries: int = 100_000, clock: Callable[[], float] = time.monotonic):
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self._clock = clock
        self._data: Recent[str, tuple[float, bytes]] = Recent(max_entries)
        self._versions: dict[tuple[str, str], int] = {}
        #: indexers' pending tokens by scope, with when each was recorded (clock)
        self._pending: dict[tuple[str, str], dict[str, float]] = {}

    async def get(self, key: str) -> bytes | None:
        """The cached value, or None when absent or expired."""
        item = self._data.get(key)
        if item is None:
            return None
        expires, value = item
        if expires <= self._clock():
            self._data.pop(key)
            return None
        return value

    async def set(self, key: str, value: bytes, ttl_s: int) -> None:
        """Store ``value`` for ``ttl_s`` seconds; non-positive TTLs store nothing."""
        if ttl_s <= 0:
            return
        self._data.put(key, (self._clock() + ttl_s, value))

    async def ttl(self, key: str) -> int | None:
        """Whole seconds left for ``key``, None when absent or expired."""
        item = self._data.peek(key)  # asking how long is left is not a use
        if item is None:
            return None
        left = item[0] - self._clock()
        return int(left) if left > 0 else None

    async def ttls(self, keys: Sequence[str]) -> list[int | None]:
        """Whole seconds left for each key, in order (None when absent or expired)."""
        return [await self.ttl(key) for key in keys]

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The value of each key, in order (None when absent or expired)."""
        return [await self.get(key) for key in keys]

    async def set_many(self, items: Sequence[tuple[str, bytes, int]]) -> None:
        """Store each ``(key, value, ttl_s)``; non-positive TTLs store nothing."""
        for key, value, ttl_s in items:
            await self.set(key, value, ttl_s)

    async def index_version(self, tenant_id: str, collection: str) -> int | None:
        """The tenant's index version (0 before any ingestion)."""
        return self._versions.get((tenant_id, collection), 0)

    async def index_versions(self, scopes: Sequence[tuple[str, str]]) -> list[int | None]:
        """The index version of each ``(tenant_id, collection)``, in order."""
        return [self._versions.get(scope, 0) for scope in scopes]

    async def bump_index_version(self, tenant_id: str, collection: str) -> int:
        """Increment the tenant's index version; its old keys can no longer be hit."""
        version = self._versions.get((tenant_id, collection), 0) + 1
        self._versions[(tenant_id, collection)] = version
        return version

    async def mark_pending(self, tenant_id: str, collection: str, token: str) -> None:
        """Record ``token`` on the scope now (in memory: it goes with the entries)."""
        self._pending.setdefault((tenant_id, collection), {})[token] = self._clock()

    async def pending(self, tenant_id: str, collection: str) -> dict[str, float]:
        """Every token recorded on the scope, with its age in seconds."""
        now = self._clock()
        return {t: now - at for t, at in self._pending.get((tenant_id, collection), {}).items()}

    async def bump_clearing(self, tenant_id: str, collection: str, older_than_s: float) -> int:
        """Bump the scope's version, then drop every token older than ``older_than_s``."""
        version = await self.bump_index_version(tenant_id, collection)
        ages = await self.pending(tenant_id, collection)
        old = [token for token, age in ages.items() if age > older_than_s]
        await self.clear_pending(tenant_id, collection, old)
        return version

    async def clear_pending(self, tenant_id: str, collection: str, tokens: Sequence[str]) -> None:
        """Drop ``tokens`` from the scope."""
        marks = self._pending.get((tenant_id, collection), {})
        for token in tokens:
            marks.pop(token, None)
        if not marks:
            self._pending.pop((tenant_id, collection), None)

    async def close(self) -> None:
        """Nothing to release."""

    def __len__(self) -> int:
        return len(self._data)
