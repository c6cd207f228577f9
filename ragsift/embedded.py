"""The embedded runtime: the whole pipeline in one process, no servers (X5).

Qdrant Edge holds the vectors under the data directory, an in-memory TTL cache
stands in for Redis, the in-process bus drives the same handlers the Faust
workers run (retrieval, report, decision, audit), the audit trail goes to
``<data_dir>/audit/audit.jsonl`` and every answer is kept in
``<data_dir>/results.sqlite3`` for ``ragsift assess`` and the console (B5).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from ragsift.confidence.registry import CalibrationRegistry
from ragsift.errors import InvalidEventError
from ragsift.ingest.indexer import Indexer, IngestReport
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.feedback_store import SqliteFeedbackStore, unreadable_counter
from ragsift.retrieval.index import (
    ChunkRecord,
    CollectionInfo,
    SearchHit,
    SearchRequest,
    VectorIndex,
)
from ragsift.runtime_store import STORE_FILE, ResultStore, StoredAnswer
from ragsift.schemas import DeadLetter, Decision, QueryEvent, Report, RetrievalResult
from ragsift.settings import Settings
from ragsift.streams.bus import InProcessBus
from ragsift.wiring import (
    CALIBRATIONS_DIR,
    MIX_SAVE_INTERVAL_S,
    build_calibration_registry,
    build_calibration_store,
    build_embedder,
    build_index,
    build_metrics,
    build_mix_state,
    build_pipeline,
    build_report_handler,
    restore_mix,
    save_mix,
)
from ragsift.workers.audit import build_audit_handler
from ragsift.workers.calibration import FeedbackLoop, ResultJoinHandler
from ragsift.workers.decision import DecisionHandler
from ragsift.workers.retrieval import RetrievalHandler

__all__ = [
    "CALIBRATIONS_DIR",
    "MAX_ASSESS_CHUNKS",
    "EmbeddedRuntime",
    "Outcome",
    "embedded_feedback_loop",
]

#: what one query became: its answer, or the dead letter that rejected it
Outcome = StoredAnswer | DeadLetter
#: chunk ids ``assess_chunks`` scores at once (the wire contract's largest k)
MAX_ASSESS_CHUNKS = 100


@dataclass
class _Collected:
    """The outputs of one asked query, gathered from the bus as they are published."""

    result: RetrievalResult | None = None
    report: Report | None = None
    decision: Decision | None = None
    letters: list[DeadLetter] = field(default_factory=list)
    #: Set when the ask ends: another ask of the same query id waits for it.
    ended: asyncio.Event = field(default_factory=asyncio.Event)


#: The embedded runtime's labels and scored results (``ragsift feedback``), under the data dir.
FEEDBACK_DB = "feedback.sqlite"


def embedded_feedback_loop(
    settings: Settings,
    embedder_id: str,
    metrics: Metrics,
    registry: CalibrationRegistry | None = None,
) -> FeedbackLoop | None:
    """The feedback re-fit over files under the data dir; None without the calibrated scorer.

    ``registry`` is the one the query path reads (the runtime passes its pipeline's),
    so a re-fit is used from the next query on; without it one is built.
    """
    if settings.confidence.scorer != "calibrated":
        return None
    if registry is None:
        registry = build_calibration_registry(
            settings, embedder_id, Path(settings.data_dir) / CALIBRATIONS_DIR
        )
    db = Path(settings.data_dir) / FEEDBACK_DB
    store = SqliteFeedbackStore(db, on_unreadable=unreadable_counter(metrics))
    return FeedbackLoop(store, registry, settings.feedback, metrics)


log = logging.getLogger(__name__)


class EmbeddedRuntime:
    """Ingest and query in-process; use as ``async with EmbeddedRuntime(settings) as rt``."""

    def __init__(self, settings: Settings, *, metrics: Metrics | None = None, answers: bool = True):
        """``answers=False``: one that ingests, lists and probes opens no result or feedback
        store (``ingest`` refused to run on a damaged one, which it never reads)."""
        self.settings = settings
        self.data_dir = settings.data_dir
        self.metrics = metrics or build_metrics(settings)
        self.embedder = build_embedder(settings.embedder)
        self.index = build_index(settings.qdrant, settings.data_dir)
        self.cache = InMemoryCache(settings.cache.max_entries)
        #: Scoped calibrations (``ragsift calibrate --collection``), under the data dir
        #: unless RAGSIFT_CALIBRATION_STORE_DIR names another folder.
        self.calibration_store = build_calibration_store(
            settings, Path(self.data_dir) / CALIBRATIONS_DIR
        )
        self.pipeline = build_pipeline(
            settings,
            index=self.index,
            embedder=self.embedder,
            metrics=self.metrics,
            cache=self.cache,
            source="/ragsift/embedded/retrieval",
            calibration_store=self.calibration_store,
        )
        # Each `ragsift ask` is a process: the scopes' mix estimates carry over (ADR 013).
        self.mix_state = build_mix_state(
            settings, Path(self.data_dir) / CALIBRATIONS_DIR, metrics=self.metrics
        )
        restore_mix(self.pipeline, self.mix_state)
        self.indexer = Indexer(self.index, self.embedder, cache=self.cache, metrics=self.metrics)
        audit = build_audit_handler(settings.audit, Path(self.data_dir) / "audit", self.metrics)
        self.audit = audit.sink
        # Scored results are remembered so `ragsift feedback` can label them later.
        self.feedback: FeedbackLoop | None = None
        self._store: ResultStore | None = None
        if answers:
            self.feedback = embedded_feedback_loop(
                settings, self.embedder.embedder_id, self.metrics, self.pipeline.engines.registry
            )
            kept = Path(self.data_dir) / STORE_FILE
            self._store = ResultStore(kept, max_results=settings.runtime.store_max_results)
        join = [ResultJoinHandler(self.feedback)] if self.feedback is not None else []
        self.reports = build_report_handler(settings, self.metrics)
        self.bus = InProcessBus(
            [
                RetrievalHandler(self.pipeline),
                self.reports,
                DecisionHandler(
                    settings.guardrails, self.metrics, label_share=settings.feedback.sample_share
                ),
                audit,
                *join,
            ],
            metrics=self.metrics,
            batch_size=settings.limits.batch_size,
            prefix=settings.kafka.topic_prefix,
            deadline_s=settings.limits.handler_deadline_s,
            max_original_bytes=settings.limits.deadletter_max_original_bytes,
            recent_events=settings.runtime.bus_recent_events,
        )
        # query id -> outputs of a query being asked; only those ids are collected
        self._asking: dict[str, _Collected] = {}
        self.bus.subscribe(self._collect)

    @property
    def store(self) -> ResultStore:
        """The answers kept for ``assess`` and the console (none with answers=False)."""
        assert self._store is not None, "this runtime keeps no answers (answers=False)"
        return self._store

    async def __aenter__(self) -> EmbeddedRuntime:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def ingest(
        self,
        tenant_id: str,
        documents: Iterable[SourceDocument],
        *,
        collection: str = "default",
        progress: Callable[[int, int], None] | None = None,
    ) -> IngestReport:
        """Chunk, embed and index documents for a tenant; ``progress(done, total)``
        counts chunks written."""
        report = await self.indexer.ingest(tenant_id, collection, documents, progress=progress)
        optimize = getattr(self.index, "optimize", None)
        if callable(optimize):
            optimize(collection)
        return report

    async def prune(
        self, tenant_id: str, keep: Iterable[str], *, collection: str = "default"
    ) -> list[str]:
        """Delete the tenant's documents of ``collection`` whose ids are not in ``keep``;
        the ids deleted, sorted."""
        stale = set(await self.index.documents(collection, tenant_id)) - set(keep)
        await self.indexer.remove(tenant_id, collection, stale)
        return sorted(stale)

    async def ask(self, queries: Sequence[QueryEvent]) -> list[RetrievalResult | DeadLetter]:
        """Publish queries on the bus and return, per query, its result or dead letter."""
        return [o if isinstance(o, DeadLetter) else o.result for o in await self.answer(queries)]

    async def answer(self, queries: Sequence[QueryEvent]) -> list[Outcome]:
        """Run queries through every handler; per query its result, report and decision
        (kept in the result store), or the dead letter that rejected it."""
        ids = [q.query_id for q in queries]
        if len(set(ids)) != len(ids):
            raise InvalidEventError("query ids must be distinct within one call")
        # Outputs are told apart by query id alone (a dead letter names no tenant), so an
        # id being asked (a client's retry, or another tenant's query: ids are the
        # clients' own) waits for that ask to end instead of being refused. Refused, it
        # was a 422 for a valid query that told the caller another tenant used the id.
        while busy := [self._asking[i].ended for i in ids if i in self._asking]:
            await asyncio.gather(*(ended.wait() for ended in busy))
        collected = [_Collected() for _ in ids]
        self._asking.update(zip(ids, collected, strict=True))
        try:
            for q in queries:
                await self.bus.publish("queries", q.query_id, q)
            await self.bus.drain()
        finally:
            for query_id, got in zip(ids, collected, strict=True):
                del self._asking[query_id]
                got.ended.set()
        out: list[Outcome] = []
        for query_id, got in zip(ids, collected, strict=True):
            if got.result is not None:
                answer = StoredAnswer(got.result, got.report, got.decision)
                try:
                    self.store.put(answer)
                except sqlite3.Error as exc:  # locked by another process, read-only
                    # The answer stands; only looking it up later fails. It was a
                    # traceback after the whole query had run, the answer unseen.
                    log.warning(
                        "the answer to %s is not kept in %s (%s): assess and the console"
                        " will not find it",
                        query_id,
                        self.store.path,
                        exc,
                    )
                out.append(answer)
            elif got.letters:
                out.append(got.letters[0])
            else:
                raise RuntimeError(f"query {query_id} produced neither a result nor a dead letter")
        return out

    def find_answer(self, query_id: str, tenant_id: str | None = None) -> StoredAnswer | None:
        """A past query's result, report and decision, from the result store."""
        return self.store.get(query_id, tenant_id)

    def find_result(self, query_id: str, tenant_id: str | None = None) -> RetrievalResult | None:
        """A past query's result, from the result store."""
        found = self.store.get(query_id, tenant_id)
        return None if found is None else found.result

    async def assess_chunks(self, query: QueryEvent, chunk_ids: Sequence[str]) -> Outcome:
        """Score the given chunks (and only them) as the answer to ``query`` (B5).

        The query runs through the same pipeline with a search narrowed to those chunk
        ids of the query's tenant, so their scores, confidence, drops and advice are
        exactly what a retrieval that found them would give. Nothing is cached or stored.
        """
        wanted = sorted(set(chunk_ids))
        if not wanted or len(wanted) > MAX_ASSESS_CHUNKS:
            raise InvalidEventError(
                f"give between 1 and {MAX_ASSESS_CHUNKS} chunk ids, got {len(wanted)}"
            )
        pipeline = build_pipeline(
            self.settings.model_copy(
                update={"cache": self.settings.cache.model_copy(update={"enabled": False})}
            ),
            index=_OnlyChunks(self.index, wanted),
            embedder=self.embedder,
            metrics=self.metrics,
            source="/ragsift/embedded/assess",
        )
        try:
            [outcome] = await pipeline.process(
                [query.model_copy(update={"k": len(wanted), "selection": "top_k"})]
            )
        finally:
            await pipeline.close()
        if isinstance(outcome, Exception):
            raise outcome
        return StoredAnswer(outcome.result)

    def _collect(self, topic: str, event: BaseModel) -> None:
        query_id = getattr(event, "query_id", None)
        got = self._asking.get(query_id) if isinstance(query_id, str) else None
        if got is None:
            return
        if isinstance(event, RetrievalResult):
            got.result = event
        elif isinstance(event, Report):
            got.report = event
        elif isinstance(event, Decision):
            got.decision = event
        elif isinstance(event, DeadLetter) and event.worker == "retrieval":
            got.letters.append(event)

    def save_mix(self) -> int:
        """Save the scopes' mix estimates beside the calibrations; how many scopes."""
        return save_mix(self.pipeline, self.mix_state)

    async def keep_mix(self, interval_s: float = MIX_SAVE_INTERVAL_S) -> None:
        """Save the mix estimates every ``interval_s`` until cancelled (a long-running
        runtime, e.g. the console: a process killed outright loses at most that much)."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await asyncio.to_thread(self.save_mix)
            except Exception:  # the console keeps serving; close saves once more
                log.exception("saving the mix estimates failed")

    async def close(self) -> None:
        """Flush and close the index, the handlers and the result store."""
        await self.bus.close()
        self.save_mix()
        await self.pipeline.close()
        await self.index.close()
        if self._store is not None:
            self._store.close()
        if self.feedback is not None:
            # its SQLite file is left whole (no -wal beside it) for a copy or a backup
            self.feedback.store.close()


class _OnlyChunks:
    """A read-only view of an index whose searches only see the given chunk ids."""

    def __init__(self, index: VectorIndex, chunk_ids: list[str]):
        self._index = index
        self._chunk_ids = chunk_ids

    def _narrow(self, request: SearchRequest) -> SearchRequest:
        return replace(request, filter={**(request.filter or {}), "chunk_id": self._chunk_ids})

    async def ensure_collection(self, name: str, dim: int, embedder_id: str) -> CollectionInfo:
        """Not offered: assessing never creates a collection."""
        raise InvalidEventError("assessing chunks never creates a collection")

    async def upsert(self, collection: str, records: Sequence[ChunkRecord]) -> int:
        """Not offered: assessing never writes."""
        raise InvalidEventError("assessing chunks never writes to the index")

    async def delete(self, collection: str, tenant_id: str, doc_id: str) -> int:
        """Not offered: assessing never writes."""
        raise InvalidEventError("assessing chunks never writes to the index")

    async def documents(self, collection: str, tenant_id: str) -> dict[str, int]:
        """Not offered: assessing reads the given chunks, not the collection's list."""
        raise InvalidEventError("assessing chunks never lists the collection's documents")

    async def chunk_payloads(
        self, collection: str, tenant_id: str, chunk_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        """Not offered: assessing searches the given chunks, it does not read them."""
        raise InvalidEventError("assessing chunks never reads stored chunks")

    async def search(self, collection: str, request: SearchRequest) -> list[SearchHit]:
        """Search among the given chunks only."""
        return await self._index.search(collection, self._narrow(request))

    async def search_batch(
        self, collection: str, requests: Sequence[SearchRequest]
    ) -> list[list[SearchHit]]:
        """Search among the given chunks only, per request."""
        return await self._index.search_batch(collection, [self._narrow(r) for r in requests])

    async def collection_info(self, collection: str) -> CollectionInfo:
        """The underlying collection's info."""
        return await self._index.collection_info(collection)

    async def close(self) -> None:
        """Nothing: the runtime owns (and closes) the index."""
