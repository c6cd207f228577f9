"""An answer policy that carries a mix reports the confidence and the bar at it (ADR 016).

The answer is decided in the calibration's terms first, so a confidence exactly
at the bar is answered whatever float the mapping gives; what the result says
(confidence, bar, level, advisory flag) is then reported at the mix.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ragsift.confidence import ConfidenceEngine, ConfidenceError, HitScores
from ragsift.confidence.mix import at_share
from ragsift.confidence.policy import AnswerPolicy, PriorShift, apply_policy

EngineFactory = Callable[..., ConfidenceEngine]
HitsFactory = Callable[..., HitScores]


def test_the_answer_is_decided_before_the_confidence_is_reported_at_the_mix(
    make_engine: EngineFactory, make_hits: HitsFactory
) -> None:
    engine = make_engine(scorer="mean-kept")
    assessed = engine.assess(make_hits())
    assert assessed.confidence == pytest.approx(0.90)
    prior = PriorShift(calibration_share=0.5, share=0.9)
    at_bar = AnswerPolicy(answer_floor=assessed.confidence, prior=prior)
    served = apply_policy(assessed, engine.config, at_bar)
    assert served.answerability.is_answerable  # at the bar, in the calibration's terms
    assert served.confidence == pytest.approx(at_share(0.90, 0.5, 0.9))
    assert served.confidence == pytest.approx(0.5)
    assert served.answerability.answer_threshold == pytest.approx(served.confidence)
    assert assessed.level != served.level  # 0.90 was high; 0.50 is not
    assert served.advisory_flag != assessed.advisory_flag
    above = AnswerPolicy(answer_floor=0.91, prior=prior)
    refused = apply_policy(assessed, engine.config, above)
    assert not refused.answerability.is_answerable
    assert refused.confidence == pytest.approx(served.confidence)
    # Without a prior, nothing that is reported moves.
    plain = apply_policy(assessed, engine.config, AnswerPolicy(answer_floor=0.5))
    assert plain.confidence == assessed.confidence
    assert not AnswerPolicy(prior=prior).is_neutral


@pytest.mark.parametrize("shares", [(0.0, 0.5), (0.5, 1.0), (1.2, 0.5), (0.5, float("nan"))])
def test_a_prior_outside_the_open_unit_interval_is_refused(shares: tuple[float, float]) -> None:
    with pytest.raises(ConfidenceError, match="must be in"):
        PriorShift(*shares)


@pytest.mark.parametrize("odd", [float("nan"), float("inf"), -1.0])
def test_a_confidence_that_is_not_a_probability_passes_through_to_be_refused_later(
    odd: float,
) -> None:
    shifted = PriorShift(calibration_share=0.5, share=0.9).apply(odd)
    assert shifted == odd or (shifted != shifted and odd != odd)  # NaN stays NaN
