"""When the indexer bumps a scope's index version (its cached results' key), and how it
knows that an event which changed nothing may leave it: marks written before each write.

A bump follows the write it covers (a bump first would let a query between the two
cache the old text under the new version), so an indexer that died between the two
left results cached under the old version, and the redelivery of its event finds
nothing left to change. Before it writes a scope, an indexer records a pending mark
on it in the cache (Redis: shared by every replica, it outlives the process), and
clears the mark once every write under it is bumped. An event that changes nothing
leaves the version alone only where no other indexer's mark is left on the scope; a
mark left by one that died forces a bump, and the bump that finds it older than any
live write can be (``STALE_S``) drops it (ADR 051).
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager

from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import ResultCache
from ragsift.retrieval.redis_replies import RedisRefusedError

__all__ = ["MAX_CALL_S", "REFRESH_S", "STALE_S", "IndexVersions"]

log = logging.getLogger(__name__)

#: A mark older than this (by the indexer's clock) is written again before the next
#: write under it, so a live indexer's mark never looks abandoned (``STALE_S``).
REFRESH_S = 60.0
#: The longest one handler call writes: the handler deadline is at most 3,600 s
#: (RAGSIFT_LIMITS_HANDLER_DEADLINE_S's bound; the indexer's own, MAX_DEADLINE_S, is
#: 600 s), and a call past it is cancelled. An indexer that cannot refresh a mark
#: older than this writes nothing under it.
MAX_CALL_S = 3_600.0
#: Another indexer's mark older than this is no live write's: the write it covers began
#: within MAX_CALL_S of the mark and ended within MAX_CALL_S of its start. A bump for
#: it drops it (a younger one stays, and the next no-op in the scope bumps again).
#: Three calls' length, not two: a margin for Redis's clock being stepped.
STALE_S = 3 * MAX_CALL_S

Scope = tuple[str, str]


class IndexVersions:
    """One indexer's bumps of ``(tenant, collection)`` index versions in ``cache``, and its
    pending marks there (the module docstring says why).

    Args:
        cache: where versions and marks are kept; None: no cache, nothing to bump.
        metrics: counts the bumps left out (``ragsift_index_version_bumps_skipped_total``).
        clock: seconds, monotonic (tests pass a fake).
    """

    def __init__(
        self,
        cache: ResultCache | None,
        metrics: Metrics | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.cache = cache
        self.metrics = metrics
        self._clock = clock
        #: names this indexer's marks (a new one per process: a restarted indexer's
        #: are another's, which is what tells it to bump for them)
        self.owner = uuid.uuid4().hex[:16]
        self._serial = itertools.count(1)
        #: scopes whose index changed but whose new version the cache has not taken
        self._owed: set[Scope] = set()
        #: this indexer's marks: scope -> (token, when it was last written, by _clock)
        self._marks: dict[Scope, tuple[str, float]] = {}

    @property
    def owed(self) -> frozenset[Scope]:
        """(tenant, collection) scopes whose index changed but whose new version the
        cache did not take (Redis was down): their cached results are stale until
        :meth:`settle` gets it in."""
        return frozenset(self._owed)

    @property
    def unsettled(self) -> bool:
        """True while a bump is owed or a mark of this indexer is left to clear."""
        return bool(self._owed or self._marks)

    async def prepare(self, scopes: Iterable[Scope]) -> None:
        """Mark each scope before a batch writes any of it; raises
        ``ServiceUnavailableError`` while the cache does not answer (nothing is written:
        the caller holds the batch)."""
        if self.cache is None:
            return
        for tenant_id, collection in sorted(set(scopes)):
            await self._mark(self.cache, (tenant_id, collection))

    @asynccontextmanager
    async def writing(self, tenant_id: str, collection: str) -> AsyncIterator[None]:
        """Around a write of the scope's index: the scope is marked first (a cache that
        does not take the mark raises ``ServiceUnavailableError``, nothing written), and
        a write that fails part way owes the scope a bump (:meth:`settle`)."""
        if self.cache is None:
            yield
            return
        await self._mark(self.cache, (tenant_id, collection))
        try:
            yield
        except BaseException:
            self._owed.add((tenant_id, collection))
            raise

    async def _mark(self, cache: ResultCache, scope: Scope) -> None:
        """Write this indexer's mark on ``scope``, unless it did less than REFRESH_S ago."""
        held, now = self._marks.get(scope), self._clock()
        if held is not None and now - held[1] < REFRESH_S:
            return
        token = held[0] if held is not None else f"{self.owner}:{next(self._serial)}"
        try:
            await cache.mark_pending(*scope, token)
        except ServiceUnavailableError:
            if held is None or now - held[1] >= MAX_CALL_S:
                raise
            log.warning("mark on %s/%s not refreshed; still within its bound", *scope)
            return
        self._marks[scope] = (token, now)

    async def settle(self) -> None:
        """Bump each scope in :attr:`owed`, then clear this indexer's marks; raise
        ``ServiceUnavailableError`` while a bump or a mark is left."""
        for tenant_id, collection in sorted(self._owed):
            await self.bump(tenant_id, collection)
        if self._owed:
            scopes = ", ".join("/".join(scope) for scope in sorted(self._owed))
            raise ServiceUnavailableError(f"index versions of {scopes} not bumped", service="cache")
        await self.release(strict=True)

    async def release(self, *, strict: bool = False) -> None:
        """Clear this indexer's marks on scopes that owe no bump (every write under them
        is bumped). A mark the cache does not clear stays: ``strict``, that raises
        ``ServiceUnavailableError``; else it costs another indexer one bump, no more."""
        if self.cache is None:
            return
        for scope, (token, _) in sorted(self._marks.items()):
            if scope in self._owed:
                continue
            try:
                await self.cache.clear_pending(*scope, [token])
            except ServiceUnavailableError:
                if strict:
                    raise
                log.warning("pending mark on %s/%s not cleared", *scope)
                continue
            del self._marks[scope]

    async def bump_if(
        self, changed: bool, tenant_id: str, collection: str, reason: str
    ) -> int | None:
        """Bump the scope where an event ``changed`` what is indexed. Where it did not (a
        redelivery, a replay, a delete of nothing), bump only where another indexer's
        mark is left on the scope, or where the marks cannot be read; else count the
        bump skipped (``reason``)."""
        if self.cache is None:
            return None
        if changed:
            return await self.bump(tenant_id, collection)
        try:
            marks = await self.cache.pending(tenant_id, collection)
        except (ServiceUnavailableError, RedisRefusedError) as exc:
            log.warning("pending marks of %s/%s unread (%s): bumping", tenant_id, collection, exc)
            return await self.bump(tenant_id, collection)
        others = sorted(token for token in marks if not token.startswith(f"{self.owner}:"))
        if not others:
            self.skipped(reason)
            return None
        log.warning(
            "%s/%s: %d write(s) of another indexer may not be bumped (it stopped, or is"
            " writing now): bumping",
            tenant_id,
            collection,
            len(others),
        )
        return await self.bump(tenant_id, collection, clearing=True)

    def skipped(self, reason: str) -> None:
        """Count a bump left out because nothing indexed changed (``reason``)."""
        if self.metrics is not None and self.cache is not None:
            self.metrics.index_version_skips.labels(reason).inc()

    async def bump(self, tenant_id: str, collection: str, *, clearing: bool = False) -> int | None:
        """The scope's new index version (``clearing``: the scope's marks older than
        :data:`STALE_S` dropped with it); on a cache that does not answer, ``None`` and
        the scope is owed (a raise dead-lettered an event whose change was made, and its
        replay, finding it indexed, bumped nothing: stale results for a day)."""
        if self.cache is None:
            return None
        scope = (tenant_id, collection)
        self._owed.add(scope)
        try:
            if clearing:
                version = await self.cache.bump_clearing(tenant_id, collection, STALE_S)
            else:
                version = await self.cache.bump_index_version(tenant_id, collection)
        except ServiceUnavailableError as exc:
            log.warning("index version of %s/%s not bumped: %s", tenant_id, collection, exc)
            return None
        self._owed.discard(scope)
        return version
