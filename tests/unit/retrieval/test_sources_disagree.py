"""Kept sources that disagree make a result reviewed, not "safe to automate" (D7, B3).

Before: a café opening at 9am in one document and at 8 a.m. in another was answered
HIGH, 1.00, "safe to automate", no contradiction (times of day were not read), and a
contradiction that was found changed nothing but a field: no review flag, no decision
flag, no review item, no audit evidence.
"""

from __future__ import annotations

from pathlib import Path

from ragsift.confidence.decision import decide
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.contradictions import DISAGREE_ACTION
from ragsift.retrieval.results import evidence_for
from ragsift.schemas import Decision, EvidenceType, QueryEvent, RetrievalResult, ReviewItem
from ragsift.settings import EmbedderSettings, GuardrailSettings, Settings
from ragsift.workers.decision import SOURCES_DISAGREE_FLAG, DecisionHandler
from tests.factories import low_bar_confidence

QUERY = "When does the café open on weekdays?"


def _docs(second: str, first: str) -> list[SourceDocument]:
    return [
        SourceDocument(doc_id="hours-2023", text=f"Hours. The café {first} on weekdays."),
        SourceDocument(doc_id="hours-2024", text=f"Hours. On weekdays the café {second}."),
    ]


async def _answer(
    tmp_path: Path, second: str, first: str = "opens at 9am"
) -> tuple[RetrievalResult, list[EvidenceType]]:
    settings = Settings(
        data_dir=tmp_path,
        confidence=low_bar_confidence(),
        embedder=EmbedderSettings(kind="hashing"),
    )
    async with EmbeddedRuntime(settings) as rt:
        await rt.ingest("acme", _docs(second, first))
        [result] = await rt.ask([QueryEvent(query_id="q1", tenant_id="acme", query=QUERY)])
    assert isinstance(result, RetrievalResult)
    assert {h.doc_id for h in result.hits} == {"hours-2023", "hours-2024"}
    evidence = evidence_for(result, advisory_threshold=0.5, source="/test")
    return result, [e.type for e in evidence]


async def test_two_opening_times_flag_the_result_for_review_with_evidence(
    tmp_path: Path,
) -> None:
    result, evidence = await _answer(tmp_path, "opens at 8 a.m.")
    assert result.contradiction is not None
    assert result.contradiction.values == ["9am", "8 a.m."]
    assert result.should_flag_for_review
    if result.level in ("HIGH", "MEDIUM"):
        assert result.review_action == DISAGREE_ACTION
    assert EvidenceType.SOURCES_DISAGREE in evidence


async def test_one_opening_time_written_two_ways_is_no_disagreement(tmp_path: Path) -> None:
    result, evidence = await _answer(tmp_path, "opens at 09:00")
    assert result.contradiction is None
    assert EvidenceType.SOURCES_DISAGREE not in evidence


async def test_two_opening_hours_that_share_one_end_flag_the_result(tmp_path: Path) -> None:
    """Before: 9am–5:30pm and 8am–5:30pm shared 5:30pm, and that one shared time of day
    passed the two for "another case": HIGH, no contradiction, no review."""
    result, evidence = await _answer(tmp_path, "is open 8am–5:30pm", first="is open 9am–5:30pm")
    assert result.contradiction is not None
    assert result.contradiction.values == ["9am–5:30pm", "8am–5:30pm"]
    assert result.should_flag_for_review
    assert EvidenceType.SOURCES_DISAGREE in evidence
    same, evidence = await _answer(
        tmp_path / "same", "is open 9 a.m. to 5:30 p.m.", first="is open 9am–5:30pm"
    )
    assert same.contradiction is None
    assert EvidenceType.SOURCES_DISAGREE not in evidence


def test_a_confident_decision_on_disagreeing_sources_goes_to_review() -> None:
    plain = decide(outcome="ok", confidence=0.95, level="HIGH", threshold=0.7)
    assert plain.review_queue is None
    disagree = decide(
        outcome="ok", confidence=0.95, level="HIGH", threshold=0.7, sources_disagree=True
    )
    assert disagree.use_context
    assert disagree.review_queue == "mandatory_review"
    assert disagree.reason.endswith("the kept sources disagree: reviewed")
    # A stricter queue stays: VERY_LOW is an expert's whatever else is true.
    low = decide(
        outcome="ok", confidence=0.2, level="VERY_LOW", threshold=0.7, sources_disagree=True
    )
    assert low.review_queue == "expert_review"


async def test_the_decision_worker_flags_and_queues_it(tmp_path: Path) -> None:
    result, _ = await _answer(tmp_path, "opens at 8 a.m.")
    confident = result.model_copy(
        update={"confidence": 0.97, "level": "HIGH", "should_flag_for_review": True}
    )
    outcome = await DecisionHandler(GuardrailSettings(), Metrics()).handle_batch([confident])
    [emits] = outcome
    assert isinstance(emits, list)
    decision = next(e.event for e in emits if isinstance(e.event, Decision))
    assert SOURCES_DISAGREE_FLAG in decision.flags
    assert "FLAGGED_FOR_REVIEW" in decision.flags
    review = next(e.event for e in emits if isinstance(e.event, ReviewItem))
    assert review.queue == "mandatory_review"
