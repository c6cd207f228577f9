"""Evaluation metrics against scikit-learn and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from ragsift.confidence import (
    ConfidenceError,
    aurc,
    auroc,
    brier_score,
    ece_by_chance,
    expected_calibration_error,
    refusal_quality,
    risk_coverage_curve,
)


def test_auroc_matches_sklearn_with_ties() -> None:
    rng = np.random.default_rng(0)
    conf = np.round(rng.random(500), 1)
    labels = (rng.random(500) < conf).astype(int)
    assert auroc(conf, labels) == pytest.approx(roc_auc_score(labels, conf))
    assert math.isnan(auroc([0.1, 0.2], [1, 1]))


def test_ece_is_zero_for_perfect_bins_and_large_for_overconfidence() -> None:
    assert expected_calibration_error([0.25] * 4, [1, 0, 0, 0]) == pytest.approx(0.0)
    assert expected_calibration_error([0.95] * 10, [0] * 10) == pytest.approx(0.95)
    with pytest.raises(ConfidenceError, match="n_bins must be > 0, got 0"):
        expected_calibration_error([0.5], [1], n_bins=0)


def test_ece_by_chance_matches_a_loop_of_calibrated_draws_and_shrinks_with_n() -> None:
    rng = np.random.default_rng(3)
    conf = rng.random(60)
    # the same draws, one ECE at a time: the vectorised bins must agree with the metric
    draws = np.random.default_rng(0).random((400, conf.size)) < conf
    looped = [expected_calibration_error(conf, d.astype(float)) for d in draws]
    assert ece_by_chance(conf) == pytest.approx(np.quantile(looped, 0.95))
    assert ece_by_chance(conf, quantile=0.5) == pytest.approx(np.median(looped))
    # a calibrated scorer's chance ECE falls like 1/sqrt(n): 60 questions are not 6,000
    assert ece_by_chance(conf) > 0.1 > 0.03 > ece_by_chance(rng.random(6000))
    # certain confidences leave nothing to chance
    assert ece_by_chance([0.0, 1.0, 1.0]) == 0.0
    assert ece_by_chance([]) == 0.0
    with pytest.raises(ConfidenceError, match="0 < quantile < 1"):
        ece_by_chance(conf, quantile=1.0)


def test_risk_coverage_and_aurc() -> None:
    curve = risk_coverage_curve([0.9, 0.8, 0.1], [1, 0, 0])
    assert curve.coverage.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert curve.risk.tolist() == pytest.approx([0.0, 0.5, 2 / 3])
    assert aurc([0.9, 0.8, 0.1], [1, 0, 0]) == pytest.approx((0 + 0.5 + 2 / 3) / 3)
    assert curve.to_dict()["threshold"] == [0.9, 0.8, 0.1]


def test_brier_and_refusal_quality() -> None:
    assert brier_score([1.0, 0.0], [1, 1]) == pytest.approx(0.5)
    q = refusal_quality([True, True, False, False], [True, False, True, False])
    assert (q.precision, q.recall, q.refusal_rate, q.n) == (0.5, 0.5, 0.5, 4)


def test_labels_must_be_binary() -> None:
    with pytest.raises(ConfidenceError, match="labels must be 0 or 1"):
        auroc([0.1], [2])
