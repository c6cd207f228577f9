"""The report handler: retrieval results in, reports (and their evidence) out.

All the logic is in :class:`ragsift.report.ReportBuilder`; this routes its
output. Results of a batch are built concurrently (an LLM call each), at most
``max_concurrency`` at a time. A result whose build raises a ragsift error
(an LLM that rejects the request or answers garbage) becomes that event's
outcome, and the runtime dead-letters it; the batch's other results go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel

from ragsift.errors import RagsiftError
from ragsift.observability.metrics import Metrics
from ragsift.report.builder import ReportBuilder
from ragsift.schemas import RetrievalResult
from ragsift.workers.base import Emit, Outcome

__all__ = ["DEFAULT_MAX_CONCURRENCY", "ReportHandler"]

# Concurrent LLM calls per worker: enough to hide latency, few enough not to
# trip a self-hosted server's queue (vLLM and Ollama default to a handful of slots).
DEFAULT_MAX_CONCURRENCY = 8


class ReportHandler:
    """Builds one report per result; emits it to ``reports`` and its evidence to ``audit``.

    Args:
        builder: the report builder (owns the LLM client, if any).
        metrics: counts reports by kind and evidence by type, when given.
        max_concurrency: reports built at once within a batch, ``> 0``.
    """

    name = "report"
    source = "retrievals"

    def __init__(
        self,
        builder: ReportBuilder,
        metrics: Metrics | None = None,
        *,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be > 0, got {max_concurrency}")
        self.builder = builder
        self.metrics = metrics
        self._slots = asyncio.Semaphore(max_concurrency)

    @property
    def model(self) -> type[BaseModel]:
        """Retrieval results in."""
        return RetrievalResult

    async def handle_batch(self, events: Sequence[RetrievalResult]) -> list[Outcome]:
        """One outcome per result: the report keyed by query id, then its evidence."""
        return list(await asyncio.gather(*(self._one(result) for result in events)))

    async def _one(self, result: RetrievalResult) -> Outcome:
        async with self._slots:
            try:
                report, evidence = await self.builder.build(result)
            except RagsiftError as exc:
                exc.query_id = exc.query_id or result.query_id
                return exc
        if self.metrics is not None:
            kind = (
                "bypass"
                if report.generated_by == "bypass"
                else ("refusal" if report.is_refusal else "answer")
            )
            self.metrics.reports.labels(result.collection, kind).inc()
            for ev in evidence:
                self.metrics.evidence.labels(ev.type.value).inc()
        emits = [Emit("reports", result.query_id, report)]
        emits.extend(Emit("audit", result.query_id, ev) for ev in evidence)
        return emits

    async def close(self) -> None:
        """Close the builder's LLM client, if it has one."""
        if self.builder.llm is not None:
            await self.builder.llm.close()
