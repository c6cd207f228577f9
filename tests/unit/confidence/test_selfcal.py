"""Label-free self-calibration: pseudo-queries, the question bank, the re-map, provenance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragsift.confidence import CalibrationArtifact, ConfidenceError, Provenance
from ragsift.confidence.selfcal import MIN_NEGATIVES, MIN_POSITIVES, recalibrate
from ragsift.confidence.signals import SIGNAL_INDEX, SIGNAL_NAMES
from ragsift.evaluation.selfcal import out_of_domain_questions, pseudo_query
from ragsift.ingest.sample import DEMO_QUERIES
from ragsift.retrieval.engines import packaged_calibration_path

SHIPPED = CalibrationArtifact.from_json(
    Path(str(packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8-384"))).read_bytes()
)
PROVENANCE = Provenance(method="test", base_version=SHIPPED.version, collection="docs")


def signals(top: np.ndarray) -> np.ndarray:
    """A signal matrix whose score signals all equal ``top`` (one row per query)."""
    out = np.zeros((top.size, len(SIGNAL_NAMES)))
    for name in ("top_score", "support", "consensus", "agreement"):
        out[:, SIGNAL_INDEX[name]] = top
    return out


def test_a_pseudo_query_is_not_a_verbatim_substring_of_its_chunk() -> None:
    chunk = (
        "Every Orbit thermostat carries a 2-year limited warranty from the date of delivery."
        " It covers defects in materials and workmanship under normal use."
    )
    rng = np.random.default_rng(0)
    made = [pseudo_query(chunk, rng) for _ in range(20)]
    assert all(m is not None for m in made)
    for m in made:
        assert m is not None
        assert m not in chunk
        assert 3 <= len(m.split()) <= 10
        assert set(m.split()) <= set(chunk.replace(".", "").split())


def test_a_chunk_without_a_real_sentence_gives_no_pseudo_query() -> None:
    rng = np.random.default_rng(0)
    assert pseudo_query("ok. yes. no.", rng) is None
    assert pseudo_query("", rng) is None
    # Non-Latin text and control characters are words like any other.
    assert pseudo_query("Привет мир\x00 это длинное предложение здесь", rng) is not None


def test_the_question_bank_is_varied_and_keeps_the_demo_honest() -> None:
    bank = out_of_domain_questions()
    assert len(bank) >= 200
    assert len(set(bank)) == len(bank)
    assert all(q.endswith("?") for q in bank)
    # The demo's out-of-scope rows must be refused on their own merit, not memorized.
    assert not {q.text for q in DEMO_QUERIES} & set(bank)


def test_recalibrate_rescales_the_shipped_model_and_recertifies_its_threshold() -> None:
    rng = np.random.default_rng(1)
    # A collection whose answerable queries score lower than SQuAD's: the shipped
    # model would refuse most of them.
    pos, neg = rng.uniform(0.35, 0.55, 200), rng.uniform(0.05, 0.3, 200)
    labels = np.r_[np.ones(200), np.zeros(200)]
    adjusted = recalibrate(SHIPPED, signals(np.r_[pos, neg]), labels, provenance=PROVENANCE)

    scale = np.array(adjusted.coefficients) / np.array(SHIPPED.coefficients).clip(1e-12)
    nonzero = np.array(SHIPPED.coefficients) > 0
    assert np.allclose(scale[nonzero], scale[nonzero][0])  # one temperature: ranking kept
    assert scale[nonzero][0] > 0
    assert adjusted.similarity_threshold == SHIPPED.similarity_threshold
    assert adjusted.features == SHIPPED.features
    assert adjusted.conformal.feasible
    assert adjusted.provenance is not None
    assert adjusted.provenance.base_version == SHIPPED.version
    assert (adjusted.provenance.positives, adjusted.provenance.negatives) == (200, 200)
    assert adjusted.version != SHIPPED.version
    # The round trip keeps the version (provenance is part of the content hash).
    assert CalibrationArtifact.from_json(adjusted.to_json()).version == adjusted.version


def test_recalibrate_refuses_too_few_pseudo_labels() -> None:
    labels = np.r_[np.ones(MIN_POSITIVES - 1), np.zeros(MIN_NEGATIVES + 10)]
    with pytest.raises(ConfidenceError, match=f"at least {MIN_POSITIVES} answerable"):
        recalibrate(SHIPPED, signals(np.full(labels.size, 0.5)), labels, provenance=PROVENANCE)


def test_artifacts_without_provenance_keep_their_version() -> None:
    # Every shipped file still loads (its stored version is checked against its content).
    for name in ("onnx-all-MiniLM-L6-v2-int8-384", "ragsift-hashing-v1-384"):
        path = packaged_calibration_path(name)
        assert path is not None
        artifact = CalibrationArtifact.from_json(path.read_bytes())
        assert artifact.provenance is None
        # Written again, it is the file it was (`calibrate --dataset` output unchanged).
        assert json.loads(artifact.to_json()) == json.loads(path.read_text())


def test_a_small_sample_with_few_positives_can_still_be_certified() -> None:
    # A 12-chunk collection's self-calibration: ~55 answerable test questions, all
    # confident, and 150 unanswerable ones, all not. The walk used to start where 100
    # were answered (so 45 of them wrong) and found nothing: every query refused.
    from ragsift.confidence.conformal import conformal_threshold

    conf = np.r_[np.full(55, 0.95), np.full(150, 0.02)]
    labels = np.r_[np.ones(55), np.zeros(150)]
    result = conformal_threshold(conf, labels, alpha=0.1, delta=0.1)
    assert result.feasible
    assert 0.02 < result.threshold <= 0.95
    assert result.risk_upper_bound is not None
    assert result.risk_upper_bound <= 0.1


def test_a_few_hundred_labels_certify_without_a_perfect_ranking() -> None:
    # ADR 034: 200 feedback labels at SQuAD's mix hold ~50 right answers. A walk that
    # starts where as many are answered as are right needs them all ranked first;
    # three wrong ones among them (AUROC 0.99) left nothing certified.
    from ragsift.confidence.conformal import conformal_threshold

    conf = np.r_[np.full(25, 0.95), np.full(3, 0.90), np.full(25, 0.85), np.full(147, 0.10)]
    labels = np.r_[np.ones(25), np.zeros(3), np.ones(25), np.zeros(147)]
    result = conformal_threshold(conf, labels, alpha=0.1, delta=0.1)
    assert result.feasible
    assert 0.90 < result.threshold <= 0.95  # the 25 ranked first, none of the three
    assert result.risk_upper_bound is not None
    assert result.risk_upper_bound <= 0.1


def test_a_small_sample_never_starts_where_no_answer_could_certify() -> None:
    # 30 right answers: half of them (15) could not certify alpha = 0.1 even with no
    # wrong one (that takes 22 at delta = 0.1), so the walk starts at 22.
    from ragsift.confidence.conformal import conformal_threshold

    conf = np.r_[np.linspace(0.99, 0.70, 30), np.full(100, 0.05)]
    labels = np.r_[np.ones(30), np.zeros(100)]
    result = conformal_threshold(conf, labels, alpha=0.1, delta=0.1)
    assert result.feasible
    assert result.coverage * conf.size >= 22
