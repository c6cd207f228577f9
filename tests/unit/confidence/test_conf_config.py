"""Configuration checks, levels, strategies, recommendations and errors."""

from __future__ import annotations

import numpy as np
import pytest

from ragsift.confidence import (
    ADVISORY_FLAGS,
    TASK_STRATEGIES,
    AdaptiveParams,
    AdvisoryThresholds,
    CalibrationMismatchError,
    ConfidenceConfig,
    ConfidenceError,
    LevelThresholds,
    WeightedWeights,
    compute_signals,
    disclaimer_for,
    strategy_for,
)
from ragsift.confidence.config import AdvisoryThresholds as _Adv
from ragsift.confidence.levels import advisory_codes, level_codes


def test_seed_defaults() -> None:
    cfg = ConfidenceConfig()
    assert (cfg.levels.high, cfg.levels.medium, cfg.levels.low) == (0.85, 0.70, 0.50)
    assert (cfg.advisory.high, cfg.advisory.advisory, cfg.advisory.low) == (0.9, 0.7, 0.5)
    assert (cfg.similarity_threshold, cfg.min_results, cfg.relax_fraction) == (0.70, 3, 0.10)
    assert cfg.adaptive == AdaptiveParams(0.2, 0.7, 1, 8, 0.6, 0.4)
    assert cfg.weights.as_tuple() == (0.30, 0.20, 0.15, 0.15, 0.10, 0.05, 0.05)
    assert cfg.min_documents == 2
    assert cfg.scorer == "calibrated"
    assert cfg.source_quality["government"] == pytest.approx(1.0)
    assert cfg.source_quality_of("tabloid") == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ConfidenceConfig(top_k=0), "top_k must be > 0, got 0"),
        (
            lambda: ConfidenceConfig(similarity_threshold=1.2),
            r"similarity_threshold must be in \[0, 1\], got 1.2",
        ),
        (lambda: ConfidenceConfig(scorer="magic"), "got 'magic'"),  # type: ignore[arg-type]
        (lambda: ConfidenceConfig(metric="bm25"), "metric must be one of"),  # type: ignore[arg-type]
        (lambda: LevelThresholds(high=0.6, medium=0.7, low=0.5), "high > medium > low"),
        (lambda: AdvisoryThresholds(high=0.9, advisory=0.95, low=0.5), "high > advisory > low"),
        (lambda: WeightedWeights(top=0.5), "weights must sum to 1"),
        (lambda: AdaptiveParams(min_k=3, max_k=2), r"max_k must be >= min_k \(3\), got 2"),
        (lambda: ConfidenceConfig(min_results=-1), "min_results must be >= 0, got -1"),
    ],
)
def test_constructors_name_the_bad_value(build: object, message: str) -> None:
    with pytest.raises(ConfidenceError, match=message):
        build()  # type: ignore[operator]


def test_level_and_advisory_boundaries_are_inclusive() -> None:
    conf = np.array([0.95, 0.9, 0.85, 0.849, 0.7, 0.69, 0.5, 0.49])
    assert level_codes(conf, LevelThresholds()).tolist() == [0, 0, 0, 1, 1, 2, 2, 3]
    flags = [ADVISORY_FLAGS[c] for c in advisory_codes(conf, _Adv())]
    assert flags[:3] == ["HIGH_CONFIDENCE", "HIGH_CONFIDENCE", "MEDIUM_CONFIDENCE"]
    assert flags[-2:] == ["LOW_CONFIDENCE", "VERY_LOW_CONFIDENCE"]
    no_hits = level_codes(np.array([0.99]), LevelThresholds(), np.array([0]))
    assert no_hits.tolist() == [3]


def test_task_strategies_table() -> None:
    table = {k: (s.confidence_threshold, s.min_k, s.max_k) for k, s in TASK_STRATEGIES.items()}
    assert table == {
        "debugging": (0.6, 2, 8),
        "code_review": (0.7, 1, 5),
        "architecture": (0.5, 2, 8),
        "explanation": (0.8, 1, 4),
        "testing": (0.7, 1, 5),
        "devops": (0.6, 1, 6),
        "ml_engineering": (0.6, 2, 8),
        "general": (0.7, 1, 5),
    }
    assert strategy_for("poetry") == TASK_STRATEGIES["general"]
    assert strategy_for(None).to_dict()["task"] == "general"


def test_disclaimers_per_status() -> None:
    assert disclaimer_for("high_confidence", 0.9).text is None
    assert "75% confidence" in (disclaimer_for("medium_confidence", 0.75).text or "")
    assert "exploratory" in (disclaimer_for("low_confidence", 0.55).text or "")
    assert "current data only" in (disclaimer_for("no_relevant_context", 0.1).text or "")


def test_signals_breakdown_of_a_hybrid_list() -> None:
    from ragsift.confidence import HitScores

    hits = HitScores(
        dense=np.array([0.9, 0.8, 0.2]),
        sparse=np.array([30.0, 10.0, 1.0]),
        doc_ids=["a", "a", "b"],
    )
    s = compute_signals(hits)
    assert s.top_score == pytest.approx(0.9)
    assert s.score_gap == pytest.approx(0.1)
    assert s.consensus_count == 2
    assert s.support == pytest.approx((0.9 + 0.8 + 0.2) / 3)
    assert s.agreement == pytest.approx(min(0.9, 30 / 40))
    assert s.bm25_dense_correlation is not None
    assert s.bm25_dense_correlation > 0.9
    assert s.document_diversity == pytest.approx(2 / 3)
    assert s.entity_coverage is None


def test_mismatch_error_carries_fields() -> None:
    err = CalibrationMismatchError(
        expected_embedder="a", actual_embedder="b", expected_metric="cosine", actual_metric="cosine"
    )
    assert isinstance(err, ValueError)
    assert "embedder 'b' (running 'a')" in str(err)
    assert "metric" not in str(err).split(";")[0]
