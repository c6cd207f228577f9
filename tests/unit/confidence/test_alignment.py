"""A collection's scores aligned to the calibration corpus's scale on its probes (ADR 024)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragsift.confidence import ConfidenceEngine, ConfidenceError, HitBatch
from ragsift.confidence.alignment import (
    BM25_DEAD_ZONE,
    DENSE_DEAD_ZONE,
    MAX_BM25_SCALE,
    MAX_DENSE_OFFSET,
    ProbeLevels,
    ScoreAlignment,
    align,
    aligned_params,
    probe_levels,
)
from ragsift.confidence.artifact import CalibrationArtifact, load_calibration
from ragsift.confidence.normalize import NormalizationParams, normalize_scores
from ragsift.evaluation.probes import aligned_on_probes, with_levels
from ragsift.evaluation.scoring import served_config
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.retrieval.hit_scores import hit_scores
from ragsift.retrieval.records import SearchHit
from tests.factories import search_hit

SQUAD = ProbeLevels(dense=0.284, bm25=9.65, probes=1800)
HANDBOOK = ProbeLevels(dense=0.105, bm25=2.51, probes=3480)


def _shipped() -> CalibrationArtifact:
    path = packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8-384")
    assert path is not None
    return load_calibration(path)


def _hit(rank: int, dense: float, sparse: float) -> SearchHit:
    return search_hit(rank, dense, sparse, text="refunds are paid within five days")


def test_a_collection_whose_probes_score_lower_is_raised_to_the_reference() -> None:
    moved = align(SQUAD, HANDBOOK)
    # only the part of each gap past what corpus size alone opens
    assert moved.dense_offset == pytest.approx(0.179 - DENSE_DEAD_ZONE)
    assert moved.bm25_scale == pytest.approx(9.65 / 2.51 / BM25_DEAD_ZONE, abs=1e-4)
    assert moved.levels == HANDBOOK
    assert "cosine +0.109" in moved.describe()


def test_a_gap_the_size_of_squads_own_corpora_moves_nothing() -> None:
    # SQuAD's half-2 paragraphs (351) against the fit's 581, and the same with half
    # of them left out: their probes sit lower, by what corpus size alone does
    for dense, bm25 in ((0.2827, 9.8974), (0.2618, 8.4273)):
        moved = align(
            ProbeLevels(dense=0.322, bm25=11.3308, probes=400),
            ProbeLevels(dense=dense, bm25=bm25, probes=3479),
        )
        assert (moved.dense_offset, moved.bm25_scale) == (0.0, 1.0)


def test_alignment_only_raises_a_channel_never_lowers_it() -> None:
    # Probes scoring higher than on the calibration corpus (short chunks): the
    # probe re-map lowers the confidence there; the scale stays.
    higher = ProbeLevels(dense=0.34, bm25=11.7, probes=3480)
    moved = align(SQUAD, higher)
    assert (moved.dense_offset, moved.bm25_scale) == (0.0, 1.0)
    mixed = align(SQUAD, ProbeLevels(dense=0.1, bm25=12.0, probes=500))
    assert mixed.dense_offset == pytest.approx(0.184 - DENSE_DEAD_ZONE)
    assert mixed.bm25_scale == 1.0


def test_the_move_is_capped_and_a_bm25_level_near_zero_reads_no_scale() -> None:
    far = align(SQUAD, ProbeLevels(dense=-0.5, bm25=0.6, probes=300))
    assert far.dense_offset == MAX_DENSE_OFFSET
    assert far.bm25_scale == MAX_BM25_SCALE
    silent = align(SQUAD, ProbeLevels(dense=0.1, bm25=0.1, probes=300))
    assert silent.bm25_scale == 1.0  # the probes share almost no word with it


def test_probe_levels_are_medians_and_a_channel_that_found_nothing_counts_zero() -> None:
    levels = probe_levels([0.1, 0.3, None, 0.5], [4.0, None, 2.0, 8.0])
    assert levels == ProbeLevels(dense=0.2, bm25=3.0, probes=4)
    with pytest.raises(ValueError, match="one dense and one BM25"):
        probe_levels([], [])
    with pytest.raises(ValueError, match="one dense and one BM25"):
        probe_levels([0.1], [1.0, 2.0])


def test_aligned_params_move_the_dense_and_bm25_formulas() -> None:
    base = NormalizationParams()
    assert aligned_params(base, None) is base
    moved = aligned_params(base, align(SQUAD, HANDBOOK))
    cos = normalize_scores(np.array([0.358, 0.95, -0.2]), "cosine", moved)
    assert cos == pytest.approx([0.467, 1.0, 0.0])
    bm25 = normalize_scores(np.array([4.3]), "bm25", moved)
    scaled = 4.3 * align(SQUAD, HANDBOOK).bm25_scale
    assert bm25 == pytest.approx([scaled / (scaled + 10.0)], abs=1e-4)
    for metric, raw in (("dot", 0.3), ("euclid", 1.0)):  # euclid 1.0 is a cosine of 0.5
        plain = normalize_scores(np.array([raw]), metric, base)
        assert normalize_scores(np.array([raw]), metric, moved) == pytest.approx(plain + 0.109)


@pytest.mark.parametrize("offset", [float("nan"), 1.5, -2.0])
def test_an_offset_outside_the_scale_is_refused(offset: float) -> None:
    with pytest.raises(ConfidenceError, match="dense_offset"):
        NormalizationParams(dense_offset=offset)


def test_unset_parts_leave_an_artifacts_version_and_file_unchanged() -> None:
    shipped = _shipped()
    assert shipped.probe_levels is not None  # the shipped fits measure their zero
    text = shipped.to_json()
    assert "alignment" not in text
    assert CalibrationArtifact.from_json(text).version == shipped.version
    older = json.loads(text)
    del older["probe_levels"]  # a file written before ADR 024
    unmeasured = CalibrationArtifact.model_validate({**older, "version": ""})
    assert "probe_levels" not in unmeasured.to_json()
    assert CalibrationArtifact.from_json(unmeasured.to_json()).version == unmeasured.version


def test_an_aligned_artifact_round_trips_and_has_its_own_version() -> None:
    shipped = _shipped()
    data = {**shipped.model_dump(mode="json"), "version": "", "probe_levels": SQUAD.model_dump()}
    based = CalibrationArtifact.model_validate(data)
    aligned = CalibrationArtifact.model_validate(
        {**data, "alignment": align(SQUAD, HANDBOOK).model_dump()}
    )
    assert len({shipped.version, based.version, aligned.version}) == 3
    again = CalibrationArtifact.from_json(aligned.to_json())
    assert again == aligned
    assert served_config(again).normalization.dense_offset == pytest.approx(0.109)
    assert served_config(based).normalization == served_config(shipped).normalization


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("dense_offset", -0.1, "greater than or equal to 0"),
        ("dense_offset", 0.9, "less than or equal to 0.3"),
        ("bm25_scale", 0.5, "greater than or equal to 1"),
        ("bm25_scale", 1e9, "less than or equal to 8"),
        ("dense_offset", "NaN", "finite number"),
    ],
)
def test_a_hostile_alignment_in_a_file_is_one_clear_error(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    data = json.loads(_shipped().to_json())
    data["alignment"] = {**align(SQUAD, HANDBOOK).model_dump(), field: value}
    # the version is checked after the content: a valid file with an edited field
    # fails on its version, an invalid one on the field
    with pytest.raises(ConfidenceError, match=rf"alignment\.{field}.*{message}"):
        CalibrationArtifact.from_json(json.dumps(data))


def test_the_aligned_artifact_reads_a_handbook_answer_as_the_calibration_would() -> None:
    # "How do I get a refund?" on the demo handbook: the right page at cosine 0.358,
    # BM25 4.3 (docs/adr/024). Read on SQuAD's scale it is refused; aligned, it is
    # what a SQuAD answer with the same margin over off-topic questions scores.
    shipped = _shipped()
    hits = [_hit(1, 0.358, 4.3), _hit(2, 0.223, 1.0), _hit(3, 0.179, 0.5)]
    scores = HitBatch.from_hits([hit_scores(hits, "hybrid", (), None)])
    aligned = CalibrationArtifact.model_validate(
        {
            **shipped.model_dump(mode="json"),
            "version": "",
            "probe_levels": SQUAD.model_dump(),
            "alignment": align(SQUAD, HANDBOOK).model_dump(),
        }
    )

    def confidence(artifact: CalibrationArtifact) -> float:
        engine = ConfidenceEngine(served_config(artifact), calibration=artifact)
        return float(engine.assess_batch(scores).confidence[0])

    before, after = confidence(shipped), confidence(aligned)
    assert after > before + 0.1
    assert after > shipped.conformal.threshold > before


def _probe_hits(dense: float, sparse: float, n: int) -> list[list[SearchHit]]:
    rng = np.random.default_rng(7)
    return [
        [_hit(1, dense + 0.05 * rng.standard_normal(), sparse * (1 + 0.1 * rng.random()))]
        for _ in range(n)
    ]


def test_probing_aligns_a_collection_to_the_levels_its_calibration_measured() -> None:
    hits = _probe_hits(0.105, 2.5, 400)
    groups = [f"g{i % 20}" for i in range(400)]
    queries = ["what is the capital of a country"] * 400
    unmeasured = CalibrationArtifact.model_validate(
        {**_shipped().model_dump(mode="json"), "version": "", "probe_levels": None}
    )
    # A calibration that measured no levels of its own: nothing to align to.
    same, conf = aligned_on_probes(unmeasured, hits, groups, queries=queries)
    assert same is unmeasured
    based = with_levels(unmeasured, _probe_hits(0.284, 9.65, 400), groups, queries=queries)
    assert based.probe_levels is not None
    assert based.probe_levels.dense == pytest.approx(0.284, abs=0.01)
    aligned, aligned_conf = aligned_on_probes(based, hits, groups, queries=queries)
    assert aligned.alignment is not None
    assert aligned.alignment.dense_offset == pytest.approx(0.109, abs=0.015)
    assert aligned.alignment.levels.probes == 400
    assert (aligned_conf >= conf - 1e-12).all()  # raised, never lowered
    off, _ = aligned_on_probes(based, hits, groups, queries=queries, enabled=False)
    assert off is based
    # Levels inside the dead zones: nothing moves, so nothing is stored.
    near, _ = aligned_on_probes(based, _probe_hits(0.27, 9.0, 400), groups, queries=queries)
    assert near is based
    # Too few probes outside the groups the collection answers: no alignment.
    few, _ = aligned_on_probes(based, hits[:50], groups[:50], queries=queries[:50])
    assert few is based


def test_an_aligned_artifact_is_no_base_for_probing_again() -> None:
    from ragsift.confidence.selfcal import unprobed_because

    aligned = CalibrationArtifact.model_validate(
        {
            **_shipped().model_dump(mode="json"),
            "version": "",
            "alignment": ScoreAlignment(
                dense_offset=0.1, bm25_scale=2.0, levels=HANDBOOK
            ).model_dump(),
        }
    )
    assert "re-certified on probes already" in (unprobed_because(aligned) or "")
