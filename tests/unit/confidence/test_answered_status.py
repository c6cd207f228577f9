"""An answered result never reads ``no_relevant_context``; a refused one never HIGH.

A4's status is the confidence's band, but a bar lowered for the traffic's mix (ADR
030, floored at even evidence by ADR 046) or set by an operator can answer under
the ``low`` band. A result that is answered and says there is no relevant context
contradicts itself: a strict report refuses it and the cache does not keep it. So
an answered result is at worst ``low_confidence`` / LOW, in the engine and under an
answer policy alike. The mirror case (ADR 049): a result refused at a high
confidence (too few documents, or a bar raised above it) used to keep its band,
HIGH and "safe to automate", and was cached for a day. A refused result is at best
``low_confidence`` / LOW, flagged, advisory only, and its disclaimer says why.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragsift.confidence import ConfidenceConfig, ConfidenceEngine, HitScores
from ragsift.confidence.policy import AnswerPolicy, PriorShift, apply_policy

#: Two hits kept at the similarity bar 0.4, mean 0.45: under the ``low`` band (0.50).
HITS = HitScores(dense=np.array([0.46, 0.44, 0.2]))


def engine(answer_threshold: float) -> ConfidenceEngine:
    return ConfidenceEngine(
        ConfidenceConfig(
            scorer="mean-kept", similarity_threshold=0.4, answer_threshold=answer_threshold
        )
    )


@pytest.mark.parametrize(
    ("bar", "answered", "status", "level"),
    [
        (0.3, True, "low_confidence", "LOW"),
        (0.6, False, "no_relevant_context", "VERY_LOW"),
    ],
)
def test_the_engine_bands_an_answered_result_low_at_worst(
    bar: float, answered: bool, status: str, level: str
) -> None:
    result = engine(bar).assess(HITS)
    assert result.confidence == pytest.approx(0.45)
    assert result.answerability.is_answerable is answered
    assert (result.status, result.level) == (status, level)
    batch = engine(bar).assess_batch([HITS, HITS])
    assert batch.statuses == [status, status]


def test_a_policy_that_lowers_the_bar_bands_the_answer_low_at_worst() -> None:
    e = engine(0.6)
    refused = e.assess(HITS)
    assert refused.status == "no_relevant_context"
    served = apply_policy(refused, e.config, AnswerPolicy(answer_threshold=0.3))
    assert served.answerability.is_answerable
    assert (served.status, served.level) == ("low_confidence", "LOW")
    assert (
        served.disclaimer
        == apply_policy(e.assess(HITS), e.config, AnswerPolicy(answer_threshold=0.3)).disclaimer
    )


def test_a_confidence_reported_at_the_mix_under_the_band_is_still_answered_low() -> None:
    e = engine(0.3)
    assessed = e.assess(HitScores(dense=np.array([0.9, 0.9, 0.2])))
    assert assessed.status == "high_confidence"
    # Traffic far less answerable than the calibration's: 0.9 is reported near 0.18.
    prior = PriorShift(calibration_share=0.5, share=0.98)
    served = apply_policy(assessed, e.config, AnswerPolicy(answer_floor=0.3, prior=prior))
    assert served.answerability.is_answerable
    assert served.confidence < 0.5
    assert served.status == "low_confidence"
    # The same report refused (its bar above it) keeps the band.
    above = apply_policy(assessed, e.config, AnswerPolicy(answer_floor=0.95, prior=prior))
    assert not above.answerability.is_answerable
    assert above.status == "no_relevant_context"


#: One hit far over every band: a confidence of about 0.95 under ``mean-kept``.
STRONG = HitScores(dense=np.array([0.95, 0.1]), doc_ids=["a", "b"])


def strong_engine(**overrides: object) -> ConfidenceEngine:
    cfg = {
        "scorer": "mean-kept",
        "similarity_threshold": 0.4,
        "answer_threshold": 0.3,
        "min_documents": 1,
    }
    return ConfidenceEngine(ConfidenceConfig(**{**cfg, **overrides}))  # type: ignore[arg-type]


def assert_refused_low(a: object, reason: str) -> None:
    assert not a.answerability.is_answerable  # type: ignore[attr-defined]
    assert a.answerability.reason == reason  # type: ignore[attr-defined]
    assert (a.status, a.level, a.review_action) == (  # type: ignore[attr-defined]
        "low_confidence",
        "LOW",
        "mandatory review",
    )
    assert a.should_flag_for_review  # type: ignore[attr-defined]
    assert a.advisory_flag == "LOW_CONFIDENCE"  # type: ignore[attr-defined]
    assert a.advisory_only  # type: ignore[attr-defined]
    assert "not used to answer" in a.disclaimer.text  # type: ignore[attr-defined]


def test_a_result_refused_for_too_few_documents_reads_low_not_high() -> None:
    e = strong_engine(min_documents=2)
    refused = e.assess(STRONG)
    assert refused.confidence == pytest.approx(0.95)
    assert_refused_low(refused, "too_few_documents")
    assert "fewer documents" in refused.disclaimer.text  # type: ignore[operator]
    batch = e.assess_batch([STRONG, STRONG])
    assert batch.statuses == ["low_confidence", "low_confidence"]
    assert_refused_low(batch.item(1), "too_few_documents")


def test_a_bar_raised_over_a_high_confidence_refuses_at_low() -> None:
    e = strong_engine()
    answered = e.assess(STRONG)
    assert (answered.status, answered.level, answered.advisory_flag) == (
        "high_confidence",
        "HIGH",
        "HIGH_CONFIDENCE",
    )
    assert not answered.advisory_only
    refused = apply_policy(answered, e.config, AnswerPolicy(answer_threshold=0.97))
    assert_refused_low(refused, "low_confidence")
    assert "answer bar" in refused.disclaimer.text  # type: ignore[operator]


def test_a_bar_lowered_under_a_refusal_restores_the_band() -> None:
    e = strong_engine(answer_threshold=0.97)
    refused = e.assess(STRONG)
    assert_refused_low(refused, "low_confidence")
    served = apply_policy(refused, e.config, AnswerPolicy(answer_threshold=0.5))
    assert served.answerability.is_answerable
    assert (served.status, served.level, served.advisory_flag) == (
        "high_confidence",
        "HIGH",
        "HIGH_CONFIDENCE",
    )
    assert not served.advisory_only
    assert served.disclaimer.text is None
