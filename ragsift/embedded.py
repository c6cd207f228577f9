"""The embedded runtime: the whole pipeline in one process, no servers (X5).

Qdrant Edge holds the vectors under the data directory, an in-memory TTL cache
stands in for Redis, the in-process bus drives the same handlers the Faust
agents use, and the audit trail goes to ``<data_dir>/audit/audit.jsonl``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType

from ragsift.ingest.indexer import Indexer, IngestReport
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.schemas import DeadLetter, QueryEvent, RetrievalResult
from ragsift.settings import Settings
from ragsift.streams.bus import InProcessBus
from ragsift.wiring import (
    build_calibration_store,
    build_embedder,
    build_index,
    build_pipeline,
)
from ragsift.workers.audit import build_audit_handler
from ragsift.workers.retrieval import RetrievalHandler

__all__ = ["CALIBRATIONS_DIR", "EmbeddedRuntime"]

#: Folder of the data dir that holds scoped calibration artifacts.
CALIBRATIONS_DIR = "calibrations"


class EmbeddedRuntime:
    """Ingest and query in-process; use as ``async with EmbeddedRuntime(settings) as rt``."""

    def __init__(self, settings: Settings, *, metrics: Metrics | None = None):
        self.settings = settings
        self.data_dir = settings.data_dir
        self.metrics = metrics or Metrics()
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
        self.indexer = Indexer(self.index, self.embedder, cache=self.cache)
        audit = build_audit_handler(settings.audit, Path(self.data_dir) / "audit", self.metrics)
        self.audit = audit.sink
        self.bus = InProcessBus(
            [RetrievalHandler(self.pipeline), audit],
            metrics=self.metrics,
            batch_size=settings.limits.batch_size,
            prefix=settings.kafka.topic_prefix,
            deadline_s=settings.limits.handler_deadline_s,
            max_original_bytes=settings.limits.deadletter_max_original_bytes,
        )

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
        progress: Callable[[int], None] | None = None,
    ) -> IngestReport:
        """Chunk, embed and index documents for a tenant."""
        report = await self.indexer.ingest(tenant_id, collection, documents, progress=progress)
        optimize = getattr(self.index, "optimize", None)
        if callable(optimize):
            optimize(collection)
        return report

    async def ask(self, queries: Sequence[QueryEvent]) -> list[RetrievalResult | DeadLetter]:
        """Publish queries on the bus and return, per query, its result or dead letter."""
        start_results = len(self.bus.published["retrievals"])
        start_dead = len(self.bus.published["deadletter"])
        for q in queries:
            await self.bus.publish("queries", q.query_id, q)
        await self.bus.drain()
        results = {
            r.query_id: r
            for r in self.bus.published["retrievals"][start_results:]
            if isinstance(r, RetrievalResult)
        }
        dead = {
            d.query_id: d
            for d in self.bus.published["deadletter"][start_dead:]
            if isinstance(d, DeadLetter) and d.query_id
        }
        out: list[RetrievalResult | DeadLetter] = []
        for q in queries:
            found = results.get(q.query_id) or dead.get(q.query_id)
            if found is None:
                raise RuntimeError(
                    f"query {q.query_id} produced neither a result nor a dead letter"
                )
            out.append(found)
        return out

    async def close(self) -> None:
        """Flush and close the index and the handlers."""
        await self.bus.close()
        await self.pipeline.close()
        await self.index.close()
