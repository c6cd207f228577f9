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
