"""ReportBuilder: bypass, refusal, answers, validation, badges, banners, disclaimers, replay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.errors import ConfigurationError
from ragsift.report import LlmUnavailableError, ReportBuilder, ReportSettings
from ragsift.schemas import ErrorInfo, EvidenceEvent, RetrievalResult, derive_query_id

Make = Callable[..., RetrievalResult]
GOOD_ANSWER = "You can return the Orbit thermostat within 30 days for a full refund [1]."


def types(evidence: list[EvidenceEvent]) -> list[str]:
    return sorted(ev.type.value for ev in evidence)


async def test_high_result_extractive_answer_cites_and_has_no_disclaimer(make_result: Make) -> None:
    report, evidence = await ReportBuilder(ReportSettings()).build(make_result())
    assert not report.is_refusal
    assert report.generated_by == "extractive"
    assert "30 days" in report.answer
    assert "[1]" in report.answer
    assert [c.chunk_id for c in report.citations] == ["c1", "c2", "c3"]
    assert report.disclaimer is None
    assert report.badge == "green"
    assert report.banner is None
    assert not report.advisory_only
    assert report.composite_confidence is not None
    assert evidence == []


async def test_high_result_llm_answer(make_result: Make, chat: Any) -> None:
    llm = chat(GOOD_ANSWER)
    report, evidence = await ReportBuilder(ReportSettings(), llm).build(make_result())
    assert report.answer == GOOD_ANSWER
    assert report.generated_by == "llm"
    assert report.prompt_variant == "high"
    assert report.disclaimer is None
    assert report.validation_issues == []
    assert evidence == []
    system = llm.calls[0][0]["content"]
    assert "HIGH" in system
    assert REFUSAL_SENTENCE in system


async def test_low_result_has_disclaimer_and_advisory_banner(make_result: Make, chat: Any) -> None:
    llm = chat(GOOD_ANSWER)
    report, _ = await ReportBuilder(ReportSettings(), llm).build(make_result(confidence=0.6))
    assert report.status == "low_confidence"
    assert not report.is_refusal
    assert report.prompt_variant == "low"
    assert report.disclaimer is not None
    assert "exploratory" in report.disclaimer
    assert report.advisory_only
    assert report.banner == "Advisory only — confidence 60%"
    assert report.badge == "red"


async def test_medium_result_is_orange_with_general_guidance(make_result: Make) -> None:
    report, _ = await ReportBuilder(ReportSettings()).build(make_result(confidence=0.8))
    assert report.badge == "orange"
    assert report.disclaimer is not None
    assert "general guidance" in report.disclaimer
    assert report.banner is None


@pytest.mark.parametrize(
    ("confidence", "badge"), [(0.95, "green"), (0.9, "green"), (0.89, "orange"), (0.7, "orange")]
)
async def test_badge_bounds(make_result: Make, confidence: float, badge: str) -> None:
    report, _ = await ReportBuilder(ReportSettings()).build(make_result(confidence=confidence))
    assert report.badge == badge


async def test_no_relevant_context_is_exactly_the_refusal(make_result: Make, chat: Any) -> None:
    llm = chat(GOOD_ANSWER)
    result = make_result(confidence=0.3)
    report, evidence = await ReportBuilder(ReportSettings(), llm).build(result)
    assert report.answer == REFUSAL_SENTENCE
    assert report.is_refusal
    assert report.badge == "red"
    assert report.citations == []
    assert report.prompt_variant == "insufficient"
    assert report.disclaimer is not None
    assert "without retrieved context" in report.disclaimer
    assert report.banner == "Advisory only — confidence 30%"
    assert report.composite_confidence == 0.0
    assert types(evidence) == ["RAG_REFUSAL"]
    assert evidence[0].source == "/ragsift/worker/report"
    assert evidence[0].subject == result.query_id
    assert llm.calls == []  # no tokens spent on an answer that must be the refusal


async def test_unanswerable_and_error_results_are_refused(make_result: Make) -> None:
    builder = ReportBuilder(ReportSettings())
    unanswerable = make_result(
        confidence=0.6, answerable=False, answerability_reason="too_few_documents"
    )
    failed = make_result(
        outcome="error",
        hits=[],
        confidence=0.0,
        error=ErrorInfo(stage="search", error_type="X", message="down"),
    )
    reasons = []
    for result in (unanswerable, failed):
        report, evidence = await builder.build(result)
        assert report.answer == REFUSAL_SENTENCE
        assert types(evidence) == ["RAG_REFUSAL"]
        reasons.append(evidence[0].data.details["reason"])
    assert "too_few_documents" in reasons[0]
    assert "retrieval failed at stage search" in reasons[1]


async def test_greeting_bypasses(make_result: Make) -> None:
    result = make_result(outcome="greeting", hits=[], confidence=0.0, answer_hint="Hello!")
    report, evidence = await ReportBuilder(ReportSettings()).build(result)
    assert report.answer == "Hello!"
    assert report.generated_by == "bypass"
    assert report.badge == "green"
    assert report.disclaimer is None
    assert not report.is_refusal
    assert evidence == []


async def test_unsupported_number_is_replaced_by_the_refusal(make_result: Make, chat: Any) -> None:
    llm = chat("You can return the Orbit thermostat within 45 days for a full refund [1].")
    report, evidence = await ReportBuilder(ReportSettings(), llm).build(make_result())
    assert report.answer == REFUSAL_SENTENCE
    assert report.is_refusal
    assert report.generated_by == "llm"
    assert report.badge == "red"
    assert any("'45'" in issue for issue in report.validation_issues)
    assert types(evidence) == ["RAG_REFUSAL", "RAG_RESPONSE_INVALIDATED"]
    invalidated = next(e for e in evidence if e.type.value == "RAG_RESPONSE_INVALIDATED")
    assert invalidated.data.details["issues"] == report.validation_issues


@pytest.mark.parametrize(
    ("answer", "issue"),
    [
        ("You can return it within 30 days for a full refund [4].", "cites source [4]"),
        (
            "Quantum entanglement lets particles share states across galaxies instantly.",
            "ungrounded",
        ),
        ("The provided documents do not contain the refund window.", "refusal-looking"),
        ("Orbit was founded by Jane Smith [1].", "name 'Jane Smith'"),
    ],
)
async def test_invalid_answers(make_result: Make, chat: Any, answer: str, issue: str) -> None:
    report, evidence = await ReportBuilder(ReportSettings(), chat(answer)).build(make_result())
    assert report.answer == REFUSAL_SENTENCE
    assert any(issue in i for i in report.validation_issues), report.validation_issues
    assert "RAG_RESPONSE_INVALIDATED" in types(evidence)


async def test_model_refusal_is_a_refusal_not_an_invalid_answer(
    make_result: Make, chat: Any
) -> None:
    llm = chat(f'"{REFUSAL_SENTENCE}"')
    report, evidence = await ReportBuilder(ReportSettings(), llm).build(make_result())
    assert report.answer == REFUSAL_SENTENCE
    assert report.is_refusal
    assert report.validation_issues == []
    assert types(evidence) == ["RAG_REFUSAL"]


async def test_validation_off_keeps_the_answer(make_result: Make, chat: Any) -> None:
    llm = chat("Within 45 days [1].")
    builder = ReportBuilder(ReportSettings(validate_responses=False), llm)
    report, evidence = await builder.build(make_result())
    assert report.answer == "Within 45 days [1]."
    assert evidence == []


async def test_composite_is_lower_for_an_invalidated_answer(make_result: Make, chat: Any) -> None:
    good, _ = await ReportBuilder(ReportSettings(), chat(GOOD_ANSWER)).build(make_result())
    bad, _ = await ReportBuilder(ReportSettings(), chat("Within 45 days [1].")).build(make_result())
    assert good.composite_confidence is not None
    assert bad.composite_confidence is not None
    assert bad.composite_confidence < good.composite_confidence
    # C1: 0.4 x retrieval + 0.3 x source (unknown type = third-party, 0.10 / 0.30) + 0.3 x 1.0
    assert good.composite_confidence == pytest.approx(0.4 * 0.93 + 0.3 / 3 + 0.3)


async def test_source_types_raise_the_composite(make_result: Make, make_hit: Any) -> None:
    texts = ["Orbit thermostats can be returned within 30 days for a full refund."]
    gov = make_result(hits=[make_hit(1, texts[0], source_type="government")])
    other = make_result(hits=[make_hit(1, texts[0])])
    builder = ReportBuilder(ReportSettings())
    high, _ = await builder.build(gov)
    low, _ = await builder.build(other)
    assert high.composite_confidence is not None
    assert low.composite_confidence is not None
    assert high.composite_confidence > low.composite_confidence


async def test_strict_mode_off_uses_the_standard_prompt_over_all_hits(
    make_result: Make, make_hit: Any, chat: Any
) -> None:
    hits = [make_hit(n, f"Fact {n}: the Orbit thermostat has feature {n}.") for n in range(1, 13)]
    result = make_result(
        hits=hits, confidence=0.55, answerable=False, answerability_reason="low_confidence"
    )
    llm = chat("The Orbit thermostat has feature 12 [12].")
    report, evidence = await ReportBuilder(ReportSettings(strict_mode=False), llm).build(result)
    assert not report.is_refusal  # rollback: no answerability refusal
    assert report.prompt_variant == "standard"
    assert len(report.citations) == 12
    assert evidence == []
    system, user = (m["content"] for m in llm.calls[0])
    assert "confidence" not in system.lower()
    assert all(f"[{n}]" in user for n in range(1, 13))
    strict_llm = chat("The Orbit thermostat has feature 1 [1].")
    strict = make_result(hits=hits)
    await ReportBuilder(ReportSettings(), strict_llm).build(strict)
    assert "BEGIN SOURCE [9]" not in strict_llm.calls[0][1]["content"]  # capped at max_sources


async def test_llm_outage_falls_back_to_extractive(make_result: Make, chat: Any) -> None:
    llm = chat(LlmUnavailableError("down", attempts=3))
    report, _ = await ReportBuilder(ReportSettings(), llm).build(make_result())
    assert report.generated_by == "extractive"
    assert "30 days" in report.answer


async def test_long_answers_are_clipped_at_a_sentence(make_result: Make, chat: Any) -> None:
    sentence = "Orbit thermostats can be returned within 30 days of delivery [1]. "
    llm = chat(sentence * 20)
    settings = ReportSettings(max_answer_chars=200)
    report, _ = await ReportBuilder(settings, llm).build(make_result())
    assert len(report.answer) <= 200
    assert report.answer.endswith(".")


async def test_replay_gives_the_same_ids(make_result: Make, chat: Any) -> None:
    builder = ReportBuilder(ReportSettings(), chat("Within 45 days [1]."))
    first, first_evidence = await builder.build(make_result())
    again, again_evidence = await builder.build(make_result())
    assert first.report_id == again.report_id == derive_query_id("acme", "q1", "report")
    assert [e.id for e in first_evidence] == [e.id for e in again_evidence]
    other, other_evidence = await builder.build(make_result(query_id="q2"))
    assert other.report_id != first.report_id
    assert not {e.id for e in other_evidence} & {e.id for e in first_evidence}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"advisory_threshold": 1.5}, "advisory_threshold must be in [0, 1], got 1.5"),
        ({"green_at": 0.5}, "green_at must be >= advisory_threshold"),
        ({"max_answer_chars": 0}, "max_answer_chars must be >= 1, got 0"),
        ({"llm_base_url": "http://127.0.0.1:1"}, "llm_model is required"),
    ],
)
def test_settings_are_checked(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("[", r"\[")):
        ReportSettings(**overrides)


async def test_settings_hide_the_key_and_build_a_client() -> None:
    settings = ReportSettings(llm_base_url="http://127.0.0.1:1", llm_model="m", llm_api_key="sk-x")
    assert "sk-x" not in repr(settings)
    client = settings.make_llm_client()
    assert client is not None
    assert client.url == "http://127.0.0.1:1/v1/chat/completions"
    await client.close()
    assert ReportSettings().make_llm_client() is None
