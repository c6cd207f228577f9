"""B2 pinned: seed B's weighted score (0.30/0.20/0.15/0.15/0.10/0.05/0.05) on worked
examples computed by hand, so a change to the formula or its weights shows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsift.confidence import ConfidenceConfig, ConfidenceEngine, HitScores
from ragsift.confidence.scorers import ScoringInputs, WeightedScorer
from ragsift.confidence.signals import SIGNAL_NAMES


def test_weighted_score_through_the_engine() -> None:
    """Three dense hits 0.9, 0.8, 0.6 (cosine: normalized as is), documents a, a, b;
    threshold 0.7, no relaxation, no BM25 and no entities.

    slot        component                               weight   product
    top         0.9                                     0.30     0.270
    gap/margin  (0.9 - 0.7) / (1 - 0.7) = 0.6667        0.20     0.13333
    consensus   2 hits > 0.75, full at 5: 2/5 = 0.4     0.15     0.060
    agreement   needs BM25: missing                     (0.15)   -
    spread      support = (0.9 + 0.8 + 0.6) / 3 = 0.7667 0.10    0.07667
    graph       entity coverage: missing                (0.05)   -
    diversity   1 - 2 documents / 3 hits = 0.3333       0.05     0.01667
                                              sum of weights 0.80, products 0.55667
    confidence = 0.55667 / 0.80 = 0.695833
    """
    engine = ConfidenceEngine(
        ConfidenceConfig(scorer="weighted", similarity_threshold=0.7, min_results=0)
    )
    hits = HitScores(dense=np.array([0.9, 0.8, 0.6]), metric="cosine", doc_ids=["a", "a", "b"])
    a = engine.assess(hits)
    assert a.confidence == pytest.approx(0.556666667 / 0.80, abs=1e-9)
    assert a.confidence == pytest.approx(0.695833, abs=1e-6)
    assert a.match_count == 2  # 0.6 is below the threshold
    assert a.status == "low_confidence"  # 0.50 <= 0.6958 < 0.70


def test_weighted_score_with_every_slot() -> None:
    """All seven slots available, threshold 0.7:

    0.30 x 0.9 + 0.20 x (0.2 / 0.3) + 0.15 x 0.5 + 0.15 x 0.8 + 0.10 x 0.7
    + 0.05 x 1.0 + 0.05 x (1 - 0.5)
    = 0.27 + 0.133333 + 0.075 + 0.12 + 0.07 + 0.05 + 0.025 = 0.743333
    """
    signals = dict.fromkeys(SIGNAL_NAMES, math.nan)
    signals.update(
        top_score=0.9,
        consensus=0.5,
        agreement=0.8,
        support=0.7,
        entity_coverage=1.0,
        document_diversity=0.5,
    )
    row = np.array([[signals[name] for name in SIGNAL_NAMES]])
    one = ScoringInputs(
        row, kept_mean=np.array([0.8]), kept_count=np.array([2]), threshold=np.array([0.7])
    )
    assert WeightedScorer().score(one)[0] == pytest.approx(0.743333333, abs=1e-9)
    # Without kept hits there is nothing to be confident about, whatever the signals.
    empty = ScoringInputs(
        row, kept_mean=np.array([0.0]), kept_count=np.array([0]), threshold=np.array([0.7])
    )
    assert WeightedScorer().score(empty)[0] == 0.0
