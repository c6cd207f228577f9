"""apply_policy copies the engine's configuration only for the bars a policy moves.

The mix's bar (a floor, an answer threshold, a prior) reaches every calibrated query
and leaves the levels and the documents needed as the engine's; a copy of the
configuration re-ran its checks on each of them (~10 us a query, issue 17).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from ragsift.confidence import ConfidenceEngine, HitScores
from ragsift.confidence import policy as policy_module
from ragsift.confidence.config import LevelThresholds
from ragsift.confidence.policy import AnswerPolicy, PriorShift, apply_policy

EngineFactory = Callable[..., ConfidenceEngine]
HitsFactory = Callable[..., HitScores]


class _CountingReplace:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, obj: Any, /, **changes: Any) -> Any:
        self.calls += 1
        return dataclasses.replace(obj, **changes)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> _CountingReplace:
    replace = _CountingReplace()
    fake = type("dataclasses", (), {"replace": staticmethod(replace)})
    monkeypatch.setattr(policy_module, "dataclasses", fake)
    return replace


@pytest.mark.parametrize(
    "policy",
    [
        AnswerPolicy(answer_floor=0.5),
        AnswerPolicy(answer_threshold=0.7),
        AnswerPolicy(prior=PriorShift(calibration_share=0.5, share=0.8)),
        AnswerPolicy(min_documents=1, answer_floor=0.2),
    ],
)
def test_a_policy_that_keeps_the_levels_and_documents_copies_no_configuration(
    make_engine: EngineFactory,
    make_hits: HitsFactory,
    counted: _CountingReplace,
    policy: AnswerPolicy,
) -> None:
    engine = make_engine(scorer="mean-kept")
    served = apply_policy(engine.assess(make_hits()), engine.config, policy)
    assert counted.calls == 0
    assert served.answerability.answer_threshold >= policy.answer_floor


def test_a_policy_that_moves_the_levels_or_the_documents_still_applies_them(
    make_engine: EngineFactory, make_hits: HitsFactory, counted: _CountingReplace
) -> None:
    engine = make_engine(scorer="mean-kept")
    assessed = engine.assess(make_hits())
    assert assessed.answerability.is_answerable
    docs = assessed.answerability.documents_within_threshold
    refused = apply_policy(assessed, engine.config, AnswerPolicy(min_documents=docs + 1))
    assert not refused.answerability.is_answerable
    strict = LevelThresholds(high=0.99, medium=0.98, low=0.97)
    lowered = apply_policy(assessed, engine.config, AnswerPolicy(levels=strict))
    assert lowered.level != assessed.level
    assert counted.calls == 2
