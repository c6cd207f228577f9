"""When the indexer bumps a scope's index version (its cached results' key), and what
it still owes the cache: bumps that did not take while the cache was down."""

from __future__ import annotations

import logging

from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import ResultCache

__all__ = ["IndexVersions"]

log = logging.getLogger(__name__)


class IndexVersions:
    """One indexer's bumps of ``(tenant, collection)`` index versions in ``cache``.

    A bump follows the write it covers (a bump first would let a query between the
    two cache the old text under the new version). So an indexer that wrote and went
    down before its bump took (a crash, an outage) left results cached under the old
    version, and the redelivery of its event finds nothing left to change: a new
    indexer, which has no record of that, bumps each scope once before it trusts that
    an event changed nothing (:meth:`bump_if`).
    """

    def __init__(self, cache: ResultCache | None, metrics: Metrics | None = None):
        self.cache = cache
        self.metrics = metrics
        #: scopes whose new index version the cache has not taken (see ``owed``)
        self._owed: set[tuple[str, str]] = set()
        #: scopes this indexer has bumped since it started
        self._bumped: set[tuple[str, str]] = set()

    @property
    def owed(self) -> frozenset[tuple[str, str]]:
        """(tenant, collection) scopes whose index changed but whose new version the
        cache did not take (Redis was down): their cached results are stale until
        :meth:`settle` gets it in."""
        return frozenset(self._owed)

    async def settle(self) -> None:
        """Try once more to bump each scope in :attr:`owed`; raise
        ``ServiceUnavailableError`` while some still are."""
        for tenant_id, collection in sorted(self._owed):
            await self.bump(tenant_id, collection)
        if self._owed:
            scopes = ", ".join("/".join(scope) for scope in sorted(self._owed))
            raise ServiceUnavailableError(f"index versions of {scopes} not bumped", service="cache")

    async def bump_if(
        self, changed: bool, tenant_id: str, collection: str, reason: str
    ) -> int | None:
        """Bump the scope where an event ``changed`` what is indexed. Where it did not
        (a redelivery, a replay, a delete of nothing), bump only a scope this indexer
        has not bumped yet (see the class), else count the bump skipped (``reason``)."""
        if self.cache is None:
            return None
        if changed or (tenant_id, collection) not in self._bumped:
            return await self.bump(tenant_id, collection)
        self.skipped(reason)
        return None

    def skipped(self, reason: str) -> None:
        """Count a bump left out because nothing indexed changed (``reason``)."""
        if self.metrics is not None and self.cache is not None:
            self.metrics.index_version_skips.labels(reason).inc()

    async def bump(self, tenant_id: str, collection: str) -> int | None:
        """The scope's new index version; on a cache that does not answer, ``None``
        and the scope is owed (a raise dead-lettered an event whose change was made,
        and its replay, finding it indexed, bumped nothing: stale results for a day)."""
        if self.cache is None:
            return None
        scope = (tenant_id, collection)
        self._owed.add(scope)
        try:
            version = await self.cache.bump_index_version(tenant_id, collection)
        except ServiceUnavailableError as exc:
            log.warning("index version of %s/%s not bumped: %s", tenant_id, collection, exc)
            return None
        self._owed.discard(scope)
        self._bumped.add(scope)
        return version
