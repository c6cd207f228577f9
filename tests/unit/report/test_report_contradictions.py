"""D7: a report whose sources disagree says so, naming both sides; a refusal does not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.report import ReportBuilder, ReportSettings
from ragsift.report.contradictions import contradiction_note
from ragsift.retrieval.contradictions import ContradictionDetector
from ragsift.schemas import Contradiction, RetrievalResult
from tests.unit.report.conftest import QUESTION, hit

Make = Callable[..., RetrievalResult]
OLD = "Orbit thermostats can be returned within 30 days of delivery for a full refund."
NEW = "Orbit thermostats can be returned within 14 days of delivery for a full refund."


def disagreeing(make_result: Make, **overrides: Any) -> RetrievalResult:
    """Two policies, 30 vs 14 days, with the contradiction the pipeline would attach."""
    hits = [hit(1, OLD), hit(2, NEW)]
    found = ContradictionDetector().find(QUESTION, hits)
    assert found is not None
    return make_result(hits=hits, contradiction=found, **overrides)


async def test_extractive_report_names_both_values_and_sources(make_result: Make) -> None:
    report, _ = await ReportBuilder(ReportSettings()).build(disagreeing(make_result))
    assert not report.is_refusal
    assert report.answer.endswith(
        "Note: the sources disagree: [1] says “30 days”, [2] says “14 days”."
    )
    assert report.contradiction is not None
    assert report.contradiction.chunk_ids == ["c1", "c2"]
    assert report.validation_issues == []


async def test_llm_report_gets_the_note_too(make_result: Make, chat: Any) -> None:
    llm = chat("You can return it within 30 days [1].")
    report, _ = await ReportBuilder(ReportSettings(), llm).build(disagreeing(make_result))
    assert report.generated_by == "llm"
    assert report.answer.startswith("You can return it within 30 days [1].")
    assert "[2] says “14 days”" in report.answer


async def test_a_refusal_carries_no_note(make_result: Make) -> None:
    result = disagreeing(make_result, confidence=0.2)
    report, _ = await ReportBuilder(ReportSettings()).build(result)
    assert report.answer == REFUSAL_SENTENCE
    assert report.contradiction is None


async def test_agreeing_sources_get_no_note(make_result: Make) -> None:
    report, _ = await ReportBuilder(ReportSettings()).build(make_result())
    assert "disagree" not in report.answer
    assert report.contradiction is None


def test_negation_note_quotes_both_statements_and_names_unused_sources() -> None:
    contradiction = Contradiction(
        kind="negation",
        chunk_ids=["c1", "c9"],
        doc_ids=["faq", "terms"],
        statements=["Refunds are issued.", "Refunds are not issued."],
    )
    note = contradiction_note(contradiction, [hit(1, "Refunds are issued.")])
    assert note == (
        "Note: the sources disagree: [1] says “Refunds are issued.”,"
        " document 'terms' says “Refunds are not issued.”."
    )
