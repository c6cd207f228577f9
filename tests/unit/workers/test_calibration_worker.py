"""The calibration worker: labels joined to results, per-tenant re-fits, bad feedback refused."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ragsift.confidence.artifact import CalibrationArtifact, load_calibration
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationScope,
    DirectoryCalibrationStore,
)
from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.retrieval.feedback_store import ScoredRecord, SqliteFeedbackStore, StoredLabel
from ragsift.retrieval.redis_replies import RedisRefusedError
from ragsift.retrieval.results import error_result
from ragsift.schemas import (
    ConfidenceBreakdown,
    DeadLetter,
    FeedbackEvent,
    QueryEvent,
    RetrievalResult,
)
from ragsift.settings import FeedbackSettings
from ragsift.streams.bus import InProcessBus
from ragsift.workers.calibration import (
    FeedbackHandler,
    FeedbackLoop,
    FeedbackRefused,
    ResultJoinHandler,
)
from ragsift.workers.decision import sampled_for_labels

SCOPE = CalibrationScope("docs", "acme")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def base_artifact() -> CalibrationArtifact:
    path = packaged_calibration_path("ragsift-hashing-v1-384")
    assert path is not None
    return load_calibration(path)


def result(query_id: str, top: float, tenant: str = "acme") -> RetrievalResult:
    """A scored result with the given top score, answered from 0.6 up (the rest of its
    fields do not matter here)."""
    failed = error_result(
        QueryEvent(query_id=query_id, tenant_id=tenant, query="q?", collection="docs"),
        stage="search",
        error=TimeoutError("unused"),
        attempts=1,
        embedder_id="ragsift-hashing-v1-384",
        disclaimer="unused",
    )
    signals = {"top_score": top, "support": top * 0.8, "consensus": 0.5, "agreement": top}
    breakdown = ConfidenceBreakdown(
        scorer="calibrated", calibration_version="base", signals=signals
    )
    return failed.model_copy(
        update={
            "outcome": "ok",
            "match_count": 1,
            "error": None,
            "breakdown": breakdown,
            "answerable": top >= 0.6,
        }
    )


def traffic(n: int, seed: int = 0) -> list[tuple[RetrievalResult, bool]]:
    """Results and labels: high scores, but this tenant's answers are right less often."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        top = rng.uniform(0.3, 0.9)
        out.append((result(f"q{i}", top), rng.random() < 0.6 * (top - 0.3) / 0.6))
    return out


def feedback(
    query_id: str, relevant: bool, tenant: str = "acme", n: int = 0, *, sampled: bool = True
) -> FeedbackEvent:
    return FeedbackEvent(
        event_id=f"fb-{query_id}-{n}",
        query_id=query_id,
        tenant_id=tenant,
        relevant=relevant,
        sampled=sampled,
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def loop(tmp_path: Path, clock: Clock) -> FeedbackLoop:
    registry = CalibrationRegistry(
        base_artifact(), DirectoryCalibrationStore(tmp_path / "calibrations"), refresh_s=0
    )
    settings = FeedbackSettings(min_labels=200, refit_interval_s=0, join_ttl_s=3600)
    store = SqliteFeedbackStore(tmp_path / "feedback.sqlite", clock=clock)
    return FeedbackLoop(store, registry, settings, Metrics(), clock=clock)


def count(loop: FeedbackLoop, result: str) -> float:
    value = loop.metrics.registry.get_sample_value("ragsift_feedback_total", {"result": result})
    return value or 0.0


def test_200_labels_refit_the_tenant_and_a_replay_changes_nothing(loop: FeedbackLoop) -> None:
    labelled = traffic(200)
    loop.remember([r for r, _ in labelled])
    versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    new = [v for v in versions if v is not None]
    assert len(new) == 1
    assert versions[-1] == new[0]
    tuned = loop.registry.resolve("acme", "docs")
    assert tuned.version == new[0]
    assert tuned.conformal.threshold != loop.registry.default.conformal.threshold
    assert loop.registry.resolve("beta", "docs").version == loop.registry.default.version
    # The same events again (a consumer replay), and duplicates with new event ids.
    again = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    again += [loop.apply(feedback(r.query_id, y, n=1)) for r, y in labelled[:50]]
    assert again == [None] * 250
    assert loop.registry.resolve("acme", "docs").version == new[0]
    assert count(loop, "labelled") == 200
    assert count(loop, "unchanged") == 250


def test_a_changed_label_re_fits_on_the_next_check(loop: FeedbackLoop) -> None:
    labelled = traffic(200)
    loop.remember([r for r, _ in labelled])
    for r, y in labelled:
        loop.apply(feedback(r.query_id, y))
    first = loop.registry.resolve("acme", "docs").version
    r, y = labelled[0]
    assert loop.apply(feedback(r.query_id, not y)) not in (None, first)


def test_the_refit_interval_holds_back_a_second_refit(loop: FeedbackLoop, clock: Clock) -> None:
    loop.settings = FeedbackSettings(min_labels=200, refit_interval_s=600, join_ttl_s=3600)
    labelled = traffic(210)
    loop.remember([r for r, _ in labelled])
    versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    assert sum(v is not None for v in versions) == 1
    clock.now += 601
    extra = result("late", 0.8)
    loop.remember([extra])
    assert loop.apply(feedback("late", True)) is not None


def test_labels_inside_the_interval_do_not_read_every_label(
    loop: FeedbackLoop, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each label read all of its scope's labels to see whether to re-fit, also where
    # the interval ruled a re-fit out: O(labels) per label for a busy tenant.
    loop.settings = FeedbackSettings(min_labels=200, refit_interval_s=600, join_ttl_s=3600)
    labelled = traffic(300)
    loop.remember([r for r, _ in labelled])
    for r, y in labelled[:200]:
        loop.apply(feedback(r.query_id, y))  # the 200th re-fits
    reads: list[CalibrationScope] = []
    labels = loop.store.labels
    monkeypatch.setattr(loop.store, "labels", lambda scope: reads.append(scope) or labels(scope))
    for r, y in labelled[200:]:
        assert loop.apply(feedback(r.query_id, y)) is None
    assert reads == []
    clock.now += 601  # past the interval: the next label reads them and re-fits
    assert loop.apply(feedback(labelled[0][0].query_id, not labelled[0][1])) is not None
    assert reads == [SCOPE, SCOPE]  # to fit, and once put (another process may label it)


def test_unknown_expired_and_other_tenants_feedback_is_refused_and_counted(
    loop: FeedbackLoop, clock: Clock
) -> None:
    loop.remember([result("q1", 0.8)])
    with pytest.raises(FeedbackRefused) as unknown:
        loop.apply(feedback("never-seen", True))
    assert unknown.value.reason == "unknown_query"
    assert unknown.value.stage == "feedback"
    with pytest.raises(FeedbackRefused) as other:
        loop.apply(feedback("q1", True, tenant="mallory"))
    assert other.value.reason == "tenant_mismatch"
    assert loop.store.labels(SCOPE) == []  # nothing of it was kept
    clock.now += 3601  # past the join window
    with pytest.raises(FeedbackRefused, match="join window"):
        loop.apply(feedback("q1", True))
    assert count(loop, "unknown_query") == 2
    assert count(loop, "tenant_mismatch") == 1


def test_errors_and_bypasses_are_not_remembered(loop: FeedbackLoop) -> None:
    failed = result("q-failed", 0.8).model_copy(update={"outcome": "error"})
    loop.remember([failed])
    with pytest.raises(FeedbackRefused):
        loop.apply(feedback("q-failed", True))


async def test_the_worker_dead_letters_bad_feedback_and_keeps_going(loop: FeedbackLoop) -> None:
    bus = InProcessBus(
        [ResultJoinHandler(loop), FeedbackHandler(loop)], metrics=loop.metrics, batch_size=16
    )
    await bus.publish("retrievals", "q1", result("q1", 0.8))
    await bus.publish("retrievals", "q2", result("q2", 0.4))
    await bus.drain()
    await bus.publish("feedback", "acme", feedback("q1", True))
    await bus.publish("feedback", "acme", feedback("unknown", True))
    await bus.publish("feedback", "acme", b'{"query_id": ' + b"[" * 5_000)  # malformed
    await bus.publish("feedback", "acme", feedback("q2", True, tenant="mallory"))
    await bus.publish("feedback", "acme", feedback("q2", False))
    await bus.drain()
    await bus.close()
    letters = [d for d in bus.published["deadletter"] if isinstance(d, DeadLetter)]
    assert sorted(d.stage for d in letters) == ["decode", "feedback", "feedback"]
    assert {d.query_id for d in letters if d.stage == "feedback"} == {"unknown", "q2"}
    assert {s.record.query_id: s.relevant for s in loop.store.labels(SCOPE)} == {
        "q1": True,
        "q2": False,
    }
    dead = loop.metrics.registry.get_sample_value(
        "ragsift_dead_letters_total", {"worker": "calibration", "stage": "feedback"}
    )
    assert dead == 2


def refit_all(loop: FeedbackLoop, labelled: list[tuple[RetrievalResult, bool]]) -> str:
    loop.remember([r for r, _ in labelled])
    versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    new = [v for v in versions if v is not None]
    assert new, "no re-fit happened"
    return new[-1]


def test_the_base_is_the_collections_calibration_not_the_tenants_last_refit(
    loop: FeedbackLoop, tmp_path: Path
) -> None:
    collection = base_artifact().model_copy(update={"intercept": -7.0, "version": ""})
    collection = CalibrationArtifact.model_validate(collection.model_dump())
    loop.registry.put(CalibrationScope("docs"), collection)
    refit_all(loop, traffic(200))
    first = loop.registry.resolve("acme", "docs")
    assert collection.version in first.data.notes
    r, y = traffic(200)[0]
    loop.apply(feedback(r.query_id, not y))  # a changed label: a second re-fit
    second = loop.registry.resolve("acme", "docs")
    assert second.version != first.version
    assert collection.version in second.data.notes
    assert first.version not in second.data.notes


def test_a_refit_keeps_the_score_alignment_of_the_scopes_probe_calibration(
    loop: FeedbackLoop,
) -> None:
    # ingest's probes store a calibration for the scope that aligns its scores; the
    # labelled results were scored on that scale. The re-fit took the collection's
    # unaligned calibration as its base and dropped the alignment: questions labelled
    # relevant at 0.88 were then refused at 0.25.
    from ragsift.confidence.alignment import ProbeLevels, ScoreAlignment

    alignment = ScoreAlignment(
        dense_offset=0.147, bm25_scale=2.95, levels=ProbeLevels(dense=0.1, bm25=2.5, probes=300)
    )
    probed = CalibrationArtifact.model_validate(
        {**base_artifact().model_dump(mode="json"), "version": "", "alignment": alignment}
    )
    loop.registry.put(SCOPE, probed)
    refit_all(loop, traffic(200))
    first = loop.registry.resolve("acme", "docs")
    assert first.version != probed.version
    assert first.alignment == alignment
    assert loop.registry.default.version in first.data.notes  # re-fits the collection's
    r, y = traffic(200)[0]
    loop.apply(feedback(r.query_id, not y))  # a changed label: a second re-fit
    second = loop.registry.resolve("acme", "docs")
    assert second.version != first.version
    assert second.alignment == alignment
    # Another tenant of the collection, never probed, re-fits without one.
    other = [
        (result(f"b{i}", r.breakdown.signals["top_score"], "beta"), y)  # type: ignore[union-attr]
        for i, (r, y) in enumerate(traffic(200, seed=3))
    ]
    loop.remember([r for r, _ in other])
    for r, y in other:
        loop.apply(feedback(r.query_id, y, "beta"))
    assert loop.registry.resolve("beta", "docs").alignment is None


def test_a_corrupt_collection_calibration_falls_back_to_the_default(
    loop: FeedbackLoop, tmp_path: Path
) -> None:
    loop.registry.put(CalibrationScope("docs"), base_artifact())
    [path] = (tmp_path / "calibrations").glob("*/_collection.json")
    path.write_text('{"kind": "ragsift.confidence.calibration", "coefficients": [1e999', "utf-8")
    refit_all(loop, traffic(200))
    assert loop.registry.default.version in loop.registry.resolve("acme", "docs").data.notes


def test_labels_on_answered_results_only_keep_the_map(loop: FeedbackLoop) -> None:
    """Users who rate only the answers they were shown: the re-fit keeps the base's
    probability map and can only raise its bar (ADR 022)."""
    labelled = [(r.model_copy(update={"answerable": True}), y) for r, y in traffic(200)]
    loop.remember([r for r, _ in labelled])
    versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    assert versions[-1] is not None
    tuned = loop.registry.resolve("acme", "docs")
    default = loop.registry.default
    assert tuned.version == versions[-1] != default.version
    assert tuned.conformal.method.startswith("feedback-raise+")
    assert tuned.coefficients == default.coefficients
    assert not tuned.conformal.feasible or (
        tuned.conformal.threshold >= default.conformal.threshold
    )


def test_a_result_remembered_before_answered_was_kept_still_reads() -> None:
    old = '{"query_id": "q", "tenant_id": "t", "collection": "c", "kept": true, "signals": {}}'
    assert ScoredRecord.model_validate_json(old).answered is None
    assert ScoredRecord.model_validate_json(old).dense_only is False  # as were they all


def test_a_dense_only_result_is_remembered_as_one_unless_a_keyword_retry_won() -> None:
    """ADR 028: its label is re-fit with the agreement it was scored with."""
    from ragsift.schemas import CorrectiveInfo
    from ragsift.workers.feedback_loop import record_of

    dense = result("q", 0.7).model_copy(update={"mode": "dense"})
    assert record_of(dense).dense_only
    assert not record_of(result("q", 0.7)).dense_only
    won = CorrectiveInfo(
        trigger="low_confidence", tried=["keyword"], won="keyword", first_confidence=0.1, reason="t"
    )
    assert not record_of(dense.model_copy(update={"corrective": won})).dense_only


def test_keyword_labels_are_kept_and_counted_but_never_re_fit_the_hybrid_model(
    loop: FeedbackLoop,
) -> None:
    """ADR 029: a keyword-only result was scored by the artifact's keyword model; its
    label says nothing about the hybrid model a re-fit re-maps. The 200 labels that
    re-fit the tenant above, on keyword results, are held and re-fit nothing."""
    from ragsift.schemas import CorrectiveInfo
    from ragsift.workers.feedback_loop import record_of

    labelled = [(r.model_copy(update={"mode": "keyword"}), y) for r, y in traffic(200)]
    assert all(record_of(r).keyword for r, _ in labelled)
    loop.remember([r for r, _ in labelled])
    versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    assert versions == [None] * 200
    assert loop.registry.resolve("acme", "docs").version == loop.registry.default.version
    assert count(loop, "labelled") == 200
    # A hybrid query whose keyword retry won was scored by the keyword model too.
    won = CorrectiveInfo(
        trigger="low_confidence", tried=["keyword"], won="keyword", first_confidence=0.1, reason="t"
    )
    assert record_of(result("q", 0.7).model_copy(update={"corrective": won})).keyword
    assert not record_of(result("q", 0.7)).keyword


def test_a_refit_that_certifies_nothing_is_counted_and_warned(
    loop: FeedbackLoop, caplog: pytest.LogCaptureFixture
) -> None:
    """Every shown answer labelled wrong: no bar holds, the scope refuses its queries,
    and the operator is told (the alert RagsiftFeedbackRefitUncertified reads the count)."""
    labelled = [(r.model_copy(update={"answerable": True}), False) for r, _ in traffic(200)]
    loop.remember([r for r, _ in labelled])
    with caplog.at_level("INFO", logger="ragsift.workers.calibration"):
        for r, y in labelled:
            loop.apply(feedback(r.query_id, y))
    assert not loop.registry.resolve("acme", "docs").conformal.feasible
    registry = loop.metrics.registry
    total = "ragsift_calibration_refits_total"
    assert registry.get_sample_value(total, {"outcome": "uncertified"}) == 1
    assert registry.get_sample_value(total, {"outcome": "certified"}) is None
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1
    assert "acme/docs" in warned[0].getMessage()
    assert "no answer threshold is certified on 200 labels" in warned[0].getMessage()


def test_a_refit_too_few_labels_certify_is_withheld_and_the_scope_keeps_answering(
    loop: FeedbackLoop, caplog: pytest.LogCaptureFixture
) -> None:
    """ADR 031: mostly unanswerable traffic, its few served answers right. 200 labels
    hold 20 answers, too few to certify a bar: the re-fit is counted as withheld and
    logged, not published (the scope is not switched to refusing everything), and the
    same labels again do not re-fit."""
    rng = random.Random(7)
    labelled = [(result(f"a{i}", 0.85), i != 0) for i in range(20)]
    labelled += [(result(f"r{i}", rng.uniform(0.3, 0.55)), i % 10 == 0) for i in range(180)]
    loop.remember([r for r, _ in labelled])
    with caplog.at_level("INFO", logger="ragsift.workers.calibration"):
        versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    assert versions == [None] * 200
    assert loop.registry.resolve("acme", "docs").version == loop.registry.default.version
    registry = loop.metrics.registry
    total = "ragsift_calibration_refits_total"
    assert registry.get_sample_value(total, {"outcome": "withheld"}) == 1
    assert registry.get_sample_value(total, {"outcome": "uncertified"}) is None
    assert "wrong 1 of 20 times" in (loop.refits.withheld(SCOPE) or "")
    (said,) = [r.getMessage() for r in caplog.records if "withheld" in r.getMessage()]
    assert "acme/docs" in said
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    again = [loop.apply(feedback(r.query_id, y, n=1)) for r, y in labelled]
    assert again == [None] * 200
    assert registry.get_sample_value(total, {"outcome": "withheld"}) == 1


def test_a_refit_labels_of_one_kind_cannot_make_is_counted_once_and_not_redone(
    loop: FeedbackLoop, caplog: pytest.LogCaptureFixture
) -> None:
    """Every label "relevant": no re-fit can be made (nothing to separate). It was
    logged at info alone, no metric, and tried again at every later label of the
    scope, replays included, each try reading every label."""
    labelled = [result(f"a{i}", 0.5 + i / 1000) for i in range(200)]
    loop.remember(labelled)
    with caplog.at_level("INFO", logger="ragsift.workers.calibration"):
        versions = [loop.apply(feedback(r.query_id, True)) for r in labelled]
    assert versions == [None] * 200
    assert loop.registry.resolve("acme", "docs").version == loop.registry.default.version
    total = "ragsift_calibration_refits_total"
    registry = loop.metrics.registry
    assert registry.get_sample_value(total, {"outcome": "postponed"}) == 1
    assert any("postponed" in r.getMessage() for r in caplog.records)
    again = [loop.apply(feedback(r.query_id, True, n=1)) for r in labelled]
    assert again == [None] * 200
    assert registry.get_sample_value(total, {"outcome": "postponed"}) == 1


def test_reported_labels_are_kept_and_counted_but_never_re_fit(loop: FeedbackLoop) -> None:
    """The 200 thumbs-downs above, sent as users' own reports: the scope keeps its
    calibration (they are chosen by their outcome: ADR 023), and every one is held."""
    labelled = [(r.model_copy(update={"answerable": True}), False) for r, _ in traffic(200)]
    loop.remember([r for r, _ in labelled])
    versions = [loop.apply(feedback(r.query_id, y, sampled=False)) for r, y in labelled]
    assert versions == [None] * 200
    assert loop.registry.resolve("acme", "docs").version == loop.registry.default.version
    assert count(loop, "reported") == 200
    assert count(loop, "labelled") == 0
    held = loop.store.labels(SCOPE)
    assert len(held) == 200
    assert not any(s.sampled for s in held)
    registry = loop.metrics.registry
    assert (
        registry.get_sample_value("ragsift_calibration_refits_total", {"outcome": "uncertified"})
        is None
    )


def test_only_the_sampled_labels_re_fit_and_a_label_can_change_kind(loop: FeedbackLoop) -> None:
    """Sampled and reported labels in one scope: the re-fit reads the 200 sampled ones
    alone, and a sampled label re-sent as reported leaves the next re-fit."""
    labelled = traffic(260)
    loop.remember([r for r, _ in labelled])
    for r, y in labelled[200:]:  # 60 reports first: not enough (and not usable) to re-fit
        assert loop.apply(feedback(r.query_id, y, sampled=False)) is None
    versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled[:200]]
    assert versions[:-1] == [None] * 199
    first = versions[-1]
    assert first is not None
    tuned = loop.registry.resolve("acme", "docs")
    assert tuned.data.n_examples == 200
    # The same label as a report: the sampled set changed (199 left, under the minimum).
    r, y = labelled[0]
    assert loop.apply(feedback(r.query_id, y, n=1, sampled=False)) is None
    assert count(loop, "reported") == 61
    assert len(loop.store.labels(SCOPE)) == 260
    assert sum(s.sampled for s in loop.store.labels(SCOPE)) == 199
    # Sampled again: the 200 are back, with the same digest as the first re-fit's.
    assert loop.apply(feedback(r.query_id, y, n=2)) is None
    assert loop.registry.resolve("acme", "docs").version == first


def test_a_report_on_a_result_the_label_sampler_chose_keeps_its_sampled_label(
    loop: FeedbackLoop,
) -> None:
    """A reviewer labelled the chosen results at random; users then complained of the
    wrong ones. Were the complaints to replace the reviewer's labels, the sample would
    lose its wrong answers: here 20 of them, and a re-fit would read no risk at all."""
    loop.settings = loop.settings.model_copy(update={"sample_share": 0.5})
    chosen = [f"q{i}" for i in range(200) if sampled_for_labels("acme", f"q{i}", 0.5)][:40]
    loop.remember([result(q, 0.8) for q in chosen])
    for i, q in enumerate(chosen):  # the reviewer: every other answer wrong
        loop.apply(feedback(q, i % 2 == 0))
    for q in chosen[1::2]:  # the users: a complaint on each wrong one
        loop.apply(feedback(q, False, n=1, sampled=False))
    held = loop.store.labels(SCOPE)
    assert sum(s.sampled for s in held) == 40
    assert sum(not s.relevant for s in held) == 20
    assert count(loop, "kept_sampled") == 20
    assert count(loop, "reported") == 0
    # A result the sampler did not choose: a label re-sent as reported still moves out
    # of the sample (how one sent as sampled by mistake is corrected, ADR 023).
    other = next(f"x{i}" for i in range(200) if not sampled_for_labels("acme", f"x{i}", 0.5))
    loop.remember([result(other, 0.8)])
    loop.apply(feedback(other, False))
    loop.apply(feedback(other, False, n=1, sampled=False))
    assert [s.sampled for s in loop.store.labels(SCOPE) if s.record.query_id == other] == [False]
    assert count(loop, "reported") == 1


def test_a_report_on_another_tenants_query_is_refused_and_stores_nothing(
    loop: FeedbackLoop,
) -> None:
    loop.remember([result("q-acme", 0.8)])
    with pytest.raises(FeedbackRefused, match="another tenant's"):
        loop.apply(feedback("q-acme", False, tenant="mallory", sampled=False))
    assert loop.store.labels(SCOPE) == []
    assert loop.store.labels(CalibrationScope("docs", "mallory")) == []
    assert count(loop, "tenant_mismatch") == 1
    assert count(loop, "reported") == 0


def test_feedback_sampled_defaults_to_true_and_takes_only_a_boolean() -> None:
    event = FeedbackEvent.model_validate(
        {"event_id": "e", "query_id": "q", "tenant_id": "t", "relevant": False}
    )
    assert event.sampled is True
    assert (
        FeedbackEvent.model_validate_json(
            '{"event_id": "e", "query_id": "q", "tenant_id": "t", "relevant": false,'
            ' "sampled": false}'
        ).sampled
        is False
    )
    for bad in ('"reported"', "2", "null", '"\u0000"'):
        with pytest.raises(ValidationError, match="sampled"):
            FeedbackEvent.model_validate_json(
                '{"event_id": "e", "query_id": "q", "tenant_id": "t", "relevant": false,'
                f' "sampled": {bad}}}'
            )


def test_a_label_stored_before_sampled_existed_reads_as_sampled() -> None:
    old = (
        '{"record": {"query_id": "q", "tenant_id": "t", "collection": "c", "kept": true,'
        ' "signals": {}}, "relevant": true, "at": 1.0}'
    )
    assert StoredLabel.model_validate_json(old).sampled is True


def test_in_force_is_the_scopes_own_usable_calibration_else_the_broader_one(
    loop: FeedbackLoop, tmp_path: Path
) -> None:
    default = loop.registry.default
    assert loop.in_force(SCOPE) == default  # nothing stored for the tenant
    labelled = traffic(200)
    loop.remember([r for r, _ in labelled])
    versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    assert loop.in_force(SCOPE).version == versions[-1] != default.version
    # A stored calibration the query path would skip (made for another model) is not
    # the one in force: the broader one is, as for queries.
    other = loop.in_force(SCOPE).model_copy(update={"embedder_id": "another-model"})
    DirectoryCalibrationStore(tmp_path / "calibrations").put(SCOPE, other)
    assert loop.in_force(SCOPE) == default


def test_a_refit_that_could_not_be_stored_is_retried_by_the_next_label_even_a_replay(
    loop: FeedbackLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The re-fit was marked done before it was stored: a put that failed left the scope
    # on its old calibration for good (every later check: "these labels are re-fit").
    labelled = traffic(200)
    loop.remember([r for r, _ in labelled])
    for r, y in labelled[:-1]:
        assert loop.apply(feedback(r.query_id, y)) is None
    registry_put = loop.registry.put

    def full_disk(scope: CalibrationScope, artifact: CalibrationArtifact) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(loop.registry, "put", full_disk)
    last, y = labelled[-1]
    with pytest.raises(OSError, match="No space left"):
        loop.apply(feedback(last.query_id, y))
    assert loop.store.last_refit(SCOPE) is None
    assert loop.registry.resolve("acme", "docs").version == loop.registry.default.version
    monkeypatch.setattr(loop.registry, "put", registry_put)
    version = loop.apply(feedback(last.query_id, y))  # the same label again: unchanged
    assert version is not None
    assert loop.registry.resolve("acme", "docs").version == version
    assert loop.apply(feedback(last.query_id, y)) is None  # done: a replay changes nothing


def test_a_label_inside_the_interval_re_fits_once_it_has_passed_on_any_label(
    loop: FeedbackLoop, clock: Clock
) -> None:
    loop.settings = FeedbackSettings(min_labels=200, refit_interval_s=600, join_ttl_s=3600)
    labelled = traffic(201)
    first = refit_all(loop, labelled[:200])
    loop.remember([labelled[200][0]])
    clock.now += 10
    assert loop.apply(feedback(labelled[200][0].query_id, labelled[200][1])) is None  # held
    clock.now += 600
    r, y = labelled[0]
    second = loop.apply(feedback(r.query_id, y))  # unchanged, but the scope is due
    assert second not in (None, first)


def test_an_unreadable_label_row_is_passed_over_not_a_block_on_the_scope(
    loop: FeedbackLoop, tmp_path: Path
) -> None:
    # One damaged row (or one a newer release wrote) made every label of its scope fail
    # after being stored, and no re-fit could run.
    import sqlite3

    labelled = traffic(201)
    loop.remember([r for r, _ in labelled])
    with sqlite3.connect(tmp_path / "feedback.sqlite") as db:
        db.execute(
            "INSERT INTO labels VALUES (?, ?, ?, ?)", ("docs\x1facme", "zzz", '{"record":{}}', 0)
        )
        db.execute(
            "INSERT INTO labels VALUES (?, ?, ?, ?)",
            ("docs\x1facme", labelled[0][0].query_id, "not json", 0),
        )
    versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    assert any(v is not None for v in versions)
    assert len(loop.store.labels(SCOPE)) == 201  # the damaged row of q0 overwritten


class PausedStore:
    """``inner``, refusing its first ``down_for`` calls as a paused Redis does."""

    def __init__(self, inner: Any, down_for: int) -> None:
        self.inner, self.down_for, self.refused = inner, down_for, 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down_for > 0:
                self.down_for -= 1
                self.refused += 1
                raise ServiceUnavailableError("redis feedback store: TimeoutError", service="redis")
            return method(*args, **kwargs)

        return call


async def test_a_store_that_does_not_answer_is_waited_out_not_dead_lettered(
    loop: FeedbackLoop,
) -> None:
    # A paused Redis dead-lettered the results (stage service), so their labels were
    # refused later as unknown queries, and dead-lettered the labels sent meanwhile.
    loop.store = PausedStore(loop.store, down_for=3)  # type: ignore[assignment]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    handlers = [ResultJoinHandler(loop, sleep=sleep), FeedbackHandler(loop, sleep=sleep)]
    bus = InProcessBus(handlers, metrics=loop.metrics, batch_size=16)
    await bus.publish("retrievals", "q1", result("q1", 0.8))
    await bus.drain()
    loop.store.down_for = 2  # type: ignore[attr-defined]
    await bus.publish("feedback", "acme", feedback("q1", True))
    await bus.drain()
    await bus.close()
    assert [d for d in bus.published["deadletter"] if isinstance(d, DeadLetter)] == []
    assert loop.store.refused == 5  # type: ignore[attr-defined]
    assert len(waits) == 5
    assert {s.record.query_id: s.relevant for s in loop.store.labels(SCOPE)} == {"q1": True}


def test_a_refit_stamped_by_a_clock_ahead_does_not_hold_back_re_fits(
    loop: FeedbackLoop, clock: Clock
) -> None:
    # Replicas share the re-fit stamps (Redis). One stamped by a clock a day ahead (or
    # before this host's clock was stepped back) read as "re-fit less than the interval
    # ago" until this clock passed it: a day of changed labels re-fit nothing.
    loop.settings = FeedbackSettings(min_labels=200, refit_interval_s=600, join_ttl_s=3600)
    labelled = traffic(200)
    clock.now += 86_400  # the replica that made the first re-fit runs a day ahead
    first = refit_all(loop, labelled)
    clock.now -= 86_400 - 700  # this one: on time, past the interval since the re-fit
    r, y = labelled[0]
    loop.remember([r])
    assert loop.apply(feedback(r.query_id, not y)) not in (None, first)


async def test_a_result_redis_refuses_for_good_is_dead_lettered_alone_not_its_batch(
    loop: FeedbackLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store whose key for q-bad is of the wrong type (written by another program).
    real = loop.remember

    def remember(events: list[RetrievalResult]) -> None:
        if any(e.query_id == "q-bad" for e in events):
            raise RedisRefusedError(
                "owners set of the wrong type",
                store="feedback",
                key_kind="results",
                code="WRONGTYPE",
            )
        real(events)

    monkeypatch.setattr(loop, "remember", remember)
    bus = InProcessBus([ResultJoinHandler(loop)], metrics=loop.metrics, batch_size=16)
    for query_id in ("q1", "q-bad", "q2"):
        await bus.publish("retrievals", query_id, result(query_id, 0.8))
    await bus.drain()
    await bus.close()
    letters = [d for d in bus.published["deadletter"] if isinstance(d, DeadLetter)]
    # Before: the whole batch was dead-lettered, the other results never remembered.
    assert [(d.query_id, d.stage) for d in letters] == [("q-bad", "redis")]
    assert "owners set" in letters[0].error
    assert loop.store.recall("q1", "acme") is not None
    assert loop.store.recall("q2", "acme") is not None
    assert loop.store.recall("q-bad", "acme") is None
