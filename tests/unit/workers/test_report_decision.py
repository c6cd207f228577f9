"""Report and decision handlers on results built by the real embedded pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.confidence.decision import decide
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.observability.metrics import Metrics
from ragsift.report.builder import ReportBuilder, ReportSettings
from ragsift.schemas import Decision, EvidenceEvent, QueryEvent, Report, RetrievalResult, ReviewItem
from ragsift.settings import GuardrailSettings, Settings
from ragsift.workers.decision import DecisionHandler
from ragsift.workers.report import ReportHandler


@pytest.fixture
async def results(tmp_path: Path) -> AsyncIterator[dict[str, RetrievalResult]]:
    runtime = EmbeddedRuntime(Settings(data_dir=tmp_path))
    await runtime.ingest("acme", sample_documents())
    asked = {
        "high": "How many days do I have to return the Orbit thermostat for a full refund?",
        "none": "Who won the football world cup in 2014?",
        "greeting": "Hello!",
    }
    out = await runtime.ask(
        [QueryEvent(query_id=k, tenant_id="acme", query=v) for k, v in asked.items()]
    )
    await runtime.close()
    return {r.query_id: r for r in out if isinstance(r, RetrievalResult)}


async def test_reports(results: dict[str, RetrievalResult]) -> None:
    handler = ReportHandler(ReportBuilder(ReportSettings()), Metrics())
    outcomes = await handler.handle_batch([results["high"], results["none"], results["greeting"]])
    high, none, greeting = (
        next(e.event for e in o if isinstance(e.event, Report))
        for o in outcomes  # type: ignore[union-attr]
    )
    assert results["high"].status == "high_confidence"
    assert not high.is_refusal
    assert "[1]" in high.answer
    assert "30 days" in high.answer
    assert high.citations
    assert high.disclaimer is None
    assert high.badge == "green"
    assert none.answer == REFUSAL_SENTENCE
    assert none.is_refusal
    assert none.badge == "red"
    assert none.banner is not None
    assert none.disclaimer
    refusals = [e.event for e in outcomes[1] if isinstance(e.event, EvidenceEvent)]  # type: ignore[union-attr]
    assert [ev.type.value for ev in refusals] == ["RAG_REFUSAL"]
    assert greeting.generated_by == "bypass"
    again = await handler.handle_batch([results["none"]])

    def ids(outcome: object) -> list[str]:
        return [getattr(e.event, "report_id", None) or e.event.id for e in outcome]  # type: ignore[attr-defined]

    assert ids(again[0]) == ids(outcomes[1])  # a replay yields the same ids


async def test_decisions_and_review(results: dict[str, RetrievalResult]) -> None:
    handler = DecisionHandler(GuardrailSettings(), Metrics())
    [high, none] = await handler.handle_batch([results["high"], results["none"]])
    decision = next(e.event for e in high if isinstance(e.event, Decision))  # type: ignore[union-attr]
    assert decision.use_context
    skip = next(e.event for e in none if isinstance(e.event, Decision))  # type: ignore[union-attr]
    assert not skip.use_context
    assert "without retrieved context" in skip.reason
    review = next(e.event for e in none if isinstance(e.event, ReviewItem))  # type: ignore[union-attr]
    assert review.queue == "expert_review"


def test_policy_edges() -> None:
    assert decide(outcome="ok", confidence=0.7, level="MEDIUM", threshold=0.7).use_context
    below = decide(outcome="ok", confidence=0.69, level="LOW", threshold=0.7)
    assert not below.use_context
    assert below.review_queue == "mandatory_review"
    rollback = decide(
        outcome="ok", confidence=0.2, level="VERY_LOW", threshold=0.7, strict_mode=False
    )
    assert rollback.use_context
    assert rollback.advisory_used_below_threshold
    assert decide(outcome="error", confidence=0, level="VERY_LOW", threshold=0.7).review_queue
    with pytest.raises(ValueError, match="threshold"):
        decide(outcome="ok", confidence=0.5, level="LOW", threshold=1.5)


async def test_a_result_its_bars_refused_is_not_used_whatever_its_confidence(
    results: dict[str, RetrievalResult],
) -> None:
    # RAGSIFT_GUARDRAILS_MIN_DOCUMENTS=2 over a one-document corpus: confidence 0.88
    # (HIGH) yet not answerable. The report refuses it; the decision said "context used".
    refused = results["high"].model_copy(
        update={"answerable": False, "answerability_reason": "too_few_documents"}
    )
    [report_out] = await ReportHandler(ReportBuilder(ReportSettings()), Metrics()).handle_batch(
        [refused]
    )
    report = next(e.event for e in report_out if isinstance(e.event, Report))  # type: ignore[union-attr]
    assert report.is_refusal
    [out] = await DecisionHandler(GuardrailSettings(), Metrics()).handle_batch([refused])
    decision = next(e.event for e in out if isinstance(e.event, Decision))  # type: ignore[union-attr]
    assert refused.confidence >= decision.threshold
    assert not decision.use_context
    assert "not answerable (too_few_documents)" in decision.reason
    # With strict mode off (D8 rollback) the report answers, and the context is used.
    rollback = decide(
        outcome="ok",
        confidence=0.9,
        level="HIGH",
        threshold=0.7,
        strict_mode=False,
        answerable=False,
        answerability_reason="too_few_documents",
    )
    assert rollback.use_context
