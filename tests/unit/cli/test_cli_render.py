"""What ``ask`` prints agrees with what the result kept."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from ragsift.cli.render import confidence_line, print_result
from ragsift.confidence import disclaimer_for
from ragsift.confidence.levels import Status
from ragsift.schemas import Citation, ConfidenceBreakdown, RetrievalResult, RetrievedChunk


def _result(status: Status, confidence: float, answerable: bool) -> RetrievalResult:
    hit = RetrievedChunk(
        chunk_id="warranty.md:0",
        doc_id="warranty.md",
        text="Every Orbit thermostat carries a 2-year limited warranty.",
        rank=1,
        score=0.24,
        citation=Citation(chunk_id="warranty.md:0", doc_id="warranty.md", source="warranty.md"),
    )
    fields: dict[str, Any] = {
        "result_id": "r1",
        "query_id": "q1",
        "tenant_id": "demo",
        "collection": "default",
        "query": "How long is the warranty?",
        "confidence": confidence,
        "status": status,
        "level": "VERY_LOW" if status == "no_relevant_context" else "HIGH",
        "advisory_flag": "VERY_LOW_CONFIDENCE",
        "advisory_only": not answerable,
        "answerable": answerable,
        "disclaimer": disclaimer_for(status, confidence).text,
        "breakdown": ConfidenceBreakdown(scorer="calibrated"),
        "hits": [hit],
        "filtered_count": 7,
        "total_found": 8,
        "match_count": 1,
        "threshold": 0.16,
        "stop_reason": "threshold",
        "chunks_retrieved": 8,
        "embedder_id": "ragsift-hashing-v1-384",
    }
    return RetrievalResult(**fields)


def _render(result: RetrievalResult) -> str:
    console = Console(width=200, record=True)
    print_result(console, result)
    return console.export_text()


def test_no_relevant_context_does_not_call_its_hits_kept_context() -> None:
    text = _render(_result("no_relevant_context", 0.30, answerable=False))
    assert "No retrieved context was relevant enough to use" in text
    assert "kept context" not in text
    assert "retrieved, judged not relevant (not used to answer)" in text
    assert "warranty.md" in text  # what was retrieved is still shown


def test_confidence_line_says_the_kept_hits_were_not_relevant_enough() -> None:
    line = confidence_line(_result("no_relevant_context", 0.30, answerable=False)).plain
    assert line.endswith("kept 1/8, none relevant enough to use · advisory only")


def test_an_answered_result_lists_its_kept_context() -> None:
    text = _render(_result("high_confidence", 0.93, answerable=True))
    assert "kept context" in text
    assert "none relevant" not in text


def test_an_answered_result_shows_its_top_hit_under_that_name_not_as_the_answer() -> None:
    """The panel holds the top hit's first characters; the answer is the report's."""
    answered = _render(_result("high_confidence", 0.93, answerable=True))
    assert " top hit " in answered.splitlines()[1]
    assert "─ answer ─" not in answered
    assert "Every Orbit thermostat carries a 2-year limited warranty.… [warranty.md]" in answered
    refused = _render(_result("no_relevant_context", 0.30, answerable=False))
    assert any(" refusal " in line and line.startswith("╭") for line in refused.splitlines())
