"""An answered result never reads ``no_relevant_context``.

A4's status is the confidence's band, but a bar lowered for the traffic's mix (ADR
030, floored at even evidence by ADR 046) or set by an operator can answer under
the ``low`` band. A result that is answered and says there is no relevant context
contradicts itself: a strict report refuses it and the cache does not keep it. So
an answered result is at worst ``low_confidence`` / LOW, in the engine and under an
answer policy alike; a refused one keeps its band.
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
