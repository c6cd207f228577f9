"""The report handler: retrieval results in, reports (and their evidence) out.

All the logic is in :class:`ragsift.report.ReportBuilder`; this routes its
output. Results of a batch are built concurrently (an LLM call each), at most
``max_concurrency`` at a time. A result whose build raises a ragsift error
(an LLM that rejects the request or answers garbage) becomes that event's
outcome, and the runtime dead-letters it; the batch's other results go on.

A call's deadline grows with its batch (``deadline_for``): a batch of 48 takes six
rounds of LLM calls, each up to ``llm_deadline_s``, which a flat 30 s cut off; the
batch was then rebuilt one report at a time, nearly twice the LLM calls.

Reports, their evidence and their LLM fallbacks are counted once the whole batch is
built: a batch cut off by its deadline is built again event by event, so a report
(and the fallback it took) is counted once, when it goes out, not once per build.
The batch's fallbacks are logged then too, in one warning that names how many there
were by reason and how the first failed: one per report, an LLM outage logged the
same line for every report of every batch.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel

from ragsift.errors import RagsiftError
from ragsift.observability.metrics import Metrics
from ragsift.report.builder import BuiltReport, FallbackReason, ReportBuilder
from ragsift.schemas import EvidenceEvent, Report, RetrievalResult
from ragsift.workers.base import MAX_DEADLINE_S, Emit, Outcome

__all__ = ["DEFAULT_MAX_CONCURRENCY", "ReportHandler"]

log = logging.getLogger(__name__)

# Concurrent LLM calls per worker: enough to hide latency, few enough not to
# trip a self-hosted server's queue (vLLM and Ollama default to a handful of slots).
DEFAULT_MAX_CONCURRENCY = 8


class ReportHandler:
    """Builds one report per result; emits it to ``reports`` and its evidence to ``audit``.

    Args:
        builder: the report builder (owns the LLM client, if any).
        metrics: counts reports by kind, evidence by type and LLM fallbacks, when given.
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
        self.max_concurrency = max_concurrency
        self._slots = asyncio.Semaphore(max_concurrency)

    @property
    def model(self) -> type[BaseModel]:
        """Retrieval results in."""
        return RetrievalResult

    def deadline_for(self, events: Sequence[RetrievalResult], default: float) -> float:
        """The deadline of one call on ``events``: ``default`` (the runtime's, 30 s) for
        the first round of ``max_concurrency`` reports, and ``llm_deadline_s`` for each
        further round, at most :data:`MAX_DEADLINE_S` (or ``default`` where longer).

        ``default`` exceeds one LLM call's deadline (the settings insist), so its slack
        over it is the margin; extractive reports make no LLM calls and get ``default``.
        """
        if self.builder.llm is None or not events:
            return default
        rounds = math.ceil(len(events) / self.max_concurrency)
        grown = default + (rounds - 1) * self.builder.settings.llm_deadline_s
        return min(grown, max(default, MAX_DEADLINE_S))

    async def handle_batch(self, events: Sequence[RetrievalResult]) -> list[Outcome]:
        """One outcome per result: the report keyed by query id, then its evidence."""
        built = await asyncio.gather(*(self._one(result) for result in events))
        # Counted once the whole batch is built: a call cut off by its deadline is
        # built again event by event, and its finished reports were never emitted.
        outcomes: list[Outcome] = []
        fell_back: list[tuple[str, BuiltReport]] = []
        for result, (outcome, report) in zip(events, built, strict=True):
            if not isinstance(outcome, Exception) and report is not None:
                self._count(result, outcome, report.llm_fallback)
                if report.llm_fallback is not None:
                    fell_back.append((result.query_id, report))
            outcomes.append(outcome)
        if fell_back:
            self._warn(fell_back, len(events))
        return outcomes

    @staticmethod
    def _warn(fell_back: Sequence[tuple[str, BuiltReport]], of: int) -> None:
        """One line for the batch's fallbacks: how many, by reason, and the first's error."""
        reasons = Counter(report.llm_fallback for _, report in fell_back)
        query_id, first = fell_back[0]
        log.warning(
            "LLM call failed for %d of %d reports of the batch, answering them"
            " extractively (%s); the first, query %s: %s %s",
            len(fell_back),
            of,
            ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items())),
            query_id,
            first.llm_fallback,
            first.llm_error,
        )

    async def _one(self, result: RetrievalResult) -> tuple[Outcome, BuiltReport | None]:
        async with self._slots:
            try:
                built = await self.builder.build_report(result)
            except RagsiftError as exc:
                exc.query_id = exc.query_id or result.query_id
                return exc, None
        emits = [Emit("reports", result.query_id, built.report)]
        emits.extend(Emit("audit", result.query_id, ev) for ev in built.evidence)
        return emits, built

    def _count(
        self, result: RetrievalResult, emits: list[Emit], fallback: FallbackReason | None
    ) -> None:
        """Count what ``emits`` carries: its report by kind, its evidence by type, and the
        LLM fallback the report took, if any."""
        if self.metrics is None:
            return
        if fallback is not None:
            self.metrics.llm_fallbacks.labels(fallback).inc()
        for emit in emits:
            if isinstance(emit.event, Report):
                report = emit.event
                kind = (
                    "bypass"
                    if report.generated_by == "bypass"
                    else ("refusal" if report.is_refusal else "answer")
                )
                self.metrics.reports.labels(result.collection, kind).inc()
            elif isinstance(emit.event, EvidenceEvent):
                self.metrics.evidence.labels(emit.event.type.value).inc()

    async def close(self) -> None:
        """Close the builder's LLM client, if it has one."""
        if self.builder.llm is not None:
            await self.builder.llm.close()
