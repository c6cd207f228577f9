"""ReportHandler: routing to reports and audit, per-event failures, metrics, close."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragsift.observability.metrics import Metrics
from ragsift.report import LlmResponseError, ReportBuilder, ReportSettings
from ragsift.schemas import EvidenceEvent, Report, RetrievalResult
from ragsift.workers.base import Emit
from ragsift.workers.report import ReportHandler

Make = Callable[..., RetrievalResult]


async def test_routes_reports_and_evidence(make_result: Make) -> None:
    metrics = Metrics()
    handler = ReportHandler(ReportBuilder(ReportSettings()), metrics)
    assert (handler.name, handler.source) == ("report", "retrievals")
    assert handler.model is RetrievalResult
    results = [make_result(), make_result(query_id="q2", confidence=0.2)]
    outcomes = await handler.handle_batch(results)
    assert len(outcomes) == 2
    answer, refusal = outcomes
    assert isinstance(answer, list)
    assert isinstance(refusal, list)
    assert [(e.topic, e.key) for e in answer] == [("reports", "q1")]
    assert [(e.topic, e.key) for e in refusal] == [("reports", "q2"), ("audit", "q2")]
    assert isinstance(refusal[0].event, Report)
    assert isinstance(refusal[1].event, EvidenceEvent)
    assert refusal[1].event.type.value == "RAG_REFUSAL"
    counted = metrics.reports.labels("default", "refusal")._value.get()
    assert counted == 1


async def test_a_failing_build_is_that_events_outcome(make_result: Make, chat: Any) -> None:
    llm = chat("Orbit thermostats can be returned within 30 days [1].", LlmResponseError("bad"))
    handler = ReportHandler(ReportBuilder(ReportSettings(), llm), max_concurrency=1)
    first, second = await handler.handle_batch([make_result(), make_result(query_id="q2")])
    assert isinstance(first, list)
    assert all(isinstance(e, Emit) for e in first)
    assert isinstance(second, LlmResponseError)
    assert second.query_id == "q2"


async def test_close_closes_the_llm(chat: Any) -> None:
    llm = chat("x")
    await ReportHandler(ReportBuilder(ReportSettings(), llm)).close()
    assert llm.closed
    await ReportHandler(ReportBuilder(ReportSettings())).close()
