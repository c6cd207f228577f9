"""The result cache's part of a pipeline batch: the key, the lookup, the store (K1-K3).

A query's key covers everything its result depends on: the query, its k,
mode, selection, task, thresholds and entities, the searched collections'
index versions, the embedder, the calibration version, the reranker and
corrective retrieval when on, and its tenant's thresholds. Cache trouble never
fails a query: it is counted and the cache is bypassed.
"""

from __future__ import annotations

from pydantic import ValidationError

from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import ResultCache, cache_key, ttl_for_status
from ragsift.retrieval.pending import Pending
from ragsift.retrieval.redis_replies import RedisRefusedError
from ragsift.retrieval.results import collections_of, result_id
from ragsift.retrieval.tenant_thresholds import TenantThresholdStore
from ragsift.schemas import CacheInfo, QueryEvent, RetrievalResult, utcnow
from ragsift.settings import CacheSettings, Settings

__all__ = ["CacheStage"]

#: What bypasses the cache: Redis down, or a command it refuses for good (a key's fault).
_TROUBLE = (ServiceUnavailableError, OSError, ConnectionError, RedisRefusedError)


class CacheStage:
    """Looks up and stores a batch's results in the result cache.

    Args:
        cache: the result cache, or None (caching off: every lookup misses, nothing is stored).
        settings: the key prefix, TTLs by status, and corrective retrieval's switch.
        metrics: hits, misses, corrupt entries, errors and writes are counted here.
        embedder_id: the query embedder's id (part of every key).
        reranker_id: the reranker's id when one is on, else None.
        tenant_thresholds: per-tenant TTLs and thresholds (A13), or None.
    """

    def __init__(
        self,
        cache: ResultCache | None,
        *,
        settings: Settings,
        metrics: Metrics,
        embedder_id: str,
        reranker_id: str | None,
        tenant_thresholds: TenantThresholdStore | None,
    ):
        self.cache = cache
        self.settings = settings
        self.metrics = metrics
        self.embedder_id = embedder_id
        self.reranker_id = reranker_id
        self.tenant_thresholds = tenant_thresholds

    async def lookup(
        self, pending: list[Pending]
    ) -> tuple[list[tuple[Pending, RetrievalResult]], list[Pending]]:
        """What the cache holds (each with its result, re-addressed), and the rest.

        Two round trips for the whole batch, and a third when anything was found (the
        hits' TTLs), not one per query; sets each query's key.
        """
        answered: list[tuple[Pending, RetrievalResult]] = []
        if self.cache is None or not pending:
            return answered, pending
        cache = self.cache
        scopes = list(
            dict.fromkeys((p.query.tenant_id, c) for p in pending for c in p.query.searched)
        )
        try:
            versions = dict(zip(scopes, await self._versions(cache, scopes), strict=True))
            keys = [
                self.key(p, *(versions[(p.query.tenant_id, c)] for c in p.query.searched))
                for p in pending
            ]
            for p, key in zip(pending, keys, strict=True):
                p.key = key
            found = await cache.get_many(keys)
        except _TROUBLE as exc:
            # Cache trouble never fails a query: count it and bypass the cache.
            self._count_trouble(exc, len(pending))
            return answered, pending
        rest = []
        hits: list[tuple[Pending, RetrievalResult, str]] = []
        for p, key, raw in zip(pending, keys, found, strict=True):
            if raw is None:
                self.metrics.cache.labels(cache.backend, "miss").inc()
                rest.append(p)
                continue
            cached = self._decode(raw, p.query)
            if cached is None:
                # Unreadable (older schema, garbage) or not this query's scope: a miss,
                # overwritten when this query's fresh result is stored.
                self.metrics.cache.labels(cache.backend, "corrupt").inc()
                rest.append(p)
                continue
            self.metrics.cache.labels(cache.backend, "hit").inc()
            hits.append((p, cached, key))
        if not hits:
            return answered, rest
        # What is left of each hit's TTL, for all of them in one more round trip.
        ttls: list[int | None] = [None] * len(hits)
        try:
            ttls = await cache.ttls([key for _, _, key in hits])
        except _TROUBLE as exc:
            self._count_trouble(exc, len(hits))
        for (p, cached, _), ttl in zip(hits, ttls, strict=True):
            answered.append((p, self.reuse(cached, p.query, hit=True, ttl=ttl)))
        return answered, rest

    async def _versions(self, cache: ResultCache, scopes: list[tuple[str, str]]) -> list[int]:
        """Each scope's index version; an unreadable counter is counted and reset, not raised."""
        versions = await cache.index_versions(scopes)
        out: list[int] = []
        for scope, version in zip(scopes, versions, strict=True):
            if version is None:
                self.metrics.cache.labels(cache.backend, "corrupt").inc()
                # A reset version has no entries yet: the scope's queries miss, then re-fill it.
                version = await cache.bump_index_version(*scope)
            out.append(version)
        return out

    @staticmethod
    def _decode(raw: bytes, query: QueryEvent) -> RetrievalResult | None:
        """The cached result, or None when it does not decode or is not this scope's."""
        try:
            cached = RetrievalResult.model_validate_json(raw)
        except ValidationError:
            return None
        scope = (cached.tenant_id, cached.collection, cached.collections)
        if scope != (query.tenant_id, query.collection, collections_of(query)):
            return None  # keys are tenant-scoped; never serve another tenant's entry anyway
        return cached

    def key(self, p: Pending, *versions: int) -> str:
        """The cache key; ``versions`` are the index versions of the searched collections."""
        q = p.query
        params: dict[str, object] = {
            "k": p.limit,
            "mode": q.mode,
            "selection": p.selection,
            "task": q.task_type,
            "threshold": q.similarity_threshold,
            "entities": sorted(q.entities),
            "vector": None if p.vector is None else hash(tuple(p.vector)),
        }
        if self.reranker_id is not None:  # only when on: keys of a reranker-free setup stay put
            params["reranker"] = self.reranker_id
            if p.orders_kept:  # ADR 048: the reranker orders the kept hits, nothing more
                params["rerank_use"] = "order-kept"
        # Added only when set, as above: keys of single-collection queries stay put.
        if q.collections:
            params["collections"] = [[c, v] for c, v in zip(q.searched, versions, strict=True)]
        if self.settings.corrective.enabled:  # only when on, as the reranker's
            params["corrective"] = self.settings.corrective.model_dump(mode="json")
        tenant = self._tenant_fingerprint(q.tenant_id)
        if tenant is not None:  # the tenant's thresholds changed: its entries are stale
            params["tenant_thresholds"] = tenant
        return cache_key(
            tenant_id=q.tenant_id,
            collection=q.collection,
            index_version=versions[0],
            query=q.query,
            params=params,
            embedder_id=self.embedder_id,
            calibration_version=p.calibration.version if p.calibration is not None else "none",
            prefix=self.settings.redis.key_prefix,
        )

    async def store(self, stored: list[tuple[Pending, RetrievalResult]]) -> None:
        """Cache the confident results of a batch in one round trip (K3: TTL by status)."""
        if self.cache is None:
            return
        items: list[tuple[str, bytes, int]] = []
        statuses: list[str] = []
        for p, result in stored:
            if p.key is None or result.outcome != "ok" or p.rerank_failed:
                continue  # a result scored without its reranker is not kept for later
            ttl = ttl_for_status(result.status, self.cache_settings(result.tenant_id))
            if ttl <= 0:
                continue
            copy = result.model_copy(update={"cache": CacheInfo(hit=False, ttl_seconds=ttl)})
            items.append((p.key, copy.model_dump_json().encode(), ttl))
            statuses.append(result.status)
        if not items:
            return
        try:
            await self.cache.set_many(items)
        except _TROUBLE as exc:
            self._count_trouble(exc, len(items))
            return
        for status in statuses:
            self.metrics.cache_writes.labels(self.cache.backend, status).inc()

    def _count_trouble(self, exc: Exception, n: int) -> None:
        backend = self.cache.backend if self.cache is not None else "none"
        self.metrics.cache.labels(backend, "error").inc(n)
        if isinstance(exc, RedisRefusedError):  # not an outage: counted apart
            self.metrics.redis_refused.labels(exc.store, exc.key_kind).inc()

    def _tenant_fingerprint(self, tenant_id: str) -> str | None:
        store = self.tenant_thresholds
        return store.fingerprint(tenant_id) if store is not None else None

    def cache_settings(self, tenant_id: str) -> CacheSettings:
        """The cache TTLs of a tenant's results (A13), the deployment's by default."""
        store = self.tenant_thresholds
        values = store.get(tenant_id) if store is not None else None
        base = self.settings.cache
        return values.cache_settings(base) if values is not None else base

    def reuse(
        self, result: RetrievalResult, query: QueryEvent, *, hit: bool, ttl: int | None = None
    ) -> RetrievalResult:
        """Another query's result, re-addressed to ``query`` (same content, its own ids)."""
        backend = self.cache.backend if self.cache is not None else None
        return result.model_copy(
            update={
                "result_id": result_id(query),
                "query_id": query.query_id,
                "query": query.query,
                "traceparent": query.traceparent,
                "timestamp": utcnow(),
                "cache": CacheInfo(
                    hit=hit,
                    ttl_seconds=ttl if ttl is not None else result.cache.ttl_seconds,
                    backend=backend,
                ),
                "timings_ms": {},
            }
        )
