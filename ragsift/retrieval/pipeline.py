"""RetrievalPipeline: cache → embed → search → rerank → confidence → result + evidence.

One batch in, one outcome per query out: a :class:`PipelineOutput` (the result
and its evidence events) or the exception that makes the query bad input (the
runtime dead-letters it). Backend failures do not raise: after bounded retries
the query gets a result with outcome ``error`` and RAG_RETRIEVAL_FAILED
evidence, so nothing is ever silently empty. A reranker failure is milder: the
query is scored without reranker scores, and its result says so.

**Why one module.** What is left here is one batch's sequence of steps
(admission, bypass, single flight, embed, search with retries, rerank, read,
corrective retry, scoring, finishing), each acting on the same pending queries
and the same outcome slots; split apart, every step would take the pipeline's
state as arguments. The parts that stand on their own are elsewhere: the
result cache (:mod:`.pipeline_cache`), a query's state (:mod:`.pending`), the
engine's input from hits (:mod:`.hit_scores`), corrective retrieval's rules
(:mod:`.corrective`), the rerank stage and the results' shape (:mod:`.results`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from ragsift.confidence import (
    TASK_STRATEGIES,
    Assessment,
    CalibrationArtifact,
    strategy_for,
)
from ragsift.confidence.drift import DriftMonitor
from ragsift.confidence.mix_monitor import MixMonitor
from ragsift.confidence.policy import AnswerPolicy, apply_policy
from ragsift.confidence.served import ServedBars
from ragsift.errors import InvalidEventError, RagsiftError, ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import ResultCache
from ragsift.retrieval.contradictions import ContradictionDetector
from ragsift.retrieval.corrective import Corrector, Retry, Scored
from ragsift.retrieval.drift_watch import watch_drift
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.engines import EngineSet
from ragsift.retrieval.errors import (
    CollectionNotFoundError,
    EmbedderMismatchError,
    missing_collection,
    no_documents,
)
from ragsift.retrieval.hit_scores import hit_scores, prefetch_limit, unknown_collection
from ragsift.retrieval.index import DenseCut, SearchHit, SearchRequest, VectorIndex
from ragsift.retrieval.intents import classify_intent
from ragsift.retrieval.language_hint import with_language_advice
from ragsift.retrieval.mix_watch import (
    MixBar,
    mix_policy,
    mix_refusal,
    observe_reused,
    own_bar_refusal,
)
from ragsift.retrieval.pending import Pending
from ragsift.retrieval.pipeline_cache import CacheStage
from ragsift.retrieval.reader import Reader, ReaderItem
from ragsift.retrieval.rerank import Reranker, RerankStage
from ragsift.retrieval.results import (
    bypass_result,
    error_result,
    evidence_for,
    ordered_by_reranker,
    scored_result,
    uncertified_advice,
)
from ragsift.retrieval.tenant_thresholds import TenantThresholdStore
from ragsift.schemas import (
    Advice,
    EvidenceEvent,
    QueryEvent,
    RetrievalResult,
    SearchMode,
    Selection,
)
from ragsift.settings import Settings

__all__ = ["PipelineOutput", "RetrievalPipeline"]

GREETING_REPLY = "Hello! Ask me a question about the documents I have indexed."
RETRY_BASE_S = 0.05  # first backoff; doubles per attempt (0.05, 0.1, 0.2 ...)
FAILED_DISCLAIMER = (
    "Retrieval failed, so no document context is available; an answer would be"
    " based on current data only."
)
# Failures that are the backend's, not the query's: retried, then an ``error`` result.
_TRANSIENT = (ServiceUnavailableError, OSError, ConnectionError, TimeoutError)
RERANKER_UNAVAILABLE = Advice(
    code="reranker_unavailable",
    message="The reranker failed for this query; hits were ranked and scored without it.",
)


@dataclass(frozen=True, slots=True)
class PipelineOutput:
    """What one query produced: its result and the evidence to audit."""

    result: RetrievalResult
    evidence: list[EvidenceEvent] = field(default_factory=list)


# A query that got hits: its position in the batch's results, the query, its hits.
_Found = tuple[int, Pending, list[SearchHit]]


def _merge_order(hit: SearchHit) -> tuple[float, int, float, str]:
    """D3's merge order (ADR 050): the ranking score; a collection's own order among its
    ties; between collections, the higher cosine (one embedder: it compares across them;
    every collection's top hit ties under RRF), then the collection's name."""
    cosine = hit.dense_score if hit.dense_score is not None else float("-inf")
    return (-hit.score, hit.rank, -cosine, hit.collection or "")


class RetrievalPipeline:
    """Turns query events into scored, filtered results.

    Args:
        index: the vector index (Qdrant Edge or server).
        embedder: embeds query text; its id must match the collection's.
        engines: confidence engines built for this embedder.
        settings: limits, cache TTLs, retries.
        metrics: where everything is counted.
        cache: result cache, or None to disable caching.
        source: CloudEvents ``source`` of the evidence this pipeline emits.
        reranker: cross-encoder for each query's top ``settings.reranker.candidates``
            hits, or None (the default) to rank by retrieval scores alone.
        reader: scores the final hits against their query (sentence match, term
            coverage) for the calibrated scorer; None (the default) reads nothing.
        tenant_thresholds: per-tenant levels, answer threshold and TTLs (A13); by
            default read from ``settings.guardrails.tenant_thresholds_path`` when set.
        drift: watches each scope's top-hit scores against its calibration's reference
            and flags results of a shifted scope; None (the default) watches nothing.
        mix: estimates each scope's share of unanswerable queries, which raises its
            answer threshold (``RAGSIFT_CONFIDENCE_UNANSWERABLE_SHARE=auto``); None
            (the default) estimates nothing (a declared share still applies).
    """

    def __init__(
        self,
        *,
        index: VectorIndex,
        embedder: Embedder,
        engines: EngineSet,
        settings: Settings,
        metrics: Metrics,
        cache: ResultCache | None = None,
        source: str = "/ragsift/retrieval",
        reranker: Reranker | None = None,
        reader: Reader | None = None,
        tenant_thresholds: TenantThresholdStore | None = None,
        drift: DriftMonitor | None = None,
        mix: MixMonitor | None = None,
    ):
        if engines.embedder_id != embedder.embedder_id:
            raise InvalidEventError(
                f"engines were built for embedder {engines.embedder_id!r}, but the pipeline"
                f" embeds with {embedder.embedder_id!r}"
            )
        self.index = index
        self.embedder = embedder
        self.engines = engines
        if engines.registry is not None:
            engines.registry.on_fallback = lambda reason: metrics.calibration_fallbacks.labels(
                reason
            ).inc()
        self.settings = settings
        self.metrics = metrics
        self.source = source
        self.rerank = (
            RerankStage(reranker, candidates=settings.reranker.candidates, metrics=metrics)
            if reranker is not None
            else None
        )
        self.reader = reader
        guard = settings.guardrails
        if tenant_thresholds is None and guard.tenant_thresholds_path is not None:
            tenant_thresholds = TenantThresholdStore(
                guard.tenant_thresholds_path,
                engines.base.levels,
                poll_interval_s=guard.tenant_thresholds_poll_s,
                metrics=metrics,
            )
        self.contradictions = (
            ContradictionDetector.from_settings(settings.contradictions)
            if settings.contradictions.enabled
            else None
        )
        self.drift = drift
        if drift is not None:
            drift.on_evict = metrics.scope_evictions.labels("drift").inc
        self.mix = mix
        if mix is not None:
            mix.on_evict = metrics.scope_evictions.labels("mix").inc
        self._served = ServedBars()  # the scopes' mix bars, while their readings stay
        self.cached = CacheStage(
            cache if settings.cache.enabled else None,
            settings=settings,
            metrics=metrics,
            embedder_id=embedder.embedder_id,
            reranker_id=self.rerank.reranker.reranker_id if self.rerank is not None else None,
            tenant_thresholds=tenant_thresholds,
        )
        self._inflight: dict[str, asyncio.Future[RetrievalResult]] = {}
        # Collections seen to exist; greetings are checked against it before any metric.
        self._known_collections: set[str] = set()

    @property
    def cache(self) -> ResultCache | None:
        """The result cache, or None when caching is off (held by the cache stage)."""
        return self.cached.cache

    @property
    def tenant_thresholds(self) -> TenantThresholdStore | None:
        """Per-tenant levels, answer threshold and TTLs (A13), or None.

        Held by the cache stage, which keys and ages entries by it: one store for both.
        """
        return self.cached.tenant_thresholds

    @tenant_thresholds.setter
    def tenant_thresholds(self, store: TenantThresholdStore | None) -> None:
        self.cached.tenant_thresholds = store

    async def process(self, queries: Sequence[QueryEvent]) -> list[PipelineOutput | Exception]:
        """One outcome per query, in order."""
        started = time.perf_counter()
        if self.tenant_thresholds is not None:
            self.tenant_thresholds.poll()  # cheap: a clock read, a stat per poll interval
        out: list[PipelineOutput | Exception | None] = [None] * len(queries)
        pending: list[Pending] = []
        for i, query in enumerate(queries):
            try:
                pending.append(self._admit(i, query))
            except RagsiftError as exc:
                out[i] = exc
        pending = await self._bypass(pending, out)
        answered, pending = await self.cached.lookup(pending)
        reused = list(answered)  # results served again, counted in their scopes' mix
        for p, cached in answered:
            out[p.position] = self._finish(p.query, cached)
        # Single flight: one search per distinct key, in this batch and across batches.
        leaders: list[Pending] = []
        followers: list[tuple[Pending, asyncio.Future[RetrievalResult]]] = []
        owned: dict[str, asyncio.Future[RetrievalResult]] = {}
        for p in pending:
            fut = self._inflight.get(p.key) if p.key else None
            if fut is None and p.key in owned:
                fut = owned[p.key]
            if fut is not None:
                followers.append((p, fut))
                continue
            if p.key:
                owned[p.key] = self._inflight[p.key] = asyncio.get_running_loop().create_future()
            leaders.append(p)
        try:
            results = await self._correct(leaders, await self._retrieve(leaders))
            done: list[tuple[Pending, RetrievalResult]] = []
            for p, result in zip(leaders, results, strict=True):
                fut = owned.get(p.key) if p.key else None
                if isinstance(result, Exception):
                    out[p.position] = result
                    if fut is not None and not fut.done():
                        fut.set_exception(result)
                        fut.exception()  # retrieved here; followers get it from await
                    continue
                out[p.position] = self._finish(p.query, result)
                if fut is not None and not fut.done():
                    fut.set_result(result)
                done.append((p, result))
            await self.cached.store(done)
        except BaseException as exc:
            for fut in owned.values():
                if not fut.done():
                    fut.set_exception(exc)
                    fut.exception()  # mark retrieved: followers re-raise it themselves
            raise
        finally:
            for key in owned:
                self._inflight.pop(key, None)
        for p, fut in followers:
            try:
                shared = await fut
            except RagsiftError as exc:
                out[p.position] = exc
                continue
            reused.append((p, shared))
            out[p.position] = self._finish(p.query, self.cached.reuse(shared, p.query, hit=True))
        self._count_reused(reused)
        self.metrics.stage_seconds.labels("pipeline").observe(time.perf_counter() - started)
        return [o if o is not None else RuntimeError("query produced no outcome") for o in out]

    async def close(self) -> None:
        """Release the reranker's connections (the index and cache belong to the caller)."""
        if self.rerank is not None:
            await self.rerank.reranker.close()

    # -- admission ---------------------------------------------------------------------------

    def _admit(self, position: int, query: QueryEvent) -> Pending:
        limits = self.settings.limits
        if len(query.query) > limits.max_query_chars:
            raise InvalidEventError(
                f"query is {len(query.query)} characters; the limit is {limits.max_query_chars}",
                query_id=query.query_id,
            )
        if query.k is not None and query.k > limits.max_k:
            raise InvalidEventError(
                f"k must be <= {limits.max_k}, got {query.k}", query_id=query.query_id
            )
        vector = None
        if query.vector is not None:
            if query.embedder_id != self.embedder.embedder_id:
                raise EmbedderMismatchError(
                    expected=self.embedder.embedder_id,
                    actual=str(query.embedder_id),
                    collection=query.collection,
                )
            if len(query.vector) != self.embedder.dim:
                raise InvalidEventError(
                    f"vector dimension must be {self.embedder.dim} for embedder"
                    f" {self.embedder.embedder_id!r}, got {len(query.vector)}",
                    query_id=query.query_id,
                )
            vector = list(query.vector)
        task = query.task_type
        if task is not None and task not in TASK_STRATEGIES:
            raise InvalidEventError(
                f"unknown task_type {task!r}; known tasks: {', '.join(sorted(TASK_STRATEGIES))}",
                query_id=query.query_id,
            )
        # A task names an adaptive strategy (E2): it implies adaptive selection.
        selection: Selection = query.selection or ("adaptive" if task else "threshold")
        limit = query.k or self.settings.confidence.default_k
        if not self.settings.guardrails.strict_mode:
            # D8 rollback: no filtering; every hit the search returns is kept.
            selection = "top_k"
        elif selection == "adaptive":
            limit = max(limit, strategy_for(task).max_k)
        calibration = self.engines.calibration_for(query.tenant_id, query.collection)
        pending = Pending(position, query, selection, limit, vector=vector, calibration=calibration)
        pending.orders_kept = self._orders_kept(pending)
        return pending

    def _orders_kept(self, p: Pending) -> bool:
        """Whether the reranker only orders ``p``'s kept hits: a calibrated model scores
        it, on its retrieved hits, as without a reranker (ADR 048)."""
        return self.rerank is not None and self.engines.scores_calibrated(
            p.selection, p.query.mode, p.calibration
        )

    async def _bypass(
        self, pending: list[Pending], out: list[PipelineOutput | Exception | None]
    ) -> list[Pending]:
        rest = []
        for p in pending:
            intent = classify_intent(p.query.query)
            if intent == "search":
                rest.append(p)
                continue
            # A bypass skips the search that would have refused an unknown collection:
            # check it here, before the result is labelled or emitted anywhere.
            try:
                for collection in p.query.searched:
                    await self._check_collection(collection)
            except InvalidEventError as exc:
                out[p.position] = exc
                continue
            answer = GREETING_REPLY if intent == "greeting" else await self._scope(p.query)
            result = bypass_result(
                p.query, kind=intent, answer=answer, embedder_id=self.embedder.embedder_id
            )
            out[p.position] = self._finish(p.query, result)
        return rest

    async def _check_collection(self, collection: str) -> None:
        """Raise the unknown-collection error a search would raise, for queries that skip it."""
        if collection in self._known_collections:
            return
        try:
            await self.index.collection_info(collection)
        except CollectionNotFoundError as exc:
            raise unknown_collection(collection, exc) from exc
        self._known_collections.add(collection)

    async def _scope(self, query: QueryEvent) -> str:
        """D7: describe what the index holds for this tenant, from its metadata only."""
        try:
            info = await self.index.collection_info(query.collection)
        except CollectionNotFoundError:  # removed since the check: said as a search says it
            return f"I cannot answer anything yet: {missing_collection(query.collection)}."
        chunks = (info.tenants or {}).get(query.tenant_id, 0)
        if not chunks:  # in the words `ragsift ask` refuses such a tenant with
            return (
                f"I cannot answer anything yet: {no_documents(query.tenant_id, query.collection)}."
            )
        return (
            f"I can answer from {chunks} indexed passages in collection {query.collection!r}"
            f" (embedded with {info.embedder_id}). Ask about their content; I will say when"
            " they do not cover a question."
        )

    # -- retrieval -----------------------------------------------------------------------------

    async def _retrieve(self, batch: list[Pending]) -> list[RetrievalResult | Exception]:
        if not batch:
            return []
        t0 = time.perf_counter()
        try:
            await self._embed(batch)
        except (ServiceUnavailableError, OSError, ConnectionError, TimeoutError) as exc:
            return [self._failed(p.query, "embed", exc, 1) for p in batch]
        t_embed = time.perf_counter()
        # One batched search per collection; a D3 query is in the batch of each of its own.
        by_collection: dict[str, list[int]] = {}
        for i, p in enumerate(batch):
            for collection in p.query.searched:
                by_collection.setdefault(collection, []).append(i)
        found_in: list[dict[str, list[SearchHit] | Exception]] = [{} for _ in batch]
        for collection, idxs in by_collection.items():
            found = await self._search_collection(collection, [batch[i] for i in idxs])
            for i, hits in zip(idxs, found, strict=True):
                found_in[i][collection] = hits
        hits_per_query = [self._merge(p, found) for p, found in zip(batch, found_in, strict=True)]
        t_search = time.perf_counter()
        results: list[RetrievalResult | Exception | None] = []
        scorable: list[_Found] = []
        for p, hits in zip(batch, hits_per_query, strict=True):
            if isinstance(hits, InvalidEventError):
                results.append(hits)
                continue
            if isinstance(hits, Exception):
                retried = isinstance(hits, _TRANSIENT)
                attempts = self.settings.qdrant.max_retries + 1 if retried else 1
                results.append(self._failed(p.query, "search", hits, attempts))
                continue
            p.candidates = hits
            scorable.append((len(results), p, hits))
            results.append(None)
        scorable = await self._rerank(scorable)
        t_rerank = time.perf_counter()
        await self._read(scorable)
        t_read = time.perf_counter()
        rerank_s = t_rerank - t_search if self.rerank is not None else None
        for position, result in self._score(scorable, t_embed - t0, t_search - t_embed, rerank_s):
            results[position] = result
        self.metrics.stage_seconds.labels("embed").observe(t_embed - t0)
        self.metrics.stage_seconds.labels("search").observe(t_search - t_embed)
        self.metrics.stage_seconds.labels("score").observe(time.perf_counter() - t_read)
        await self._order_kept(scorable, results)  # observes its own stage, "rerank"
        return [r if r is not None else RuntimeError("query was not scored") for r in results]

    async def _correct(
        self, batch: list[Pending], results: list[RetrievalResult | Exception]
    ) -> list[RetrievalResult | Exception]:
        """B10: retry each weak or split result once, in one more batch; keep the winner.

        The retries are never corrected again: at most one retry per query.
        """
        planned: list[tuple[int, Corrector, Retry, Pending]] = []
        for i, (p, result) in enumerate(zip(batch, results, strict=True)):
            corrector = self._corrector(p.query.tenant_id)
            if corrector is None or isinstance(result, Exception) or result.outcome != "ok":
                continue
            first = Scored.of(result)
            retry = corrector.plan(p.query.query, p.query.mode, p.limit, p.candidates, first)
            if retry is not None:
                again = self._retry_pending(p, retry)
                again.orders_kept = self._orders_kept(again)  # a keyword retry's own model
                planned.append((i, corrector, retry, again))
        if not planned:
            return results
        retried = await self._retrieve([r for *_, r in planned])
        out = list(results)
        for (i, corrector, retry, _), second in zip(planned, retried, strict=True):
            first_result = out[i]
            assert isinstance(first_result, RetrievalResult)  # planned only for ok results
            resolved = corrector.resolve(first_result, second, retry)
            info = resolved.corrective
            won = "first" if info is None or info.won == "first" else "retry"
            self.metrics.corrective_retries.labels(retry.trigger, retry.strategy, won).inc()
            out[i] = resolved
        return out

    def _corrector(self, tenant_id: str) -> Corrector | None:
        """The tenant's corrective retrieval (A13 file over RAGSIFT_CORRECTIVE_*), or None."""
        store = self.tenant_thresholds
        values = store.get(tenant_id) if store is not None else None
        base = self.settings.corrective
        settings = values.corrective_settings(base) if values is not None else base
        if not settings.enabled:
            return None
        return Corrector(settings, max_k=self.settings.limits.max_k)

    @staticmethod
    def _retry_pending(p: Pending, retry: Retry) -> Pending:
        """The query as its retry searches it: its own ids, no cache key, fresh scores."""
        query = (
            p.query
            if retry.mode == p.query.mode
            else p.query.model_copy(update={"mode": retry.mode})
        )
        return dataclasses.replace(
            p,
            query=query,
            limit=max(p.limit, retry.limit),
            key=None,
            rerank_failed=False,
            reader=None,
            candidates=[],
            search_text=retry.text,
            retry=True,
        )

    async def _rerank(self, found: list[_Found]) -> list[_Found]:
        """Rerank every query's candidates in one call; a failure leaves a query unreranked."""
        window = [item for item in found if not item[1].orders_kept]
        if self.rerank is None or not window:
            return found
        outcomes = await self.rerank.apply(
            [(p.query.query, hits, p.limit) for _, p, hits in window]
        )
        reranked: dict[int, list[SearchHit]] = {}
        for (position, p, _), outcome in zip(window, outcomes, strict=True):
            p.rerank_failed = outcome.error is not None
            reranked[position] = outcome.hits
        return [(position, p, reranked.get(position, hits)) for position, p, hits in found]

    async def _order_kept(
        self, found: list[_Found], results: list[RetrievalResult | Exception | None]
    ) -> None:
        """ADR 048: the reranker orders the kept hits of the queries a calibrated model
        scored, in one call for the batch; their confidence and kept set stay as scored.
        A failure leaves a query in the retriever's order, with the advice that says so."""
        if self.rerank is None:
            return
        todo = [
            (position, p, result)
            for position, p, _ in found
            if p.orders_kept
            and isinstance(result := results[position], RetrievalResult)
            and result.outcome == "ok"
            and len(result.hits) > 1
        ]
        if not todo:
            return
        started = time.perf_counter()
        scored = await self.rerank.score(
            [(p.query.query, [h.text for h in result.hits]) for _, p, result in todo]
        )
        rerank_ms = round((time.perf_counter() - started) * 1000, 3)  # the batch's one call
        for (position, p, result), scores in zip(todo, scored, strict=True):
            timings = {**result.timings_ms, "rerank": rerank_ms}
            if isinstance(scores, Exception):
                p.rerank_failed = True
                advice = [*result.recommendations, RERANKER_UNAVAILABLE]
                update = {"recommendations": advice, "timings_ms": timings}
                results[position] = result.model_copy(update=update)
                continue
            ordered = ordered_by_reranker(result, scores)
            results[position] = ordered.model_copy(update={"timings_ms": timings})

    async def _read(self, found: list[_Found]) -> None:
        """Reader scores for every query's final hits, in one embedder call.

        A failure leaves the batch unread: its reader signals are imputed (as for a
        query without them), and each query is counted under stage ``read``.
        """
        # Keyword and reranked queries are scored by the weighted scorer: nothing to read.
        todo = [
            (p, hits)
            for _, p, hits in found
            if hits and p.query.mode != "keyword" and hits[0].rerank_score is None
        ]
        if self.reader is None or not todo:
            return
        t0 = time.perf_counter()
        covers = self.reader.encoder is not None  # term sets are read only for coverage
        items = [
            ReaderItem(
                p.query.query,
                p.vector,
                [h.text for h in hits],
                [h.indexed_terms() for h in hits] if covers else (),
            )
            for p, hits in todo
        ]
        try:
            scores = await self.reader.score(items)
        except _TRANSIENT:
            self.metrics.retrieval_errors.labels("read").inc(len(todo))
            return
        for (p, _), read in zip(todo, scores, strict=True):
            p.reader = read
        self.metrics.stage_seconds.labels("read").observe(time.perf_counter() - t0)

    async def _embed(self, batch: list[Pending]) -> None:
        todo = [p for p in batch if p.vector is None and p.query.mode != "keyword"]
        if not todo:
            return
        vectors = await self.embedder.embed([p.query.query for p in todo])
        for p, vec in zip(todo, vectors, strict=True):
            p.vector = vec.tolist()

    async def _search_collection(
        self, collection: str, batch: list[Pending]
    ) -> list[list[SearchHit] | Exception]:
        """One collection's searches; a request that cannot be built fails only its query."""
        requests: list[SearchRequest | Exception] = []
        for p in batch:
            try:
                requests.append(self._request(p))
            except ValueError as exc:
                requests.append(
                    InvalidEventError(str(exc), stage="search", query_id=p.query.query_id)
                )
        valid = [r for r in requests if isinstance(r, SearchRequest)]
        found = iter(await self._search_isolated(collection, valid))
        return [r if isinstance(r, Exception) else next(found) for r in requests]

    def _merge(
        self, p: Pending, found: dict[str, list[SearchHit] | Exception]
    ) -> list[SearchHit] | Exception:
        """D3: one hit list from each searched collection's, best first, labelled.

        Collections share the embedder, so dense scores compare across them, and
        each collection's RRF and BM25 scores are on the same formula; the merged
        list is cut to the query's search limit. A collection that failed fails the
        query (the first error in ``searched`` order, which is not the listed order).
        """
        if len(found) == 1:
            return next(iter(found.values()))
        merged: list[SearchHit] = []
        for collection in p.query.searched:
            hits = found[collection]
            if isinstance(hits, Exception):
                return hits
            merged.extend(dataclasses.replace(h, collection=collection) for h in hits)
        merged = sorted(merged, key=_merge_order)[: self._search_limit(p)]
        return [dataclasses.replace(h, rank=rank) for rank, h in enumerate(merged, 1)]

    def _search_limit(self, p: Pending) -> int:
        # A reranker that picks k of a window (the weighted scorer) needs the window
        # searched; one that orders the kept hits (ADR 048) needs what the query keeps.
        if self.rerank is None or p.orders_kept:
            return p.limit
        return self.rerank.fetch_limit(p.limit)

    def _dense_cut(self, p: Pending) -> DenseCut | None:
        """E3: an adaptive hybrid query's dense step is cut adaptively before fusion."""
        if p.selection != "adaptive" or p.query.mode != "hybrid":
            return None
        params = strategy_for(p.query.task_type).apply(self.engines.base.adaptive)
        return DenseCut(params.floor, params.threshold, params.min_k, params.max_k)

    def _request(self, p: Pending) -> SearchRequest:
        limit = self._search_limit(p)
        return SearchRequest(
            tenant_id=p.query.tenant_id,
            query=p.search_text or p.query.query,
            dense_vector=p.vector,
            mode=p.query.mode,
            limit=limit,
            prefetch_limit=prefetch_limit(limit),
            embedder_id=self.embedder.embedder_id,
            dense_cut=self._dense_cut(p),
        )

    async def _search_isolated(
        self, collection: str, requests: list[SearchRequest]
    ) -> list[list[SearchHit] | Exception]:
        """One hit list or exception per request; one request's failure is its own.

        The batch goes to the engine in one call; when that call fails for a reason
        other than the backend or the collection (a hostile vector, an engine error
        on one query), each request is searched alone so only the guilty one fails.
        """
        if not requests:
            return []
        try:
            return list(await self._search_with_retries(collection, requests))
        except CollectionNotFoundError as exc:
            return [unknown_collection(collection, exc) for _ in requests]
        except _TRANSIENT as exc:
            return [exc for _ in requests]
        except ValueError as exc:  # the index refusing one request's input
            if len(requests) == 1:
                return [InvalidEventError(str(exc), stage="search")]
        except Exception as exc:  # an engine error: never let it fail the batch's other queries
            if len(requests) == 1:
                return [exc]
        alone: list[list[SearchHit] | Exception] = []
        for request in requests:
            alone.extend(await self._search_isolated(collection, [request]))
        return alone

    async def _search_with_retries(
        self, collection: str, requests: list[SearchRequest]
    ) -> list[list[SearchHit]]:
        """``search_batch`` with bounded retries on backend failures (which it re-raises)."""
        attempts = self.settings.qdrant.max_retries + 1
        for attempt in range(attempts):
            try:
                return list(await self.index.search_batch(collection, requests))
            except _TRANSIENT:
                if attempt + 1 == attempts:
                    raise
                await asyncio.sleep(RETRY_BASE_S * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _score(
        self, found: list[_Found], embed_s: float, search_s: float, rerank_s: float | None = None
    ) -> list[tuple[int, RetrievalResult]]:
        """Score the batch's hit lists, one engine call per engine (not one per query).

        ``assess_many`` returns exactly what ``assess`` would for each query; it only
        shares numpy's per-call overhead across the queries. A query's ``score`` timing
        is its share of its engine's call.
        """
        # Reranked and unreranked hit lists have different channels: separate engine calls.
        # ... and queries of differently calibrated scopes too.
        by_engine: dict[tuple[Selection, SearchMode, bool, str], list[_Found]] = {}
        for item in found:
            p, hits = item[1], item[2]
            reranked = bool(hits) and hits[0].rerank_score is not None
            version = p.calibration.version if p.calibration is not None else "none"
            by_engine.setdefault((p.selection, p.query.mode, reranked, version), []).append(item)
        out: list[tuple[int, RetrievalResult]] = []
        for (selection, mode, reranked, _), items in by_engine.items():
            t0 = time.perf_counter()
            assessments = self._assess_isolated(selection, mode, items, reranked=reranked)
            score_ms = round((time.perf_counter() - t0) * 1000 / len(items), 3)
            timings = {
                "embed": round(embed_s * 1000, 3),
                "search": round(search_s * 1000, 3),
                "score": score_ms,
            }
            if rerank_s is not None:  # the batch's one rerank call, as embed and search
                timings["rerank"] = round(rerank_s * 1000, 3)
            for (position, p, hits), assessment in zip(items, assessments, strict=True):
                if isinstance(assessment, Exception):
                    out.append((position, self._failed(p.query, "score", assessment, 1)))
                    continue
                own = self._policy(p.query)
                policy, mixed = self._mix_policy(own, assessment, p)
                mix_advice = None
                if not policy.is_neutral:
                    cfg = self.engines.engine(selection, mode, reranked=reranked).config
                    # The mix is named only where it decided: against the query's own bars
                    # (a collection's floor, a tenant's, D1's documents), not the engine's
                    # alone, or a floor's refusal read "refused by the mix" as it lowered.
                    engine, certified = assessment, apply_policy(assessment, cfg, own)
                    assessment = apply_policy(assessment, cfg, policy)
                    if mixed is not None:
                        mix_advice = mix_refusal(certified, assessment, mixed) or own_bar_refusal(
                            engine, certified, assessment
                        )
                try:
                    result = scored_result(
                        p.query,
                        hits,
                        assessment,
                        embedder_id=self.embedder.embedder_id,
                        selection=p.selection,
                        timings_ms=dict(timings),
                    )
                except ValidationError as exc:  # e.g. a non-finite score from hostile hits
                    result = self._failed(p.query, "score", exc, 1)
                    out.append((position, result))
                    continue
                extra = [RERANKER_UNAVAILABLE] if p.rerank_failed else []
                extra += [mix_advice] if mix_advice is not None else []
                marked = uncertified_advice(assessment, p.calibration)
                extra += [marked] if marked is not None else []
                if extra:
                    advice = [*result.recommendations, *extra]
                    result = result.model_copy(update={"recommendations": advice})
                if self.contradictions is not None:  # D7
                    result = self.contradictions.mark(result)
                out.append((position, result))
        return out

    def _assess_isolated(
        self, selection: Selection, mode: SearchMode, items: list[_Found], *, reranked: bool
    ) -> list[Assessment | Exception]:
        """One engine call for the group; if it fails, one call per query, so only the
        query that made it fail gets the error."""
        # Grouped by calibration version in _score: the first query's is every query's.
        engine = self.engines.engine(
            selection, mode, reranked=reranked, calibration=items[0][1].calibration
        )
        try:
            return list(
                engine.assess_many(
                    [hit_scores(hits, mode, p.query.entities, p.reader) for _, p, hits in items],
                    thresholds=[p.query.similarity_threshold for _, p, _ in items],
                    tasks=[p.query.task_type for _, p, _ in items]
                    if selection == "adaptive"
                    else None,
                    # E4 keeps the query's k (the search fetched exactly that many).
                    top_ks=[p.limit for _, p, _ in items] if selection == "top_k" else None,
                )
            )
        except Exception as exc:  # scoring math on hostile input; isolate it per query
            if len(items) == 1:
                return [exc]
        out: list[Assessment | Exception] = []
        for item in items:
            out.extend(self._assess_isolated(selection, mode, [item], reranked=reranked))
        return out

    def _mix_policy(
        self, policy: AnswerPolicy, assessment: Assessment, p: Pending
    ) -> tuple[AnswerPolicy, MixBar | None]:
        """``policy`` with the bar of the query's scope at its mix (ragsift/confidence/mix.py).

        A keyword-only query is read at its scope's mix with its own model's tables but
        never counted in it: the scope's histogram holds the hybrid model's confidences
        (ADR 029)."""
        keyword = p.query.mode == "keyword"
        return mix_policy(
            policy,
            assessment,
            p.query,
            self.engines.scored_with(self._calibration_of(p), p.query.mode),
            mode=self.settings.confidence.unanswerable_share,
            monitor=self.mix,
            metrics=self.metrics,
            counted=p.retry or keyword,
            near_miss=self.settings.confidence.near_miss == "auto",
            lower=self.settings.confidence.mix_lower == "auto",
            memo=self._served,
        )

    def _count_reused(self, reused: list[tuple[Pending, RetrievalResult]]) -> None:
        """Results served again are their scopes' traffic too (``observe_reused``)."""
        if not reused or self.mix is None or self.settings.confidence.unanswerable_share != "auto":
            return
        items = [(p.query, r, c) for p, r in reused if (c := self._calibration_of(p)) is not None]
        near_miss = self.settings.confidence.near_miss == "auto"
        observe_reused(self.mix, items, self.metrics, near_miss=near_miss)

    def _calibration_of(self, p: Pending) -> CalibrationArtifact | None:
        return p.calibration if p.calibration is not None else self.engines.calibration

    def _policy(self, query: QueryEvent) -> AnswerPolicy:
        """The bars of this query's result: its tenant's (A13); in strict mode also the
        strictest collection threshold (D9) and the guardrails' minimum documents (D1)."""
        store = self.tenant_thresholds
        policy = store.policy(query.tenant_id) if store is not None else AnswerPolicy()
        guard = self.settings.guardrails
        if not guard.strict_mode:
            return policy  # D8 rollback: no guardrail bars
        floor = guard.override_for_all(query.searched)
        if floor == policy.answer_floor and guard.min_documents == policy.min_documents:
            return policy  # the usual case: no collection threshold, D1's default (no copy)
        return dataclasses.replace(policy, answer_floor=floor, min_documents=guard.min_documents)

    def _failed(
        self, query: QueryEvent, stage: str, exc: Exception, attempts: int
    ) -> RetrievalResult:
        self.metrics.retrieval_errors.labels(stage).inc()
        return error_result(
            query,
            stage=stage,
            error=exc,
            attempts=attempts,
            embedder_id=self.embedder.embedder_id,
            disclaimer=FAILED_DISCLAIMER,
        )

    def _finish(self, query: QueryEvent, result: RetrievalResult) -> PipelineOutput:
        # Here, not in _score: a result served from the cache or to a follower says it too.
        if self.settings.confidence.language_checks == "on":
            result = with_language_advice(result, self.metrics)
        shift: EvidenceEvent | None = None
        if self.drift is not None and result.outcome == "ok":
            result, shift = watch_drift(self.drift, result, self.metrics, source=self.source)
        evidence = evidence_for(
            result,
            advisory_threshold=self.settings.confidence.advisory_threshold,
            source=self.source,
        )
        if shift is not None:
            evidence.append(shift)
        dropped: dict[str, int] = {}
        for d in result.dropped:
            dropped[d.rule] = dropped.get(d.rule, 0) + 1
        self.metrics.observe_result(
            result.tenant_id, result.status, result.confidence, result.outcome, dropped
        )
        for ev in evidence:
            self.metrics.evidence.labels(ev.type.value).inc()
        return PipelineOutput(result, evidence)
