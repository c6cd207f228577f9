"""The dense-only imputation (ADR 028): a query with no BM25 channel is imputed the
agreement its artifact fit for it, never more than the plain one (the top score);
hybrid queries and artifacts without the fit score exactly as before."""

from __future__ import annotations

import numpy as np
import pytest

from ragsift.confidence import (
    CalibrationArtifact,
    ConfidenceConfig,
    ConfidenceEngine,
    ConfidenceError,
    HitBatch,
    HitScores,
)
from ragsift.confidence.artifact import ConformalSpec, DataSummary
from ragsift.confidence.dense_only import DenseOnlyFit, fill_dense_only, fit_dense_only
from ragsift.confidence.scorers import CalibratedScorer
from ragsift.confidence.signals import SIGNAL_INDEX, SIGNAL_NAMES

EMBEDDER = "onnx-all-MiniLM-L6-v2-int8-384"
FEATURES = ("top_score", "support", "consensus", "agreement")
COEFFICIENTS = (2.0, 1.0, 1.0, 12.0)
INTERCEPT = -9.0
FIT = DenseOnlyFit(intercept=0.35, slope=0.34, n_examples=100, risk_upper_bound=0.09, coverage=0.2)
AGREE, TOP = SIGNAL_INDEX["agreement"], SIGNAL_INDEX["top_score"]


def artifact(dense_only: DenseOnlyFit | None) -> CalibrationArtifact:
    return CalibrationArtifact(
        embedder_id=EMBEDDER,
        metric="cosine",
        features=FEATURES,
        coefficients=COEFFICIENTS,
        intercept=INTERCEPT,
        similarity_threshold=0.3,
        conformal=ConformalSpec(
            alpha=0.1, delta=0.1, threshold=0.5, feasible=True, method="test", n_calibration=0
        ),
        data=DataSummary(source="test", n_examples=0),
        dense_only=dense_only,
    )


def signal_rows(tops: list[float], agreements: list[float]) -> np.ndarray:
    rows = np.full((len(tops), len(SIGNAL_NAMES)), np.nan)
    rows[:, TOP] = tops
    rows[:, SIGNAL_INDEX["support"]] = tops
    rows[:, SIGNAL_INDEX["consensus"]] = 0.5
    rows[:, AGREE] = agreements
    return rows


def test_the_imputation_never_exceeds_the_top_score_nor_falls_when_it_rises() -> None:
    top = np.linspace(0.0, 1.0, 201)
    imputed = FIT.impute(top)
    assert (imputed <= top).all()
    assert (imputed >= 0.0).all()
    assert (np.diff(imputed) >= 0).all()
    assert FIT.impute(np.array([0.8]))[0] == pytest.approx(0.35 + 0.34 * 0.8)


def test_fill_touches_only_dense_only_rows_whose_agreement_is_missing() -> None:
    rows = signal_rows([0.8, 0.8, 0.8], [np.nan, 0.7, np.nan])
    filled = fill_dense_only(rows, np.array([True, True, False]), FIT)
    assert filled[0, AGREE] == pytest.approx(0.35 + 0.34 * 0.8)
    assert filled[1, AGREE] == 0.7  # measured: kept
    assert np.isnan(filled[2, AGREE])  # not dense-only (keyword): left to the plain imputation
    assert np.isnan(rows[0, AGREE])  # the caller's matrix is not written to
    assert fill_dense_only(rows, True, None) is rows
    assert fill_dense_only(rows, False, FIT) is rows


def test_calibrated_scorer_lowers_only_dense_only_queries() -> None:
    rows = signal_rows([0.8, 0.8], [np.nan, np.nan])
    with_fit = CalibratedScorer(artifact(FIT))
    plain = CalibratedScorer(artifact(None))
    reports = [
        {name: float(v) for name, v in zip(SIGNAL_NAMES, row, strict=True) if v == v}
        for row in rows
    ]
    dense = with_fit.score_reported(reports, [2, 2], dense_only=[True, False])
    before = plain.score_reported(reports, [2, 2], dense_only=[True, False])
    assert dense[0] < dense[1]  # imputed below the top score
    assert dense[1] == before[1]  # not dense-only: as before
    assert before[0] == before[1]  # no fit: every missing agreement is the top score
    assert (with_fit.score_reported(reports, [2, 2]) == before).all()  # None: none dense-only


def test_engine_imputes_for_a_batch_without_bm25_and_not_with_it() -> None:
    dense = np.array([0.82, 0.71, 0.55])
    config = ConfidenceConfig(embedder_id=EMBEDDER, scorer="calibrated", similarity_threshold=0.3)
    with_fit = ConfidenceEngine(config, calibration=artifact(FIT))
    plain = ConfidenceEngine(config, calibration=artifact(None))
    only = HitBatch.from_hits([HitScores(dense=dense, doc_ids=["a", "b", "c"])])
    hybrid = HitBatch.from_hits(
        [HitScores(dense=dense, sparse=np.array([7.0, 3.0, 1.0]), doc_ids=["a", "b", "c"])]
    )
    assert with_fit.assess_batch(only).confidence[0] < plain.assess_batch(only).confidence[0]
    assert with_fit.assess_batch(hybrid).confidence[0] == plain.assess_batch(hybrid).confidence[0]


def test_artifact_keeps_its_version_without_the_fit_and_round_trips_with_it() -> None:
    old = artifact(None)
    assert "dense_only" not in old.to_json()
    new = artifact(FIT)
    assert new.version != old.version
    again = CalibrationArtifact.from_json(new.to_json())
    assert again.dense_only == FIT
    assert again.version == new.version


def synthetic(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Dense-only searches whose true agreement is min(0.3 + 0.4 x top, top) (labels drawn
    from it)."""
    rng = np.random.default_rng(seed)
    top = rng.uniform(0.3, 0.95, n)
    base = INTERCEPT + 3.0 * top  # the other features' terms
    z = base + 12.0 * np.minimum(0.3 + 0.4 * top, top)
    labels = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-z))).astype(float)
    kept = np.where(rng.uniform(size=n) < 0.95, 3, 0)
    return base, top, labels, kept


def test_fit_recovers_the_agreement_that_made_the_labels() -> None:
    base, top, labels, kept = synthetic(6000)
    fit = fit_dense_only(base, 12.0, top, labels, kept, threshold=0.5, alpha=0.5, delta=0.1)
    grid = np.linspace(0.3, 0.95, 14)
    assert np.abs(fit.impute(grid) - np.minimum(0.3 + 0.4 * grid, grid)).max() < 0.03
    assert fit.n_examples == 6000
    assert 0 < fit.coverage < 1
    assert fit.risk_upper_bound <= 0.5


def test_fit_is_cut_back_to_what_the_questions_certify() -> None:
    base, top, labels, kept = synthetic(3000, seed=1)
    loose = fit_dense_only(base, 12.0, top, labels, kept, threshold=0.5, alpha=0.9, delta=0.1)
    groups = [f"g{i % 40}" for i in range(top.size)]
    strict = fit_dense_only(
        base, 12.0, top, labels, kept, threshold=0.5, alpha=0.02, delta=0.1, groups=groups
    )
    # a tight target keeps less of the fit: lower agreements, fewer answered
    assert (strict.impute(top) <= loose.impute(top) + 1e-12).all()
    assert strict.coverage <= loose.coverage
    assert strict.slope < loose.slope


def test_fit_refuses_mismatched_or_empty_input() -> None:
    base, top, labels, kept = synthetic(50)
    with pytest.raises(ConfidenceError, match="one length"):
        fit_dense_only(base, 12.0, top[:-1], labels, kept, threshold=0.5, alpha=0.1, delta=0.1)
    with pytest.raises(ConfidenceError, match="kept a hit"):
        fit_dense_only(base, 12.0, top, labels, 0 * kept, threshold=0.5, alpha=0.1, delta=0.1)


def test_the_mix_reads_a_dense_only_query_as_the_hybrid_model_scores_it() -> None:
    """ADR 028: the scope's mix tables are histograms of hybrid confidences; a dense-only
    query is counted at the confidence the plain imputation gives, answered at its own."""
    from ragsift.retrieval.mix_watch import monitored_confidence

    config = ConfidenceConfig(embedder_id=EMBEDDER, scorer="calibrated", similarity_threshold=0.3)
    hits = HitScores(dense=np.array([0.82, 0.71, 0.55]), doc_ids=["a", "b", "c"])
    with_fit = ConfidenceEngine(config, calibration=artifact(FIT)).assess(hits)
    plain = ConfidenceEngine(config, calibration=artifact(None)).assess(hits)
    assert with_fit.confidence < plain.confidence
    seen = monitored_confidence(artifact(FIT), with_fit, dense_only=True)
    assert seen == pytest.approx(plain.confidence, abs=1e-9)
    assert monitored_confidence(artifact(FIT), with_fit, dense_only=False) == with_fit.confidence
    assert monitored_confidence(artifact(None), plain, dense_only=True) == plain.confidence


@pytest.mark.parametrize(
    "part",
    [
        {"intercept": float("nan")},
        {"slope": -0.1},
        {"slope": 1e308},
        {"intercept": 1e308},
        {"coverage": 2.0},
        {"n_examples": -1},
        {"risk_upper_bound": "x"},
        {"extra": 1},
        {"intercept": {"deep": [[[[1]]]]}},
    ],
)
def test_a_hostile_dense_only_part_is_one_clear_artifact_error(part: dict[str, object]) -> None:
    import json

    data = json.loads(artifact(FIT).to_json())
    data["dense_only"] = {**data["dense_only"], **part}
    with pytest.raises(ConfidenceError, match=r"invalid calibration artifact: .*dense_only"):
        CalibrationArtifact.from_json(json.dumps(data))
