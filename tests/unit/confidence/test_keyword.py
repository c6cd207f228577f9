"""The keyword model (ADR 029): keyword-only queries, which rank by BM25, are scored
by the artifact's own keyword model and certified threshold; artifacts without one
score them with the weighted rule as before, and re-ranked ones still do."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragsift.confidence import CalibrationArtifact, ConfidenceError, HitScores
from ragsift.confidence.alignment import ProbeLevels, ScoreAlignment
from ragsift.confidence.artifact import ConformalSpec, DataSummary
from ragsift.confidence.keyword import KeywordFit
from ragsift.retrieval.engines import EngineSet
from ragsift.settings import ConfidenceSettings

EMBEDDER = "onnx-all-MiniLM-L6-v2-int8-384"
PART = KeywordFit(
    features=("top_score", "support", "consensus", "term_coverage"),
    coefficients=(20.0, 0.0, 0.5, 5.0),
    intercept=-16.0,
    similarity_threshold=0.55,
    conformal=ConformalSpec(
        alpha=0.1, delta=0.1, threshold=0.6, feasible=True, method="test", n_calibration=500
    ),
)


def artifact(keyword: KeywordFit | None, **extra: object) -> CalibrationArtifact:
    return CalibrationArtifact(
        embedder_id=EMBEDDER,
        metric="cosine",
        features=("top_score", "support", "consensus", "agreement"),
        coefficients=(6.0, 0.0, 5.0, 12.0),
        intercept=-11.0,
        similarity_threshold=0.37,
        conformal=ConformalSpec(
            alpha=0.1, delta=0.1, threshold=0.69, feasible=True, method="test", n_calibration=0
        ),
        data=DataSummary(source="test", n_examples=0),
        keyword=keyword,
        **extra,  # type: ignore[arg-type]
    )


def bm25_hits(*scores: float) -> HitScores:
    return HitScores(sparse=np.array(scores), doc_ids=[f"d{i}" for i in range(len(scores))])


def test_an_artifact_keeps_its_version_without_the_part_and_round_trips_with_it() -> None:
    old = artifact(None)
    assert '"keyword"' not in old.to_json()
    new = artifact(PART)
    assert new.version != old.version
    again = CalibrationArtifact.from_json(new.to_json())
    assert again.keyword == PART
    assert again.version == new.version


def test_the_keyword_view_reads_the_part_and_keeps_what_names_the_artifact() -> None:
    levels = ProbeLevels(dense=0.2, bm25=8.0, probes=40)
    alignment = ScoreAlignment(dense_offset=0.05, bm25_scale=1.5, levels=levels)
    aligned = artifact(PART, alignment=alignment)
    view = aligned.keyword_model()
    assert view is not None
    assert (view.metric, view.version, view.embedder_id) == ("bm25", aligned.version, EMBEDDER)
    assert (view.features, view.coefficients) == (PART.features, PART.coefficients)
    assert view.similarity_threshold == 0.55
    assert view.conformal == PART.conformal
    assert view.alignment == aligned.alignment  # the collection's BM25 scale stays
    assert view.keyword is None
    assert artifact(None).keyword_model() is None


def test_keyword_queries_are_scored_by_the_keyword_model_at_its_certified_bar() -> None:
    engines = EngineSet(ConfidenceSettings(), EMBEDDER, calibration=artifact(PART))
    keyword = engines.engine("threshold", "keyword")
    assert keyword.scorer.name == "calibrated"
    assert keyword.answer_threshold == 0.6
    assert keyword.config.similarity_threshold == 0.55
    strong, weak = keyword.assess(bm25_hits(40.0, 25.0)), keyword.assess(bm25_hits(12.0, 3.0))
    assert strong.scorer == "calibrated"
    assert strong.calibration_version == engines.calibration_version
    assert strong.confidence > weak.confidence  # BM25 40 -> 0.8 against 12 -> 0.55
    hybrid = engines.engine("threshold", "hybrid")
    assert hybrid.answer_threshold == 0.69
    assert hybrid.config.similarity_threshold == 0.37


def test_without_the_part_or_re_ranked_keyword_queries_keep_the_weighted_rule() -> None:
    old = EngineSet(ConfidenceSettings(), EMBEDDER, calibration=artifact(None))
    assert old.engine("threshold", "keyword").scorer.name == "weighted"
    new = EngineSet(ConfidenceSettings(), EMBEDDER, calibration=artifact(PART))
    assert new.engine("threshold", "keyword", reranked=True).scorer.name == "weighted"
    assert new.scored_with(new.calibration, "hybrid") is new.calibration
    view = new.scored_with(new.calibration, "keyword")
    assert view is not None
    assert view.metric == "bm25"


def test_an_operators_hit_bar_still_applies_to_keyword_queries() -> None:
    settings = ConfidenceSettings(similarity_threshold=0.2)
    engines = EngineSet(settings, EMBEDDER, calibration=artifact(PART))
    assert engines.engine("threshold", "keyword").config.similarity_threshold == 0.2


def test_a_keyword_view_refuses_cosine_hits() -> None:
    from ragsift.confidence import ConfidenceConfig, ConfidenceEngine
    from ragsift.confidence.errors import CalibrationMismatchError

    view = artifact(PART).keyword_model()
    config = ConfidenceConfig(embedder_id=EMBEDDER, scorer="calibrated")
    engine = ConfidenceEngine(config, calibration=view)
    with pytest.raises(CalibrationMismatchError):
        engine.assess(HitScores(dense=np.array([0.8]), doc_ids=["a"]))


@pytest.mark.parametrize(
    "part",
    [
        {"intercept": float("nan")},
        {"coefficients": [20.0, 0.0, 0.5, float("inf")]},
        {"coefficients": [-1.0, 0.0, 0.5, 5.0]},
        {"coefficients": [1.0]},
        {"features": ["top_score", "support", "consensus", "nope"]},
        {"similarity_threshold": 2.0},
        {"conformal": {"threshold": 0.5}},
        {"conformal": "x"},
        {"extra": 1},
        {"intercept": {"deep": [[[[1]]]]}},
        {"remap": {"x": [0.5, 0.1], "y": [0.0, 1.0]}},
        {"remap": {"x": [0.1, 0.5], "y": [0.0, 2.0]}},
    ],
)
def test_a_hostile_keyword_part_is_one_clear_artifact_error(part: dict[str, object]) -> None:
    data = json.loads(artifact(PART).to_json())
    data["keyword"] = {**data["keyword"], **part}
    with pytest.raises(ConfidenceError, match=r"invalid calibration artifact: .*keyword"):
        CalibrationArtifact.from_json(json.dumps(data))


def test_the_keyword_view_applies_the_parts_own_probe_remap_not_the_artifacts() -> None:
    from ragsift.confidence.probes import ProbeRemap

    lowered = ProbeRemap(x=(0.0, 1.0), y=(0.0, 0.5))
    hybrid = ProbeRemap(x=(0.0, 1.0), y=(0.0, 0.9))
    probed = artifact(PART.model_copy(update={"remap": lowered}), remap=hybrid)
    view = probed.keyword_model()
    assert view is not None
    assert view.remap == lowered
    assert artifact(PART, remap=hybrid).keyword_model().remap is None  # type: ignore[union-attr]
    engines = EngineSet(ConfidenceSettings(), EMBEDDER, calibration=probed)
    plain = EngineSet(ConfidenceSettings(), EMBEDDER, calibration=artifact(PART))
    hits = bm25_hits(40.0, 25.0)
    got = engines.engine("threshold", "keyword").assess(hits).confidence
    was = plain.engine("threshold", "keyword").assess(hits).confidence
    assert got == pytest.approx(min(was, 0.5 * was), abs=1e-6)


def test_a_weak_keyword_search_is_not_told_to_try_a_keyword_search() -> None:
    engines = EngineSet(ConfidenceSettings(), EMBEDDER, calibration=artifact(PART))
    weak = engines.engine("threshold", "keyword").assess(bm25_hits(9.0, 2.0))
    codes = [r.code for r in weak.recommendations]
    assert weak.status != "high_confidence"
    assert "expand_query" in codes
    assert "exact_keyword_search" not in codes
    dense = engines.engine("threshold", "dense").assess(
        HitScores(dense=np.array([0.4, 0.3]), doc_ids=["a", "b"])
    )
    assert "exact_keyword_search" in [r.code for r in dense.recommendations]
