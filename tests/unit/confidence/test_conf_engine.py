"""The engine end to end: seed A's worked example, selection modes, reasons, serialization."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest

from ragsift.confidence import (
    REFUSAL_SENTENCE,
    CalibrationMismatchError,
    ConfidenceConfig,
    ConfidenceEngine,
    ConfidenceError,
    HitBatch,
    HitScores,
    entity_matrix,
    load_default_calibration,
)

EngineFactory = Callable[..., ConfidenceEngine]
HitsFactory = Callable[..., HitScores]


def test_seed_a_worked_example(make_engine: EngineFactory, make_hits: HitsFactory) -> None:
    result = make_engine(scorer="mean-kept").assess(make_hits())
    assert result.match_count == 2
    assert result.kept_indices == (0, 2)
    assert result.confidence == pytest.approx(0.90)
    assert result.status == "high_confidence"
    assert (result.filtered_count, result.total_found) == (2, 4)
    assert result.stop_reason == "threshold"
    assert {d.hit_index: d.rule for d in result.dropped} == {
        1: "below_threshold",
        3: "below_threshold",
    }


def test_empty_hits_give_no_relevant_context(make_engine: EngineFactory) -> None:
    for scorer in ("weighted", "mean-kept", "composite", "calibrated"):
        result = make_engine(scorer=scorer).assess(HitScores.empty())
        assert result.status == "no_relevant_context"
        assert result.stop_reason == "no_results"
        assert result.confidence == 0.0
        assert result.chunks_retrieved == 0
        assert not result.answerability.is_answerable
        assert result.disclaimer.text is not None
        assert "No retrieved context was relevant enough" in result.disclaimer.text


def test_every_dropped_hit_has_rule_threshold_and_value(
    make_engine: EngineFactory, make_hits: HitsFactory
) -> None:
    result = make_engine(scorer="mean-kept").assess(make_hits())
    for reason in result.dropped:
        assert reason.rule == "below_threshold"
        assert reason.threshold == pytest.approx(0.63)  # relaxed: 0.70 x 0.9
        assert reason.value in (0.45, 0.35)
    assert result.relaxed


class TestMinResultsRelaxation:
    """A2 at its edges: min 3, threshold 0.70, relaxed bar 0.63."""

    def kept(self, scores: list[float], **cfg: object) -> tuple[int, ...]:
        engine = ConfidenceEngine(ConfidenceConfig(scorer="mean-kept", **cfg))  # type: ignore[arg-type]
        return engine.assess(HitScores(dense=np.array(scores))).kept_indices

    def test_enough_pass_no_relaxation(self) -> None:
        engine = ConfidenceEngine(ConfidenceConfig(scorer="mean-kept"))
        result = engine.assess(HitScores(dense=np.array([0.9, 0.8, 0.7, 0.65])))
        assert result.kept_indices == (0, 1, 2)
        assert not result.relaxed
        assert result.dropped[0].threshold == pytest.approx(0.70)

    def test_exactly_at_threshold_passes(self) -> None:
        assert self.kept([0.70, 0.70, 0.70, 0.1]) == (0, 1, 2)

    def test_relaxed_bar_is_inclusive(self) -> None:
        bar = 0.70 * 0.9
        assert self.kept([0.9, bar, 0.5]) == (0, 1)

    def test_just_below_relaxed_bar_is_dropped(self) -> None:
        bar = 0.70 * 0.9
        assert self.kept([0.9, np.nextafter(bar, 0.0), 0.5]) == (0,)

    def test_relaxation_caps_at_min_results(self) -> None:
        engine = ConfidenceEngine(ConfidenceConfig(scorer="mean-kept"))
        result = engine.assess(HitScores(dense=np.array([0.95, 0.69, 0.68, 0.67, 0.66])))
        assert result.kept_indices == (0, 1, 2)
        rules = {d.hit_index: (d.rule, d.limit) for d in result.dropped}
        assert rules == {3: ("min_results_cap", 3), 4: ("min_results_cap", 3)}

    def test_nothing_within_relaxed_bar_keeps_nothing(self) -> None:
        engine = ConfidenceEngine(ConfidenceConfig(scorer="mean-kept"))
        result = engine.assess(HitScores(dense=np.array([0.6, 0.5])))
        assert result.match_count == 0
        assert result.stop_reason == "no_results"
        assert result.status == "no_relevant_context"

    def test_min_results_zero_never_relaxes(self) -> None:
        assert self.kept([0.9, 0.65], min_results=0) == (0,)

    def test_fewer_hits_than_min_results(self) -> None:
        assert self.kept([0.8, 0.75]) == (0, 1)


def test_per_query_threshold_override(make_engine: EngineFactory, make_hits: HitsFactory) -> None:
    result = make_engine(scorer="mean-kept").assess(make_hits(), threshold=0.40)
    assert result.kept_indices == (0, 2, 1)
    assert result.threshold == pytest.approx(0.40)


def test_threshold_override_out_of_range(
    make_engine: EngineFactory, make_hits: HitsFactory
) -> None:
    with pytest.raises(ConfidenceError, match=r"threshold must be in \[0, 1\], got 1.5"):
        make_engine().assess(make_hits(), threshold=1.5)


def test_top_k_keeps_best_k(make_engine: EngineFactory) -> None:
    engine = make_engine(selection="top_k", top_k=2, scorer="mean-kept")
    result = engine.assess(HitScores(dense=np.array([0.1, 0.9, 0.5, 0.7])))
    assert result.kept_indices == (1, 3)
    assert result.stop_reason == "max_k"
    assert [(d.rule, d.limit) for d in result.dropped] == [("top_k_cap", 2)] * 2


class TestAdaptive:
    """E1 adaptive k."""

    def test_stops_at_threshold(self, make_engine: EngineFactory) -> None:
        engine = make_engine(selection="adaptive")
        result = engine.assess(HitScores(dense=np.array([0.9, 0.8, 0.5, 0.1])))
        assert result.kept_indices == (0,)
        assert result.stop_reason == "threshold"
        assert result.adaptive_confidence == pytest.approx(0.9)
        rules = {d.hit_index: d.rule for d in result.dropped}
        assert rules == {1: "adaptive_stop", 2: "adaptive_stop", 3: "below_floor"}

    def test_max_k_when_confidence_never_reached(self, make_engine: EngineFactory) -> None:
        engine = make_engine(selection="adaptive")
        result = engine.assess(HitScores(dense=np.full(12, 0.5)))
        assert result.chunks_retrieved == 8
        assert result.stop_reason == "max_k"

    def test_no_results_when_all_below_floor(self, make_engine: EngineFactory) -> None:
        result = make_engine(selection="adaptive").assess(HitScores(dense=np.array([0.1, 0.05])))
        assert result.stop_reason == "no_results"
        assert result.status == "no_relevant_context"

    def test_entity_coverage_adds_hits_until_entities_are_covered(
        self, make_engine: EngineFactory
    ) -> None:
        texts = ["Paris is in France.", "The Louvre opened in 1793.", "Unrelated text."]
        em = entity_matrix(["Paris", "Louvre"], texts)
        hits = HitScores(dense=np.array([0.9, 0.85, 0.8]), entity_matrix=em)
        result = make_engine(selection="adaptive").assess(hits)
        # After hit 0: 0.6 x 0.9 + 0.4 x 0.5 = 0.74 >= 0.7, so one hit suffices.
        assert result.kept_indices == (0,)
        assert result.adaptive_confidence == pytest.approx(0.74)
        strict = make_engine(selection="adaptive").assess(hits, task="explanation")  # 0.8
        assert strict.kept_indices == (0, 1)
        assert strict.adaptive_confidence == pytest.approx(0.6 * 0.875 + 0.4 * 1.0)

    def test_task_strategy_sets_min_k(self, make_engine: EngineFactory) -> None:
        hits = HitScores(dense=np.array([0.95, 0.9, 0.3]))
        assert make_engine(selection="adaptive").assess(hits).chunks_retrieved == 1
        assert (
            make_engine(selection="adaptive").assess(hits, task="debugging").chunks_retrieved == 2
        )


def test_assessment_serializes_to_json(make_engine: EngineFactory) -> None:
    hits = HitScores(
        dense=np.array([0.8, 0.6, 0.3]),
        sparse=np.array([12.0, 3.0, 0.5]),
        doc_ids=["a", "a", "b"],
        source_types=["government", "third_party", "blog"],
        entity_matrix=entity_matrix(["X"], ["x here", "", ""]),
    )
    for scorer in ("weighted", "mean-kept", "composite", "calibrated"):
        data = make_engine(scorer=scorer).assess(hits).to_dict()
        text = json.dumps(data)
        assert json.loads(text)["scorer"] == scorer
        assert isinstance(data["signals"], dict)
        assert isinstance(data["dropped"][0], dict)


def test_levels_flags_and_advisory(make_engine: EngineFactory) -> None:
    engine = make_engine(scorer="mean-kept")
    medium = engine.assess(HitScores(dense=np.array([0.75, 0.74, 0.73])))
    assert medium.status == "medium_confidence"
    assert medium.level == "MEDIUM"
    assert medium.should_flag_for_review
    assert medium.advisory_flag == "MEDIUM_CONFIDENCE"
    assert not medium.advisory_only
    assert medium.disclaimer.text is not None
    assert "74% confidence" in medium.disclaimer.text
    assert [r.code for r in medium.recommendations] == [
        "expand_query",
        "exact_keyword_search",
        "multi_hop",
    ]
    high = engine.assess(HitScores(dense=np.array([0.95, 0.93, 0.91])))
    assert (high.status, high.level, high.advisory_flag) == (
        "high_confidence",
        "HIGH",
        "HIGH_CONFIDENCE",
    )
    assert not high.should_flag_for_review
    assert high.recommendations == ()
    assert high.disclaimer.text is None


def test_answerability_needs_two_documents(make_engine: EngineFactory) -> None:
    engine = make_engine(scorer="mean-kept")
    one = engine.assess(HitScores(dense=np.array([0.95])))
    assert not one.answerability.is_answerable
    assert one.answerability.reason == "too_few_documents"
    assert one.answerability.level == "insufficient"
    two = engine.assess(HitScores(dense=np.array([0.95, 0.9])))
    assert two.answerability.is_answerable
    assert two.answerability.level == "high"
    assert REFUSAL_SENTENCE == "I cannot answer this based on the provided documents."


def test_composite_uses_source_and_response_quality(make_engine: EngineFactory) -> None:
    engine = make_engine(scorer="composite")
    hits = HitScores(dense=np.array([0.8, 0.8, 0.8]), source_types=["government"] * 3)
    assert engine.assess(hits).confidence == pytest.approx((0.4 * 0.8 + 0.3) / 0.7)
    full = engine.assess(hits, response_quality="complete").confidence
    assert full == pytest.approx(0.4 * 0.8 + 0.3 + 0.3)
    invalid = engine.assess(hits, response_quality="invalid").confidence
    assert invalid == pytest.approx(0.4 * 0.8 + 0.3)
    with pytest.raises(ConfidenceError, match="'great'"):
        engine.assess(hits, response_quality="great")


def test_calibrated_refuses_another_metric(make_engine: EngineFactory) -> None:
    engine = make_engine()
    hits = HitScores(dense=np.array([0.9]), rerank=np.array([3.0]))
    with pytest.raises(CalibrationMismatchError) as err:
        engine.assess(hits)
    assert err.value.expected_metric == "reranker"
    assert err.value.actual_metric == "cosine"


def test_engine_refuses_artifact_for_another_embedder() -> None:
    with pytest.raises(CalibrationMismatchError) as err:
        ConfidenceEngine(ConfidenceConfig(embedder_id="minilm-l6-v2"))
    assert err.value.expected_embedder == "minilm-l6-v2"
    assert err.value.actual_embedder == "offline"
    assert "minilm-l6-v2" in str(err.value)


def test_calibrated_reports_its_version(make_engine: EngineFactory, make_hits: HitsFactory) -> None:
    result = make_engine().assess(make_hits())
    assert result.scorer == "calibrated"
    assert result.calibration_version == load_default_calibration().version


def test_a_batch_gives_each_query_what_it_gets_alone(make_engine: EngineFactory) -> None:
    hits = [
        HitScores(dense=np.array([0.92, 0.45, 0.88, 0.35])),
        HitScores.empty(),
        HitScores(dense=np.array([0.3])),
        HitScores(dense=np.array([0.8, 0.81, 0.79, 0.5, 0.7])),
    ]
    engine = make_engine()
    batch = engine.assess_batch(hits)
    assert len(batch) == 4
    assert batch.statuses == [engine.assess(h).status for h in hits]
    assert batch.stop_reasons[1] == "no_results"
    for i, h in enumerate(hits):
        assert batch.item(i).to_dict() == engine.assess(h).to_dict()


def test_a_batch_keeps_each_querys_own_k(make_engine: EngineFactory) -> None:
    # E4: the search fetched the query's k; the batch must not cut to config.top_k.
    engine = make_engine(selection="top_k", top_k=2, scorer="mean-kept")
    hits = HitScores(dense=np.array([0.1, 0.9, 0.5, 0.7]))
    batch = engine.assess_batch([hits, hits, hits], top_ks=[3, None, 1])
    assert [batch.item(i).kept_indices for i in range(3)] == [(1, 3, 2), (1, 3), (1,)]
    assert [d.limit for d in batch.item(0).dropped] == [3]
    assert batch.item(0).to_dict() == engine.assess(hits, top_k=3).to_dict()
    with pytest.raises(ConfidenceError, match="top_k must be > 0, got 0"):
        engine.assess_batch([hits], top_ks=[0])


def test_a_batch_query_without_a_task_keeps_the_configured_adaptive_k(
    make_engine: EngineFactory,
) -> None:
    # The configured E1 parameters (max_k 8), not the "general" task's (max_k 5).
    engine = make_engine(selection="adaptive")
    flat = HitScores(dense=np.full(12, 0.5))
    batch = engine.assess_batch([flat, flat], tasks=[None, "general"])
    assert [batch.item(i).chunks_retrieved for i in range(2)] == [8, 5]
    assert batch.item(0).to_dict() == engine.assess(flat).to_dict()


def test_a_nan_threshold_is_refused(make_engine: EngineFactory, make_hits: HitsFactory) -> None:
    engine = make_engine()
    for call in (
        lambda: engine.assess(make_hits(), threshold=float("nan")),
        lambda: engine.assess_batch([make_hits()], thresholds=[float("nan")]),
        lambda: engine.assess_many([make_hits()], thresholds=[float("nan")]),
    ):
        with pytest.raises(ConfidenceError, match=r"threshold must be in \[0, 1\], got nan"):
            call()


def test_batch_input_validation() -> None:
    with pytest.raises(ConfidenceError, match="lengths must be in"):
        HitBatch(lengths=np.array([3]), dense=np.zeros((1, 2)))
    with pytest.raises(ConfidenceError, match="same length"):
        HitScores(dense=np.zeros(3), sparse=np.zeros(2))
    with pytest.raises(ConfidenceError, match="thresholds must have one value per query"):
        ConfidenceEngine().assess_batch([HitScores(dense=np.zeros(2))], thresholds=[0.5, 0.6])
