"""Reader signals in the confidence engine: sentence_match and term_coverage.

They reach the signal matrix from per-hit reader scores, the batch and
one-query paths agree on them, missing values are imputed, and an artifact
fit without them scores exactly as before whether or not they are present.
"""

from __future__ import annotations

from typing import Any

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
from ragsift.confidence.features import READER_FEATURES, feature_matrix
from ragsift.confidence.signals import (
    SIGNAL_INDEX,
    SIGNAL_NAMES,
    compute_signal_matrix,
    compute_signals,
)
from ragsift.retrieval.engines import packaged_calibration_path

EMBEDDER = "onnx-all-MiniLM-L6-v2-int8-384"
DENSE = np.array([0.62, 0.48, 0.41, 0.30])
SPARSE = np.array([9.0, 4.0, 6.0, 1.0])
SENTENCE = np.array([0.55, 0.81, np.nan, np.nan])  # the top two hits were read
COVERAGE = np.array([0.40, 1.00, 0.25, 0.0])


def hits(*, reader: bool) -> HitScores:
    return HitScores(
        dense=DENSE,
        sparse=SPARSE,
        doc_ids=["a", "b", "c", "d"],
        sentence_scores=SENTENCE if reader else None,
        term_coverage=COVERAGE if reader else None,
    )


# Keeps the top two hits (as the artifact's fitted bar would in the pipeline).
CONFIG = ConfidenceConfig(embedder_id=EMBEDDER, similarity_threshold=0.38)


def artifact(features: tuple[str, ...], coefficients: tuple[float, ...]) -> CalibrationArtifact:
    return CalibrationArtifact(
        embedder_id=EMBEDDER,
        metric="cosine",
        features=features,
        coefficients=coefficients,
        intercept=-4.0,
        similarity_threshold=0.38,
        conformal=ConformalSpec(
            alpha=0.1, delta=0.1, threshold=0.4, feasible=True, method="test", n_calibration=0
        ),
        data=DataSummary(source="test", n_examples=0),
    )


def test_reader_signals_are_the_best_read_hit() -> None:
    s = compute_signals(hits(reader=True))
    assert s.sentence_match == pytest.approx(0.81)
    assert s.term_coverage == pytest.approx(1.0)
    plain = compute_signals(hits(reader=False))
    assert plain.sentence_match is None
    assert plain.term_coverage is None


def test_reader_signals_clip_to_the_unit_interval_and_ignore_unread_hits() -> None:
    h = HitScores(dense=np.array([0.5, 0.4]), sentence_scores=np.array([-0.3, np.nan]))
    assert compute_signals(h).sentence_match == 0.0
    unread = HitScores(dense=np.array([0.5]), sentence_scores=np.array([np.nan]))
    assert compute_signals(unread).sentence_match is None


def test_one_query_scores_its_reader_signals_as_in_a_batch() -> None:
    engine = ConfidenceEngine(
        CONFIG,
        calibration=artifact(("top_score", "sentence_match", "term_coverage"), (3.0, 2.0, 1.0)),
    )
    queries = [hits(reader=True), hits(reader=False), HitScores.empty()]
    one = [engine.assess(h) for h in queries]
    assert one[0].confidence > 0
    assert one[0].signals.sentence_match is not None
    assert one[1].signals.sentence_match is None
    many = engine.assess_many(queries)
    batch = engine.assess_batch(queries[:2])
    for i, a in enumerate(one):
        assert a.to_dict() == many[i].to_dict()
        if i < 2:
            assert a.to_dict() == batch.item(i).to_dict()


def test_reader_signals_raise_confidence_of_a_model_that_uses_them() -> None:
    engine = ConfidenceEngine(
        CONFIG,
        calibration=artifact(("top_score", "sentence_match", "term_coverage"), (3.0, 2.0, 1.0)),
    )
    better = HitScores(
        dense=DENSE, sparse=SPARSE, sentence_scores=SENTENCE + 0.1, term_coverage=COVERAGE
    )
    base = engine.assess(hits(reader=True)).confidence
    assert 0.0 < base < engine.assess(better).confidence


def test_missing_reader_signals_are_imputed_from_top_score_and_one() -> None:
    row = compute_signal_matrix(HitBatch.from_hits([hits(reader=False)]), ConfidenceConfig())
    x = feature_matrix(row, ("top_score", "sentence_match", "term_coverage"))
    assert x[0, 1] == x[0, 0]  # sentence_match <- top_score
    assert x[0, 2] == 1.0  # term_coverage <- 1


def test_old_artifacts_score_identically_with_or_without_reader_scores() -> None:
    # The packaged artifacts read term coverage since ADR 020: drop it to get an
    # artifact of the retrieval features only, as fitted before either reader signal.
    path = packaged_calibration_path(EMBEDDER)
    assert path is not None
    shipped = CalibrationArtifact.from_json(path.read_bytes())
    keep = [i for i, f in enumerate(shipped.features) if f not in READER_FEATURES]
    old = shipped.model_copy(
        update={
            "features": tuple(shipped.features[i] for i in keep),
            "coefficients": tuple(shipped.coefficients[i] for i in keep),
        }
    )
    assert not READER_FEATURES.intersection(old.features)
    engine = ConfidenceEngine(CONFIG, calibration=old)
    with_reader = engine.assess_batch([hits(reader=True)] * 3)
    without = engine.assess_batch([hits(reader=False)] * 3)
    assert (without.confidence > 0).all()
    np.testing.assert_array_equal(with_reader.confidence, without.confidence)
    one = engine.assess(hits(reader=True)).confidence
    assert one == engine.assess(hits(reader=False)).confidence
    # The retrieval signals keep their columns and values.
    reader = ("sentence_match", "term_coverage", "token_match")
    before = [SIGNAL_INDEX[n] for n in SIGNAL_NAMES if n not in reader]
    assert before == list(range(13))
    np.testing.assert_array_equal(with_reader.signals[:, :13], without.signals[:, :13])


def test_old_artifact_json_still_loads_with_its_version() -> None:
    path = packaged_calibration_path("ragsift-hashing-v1-384")
    assert path is not None
    text = path.read_bytes()
    loaded = CalibrationArtifact.from_json(text)
    assert loaded.version == loaded.content_hash()


def test_reader_coefficients_must_be_nonnegative() -> None:
    with pytest.raises(ValueError, match="coefficient of 'sentence_match' must be >= 0"):
        artifact(("top_score", "sentence_match"), (1.0, -0.5))


@pytest.mark.parametrize(
    ("field", "values", "message"),
    [
        ("sentence_scores", np.array([0.5]), "same length"),
        ("term_coverage", np.array([0.5, np.inf, 0.1, 0.2]), "finite or NaN"),
        ("sentence_scores", np.zeros((4, 2)), "must be 1-D"),
    ],
)
def test_bad_reader_scores_are_refused(field: str, values: np.ndarray, message: str) -> None:
    reader: dict[str, Any] = {field: values}
    with pytest.raises(ConfidenceError, match=message):
        HitScores(dense=DENSE, **reader)
