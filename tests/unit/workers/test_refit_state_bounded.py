"""The feedback loop's per-scope re-fit state: pruned once it is no longer needed,
bounded past that, and every scope dropped for the bound counted.

Before, the loop kept a set of due scopes and a map of postponed digests that only
grew: a scope whose labels were once postponed kept its digest after a re-fit was put,
and a flood of tenant ids (they come from feedback events) grew both for good.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import ragsift.workers.refit_state as refit_state
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationScope,
    DirectoryCalibrationStore,
)
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import SqliteFeedbackStore, StoredLabel
from ragsift.schemas import RetrievalResult
from ragsift.settings import FeedbackSettings
from ragsift.workers.calibration import FeedbackLoop
from ragsift.workers.refit_state import RefitStates
from tests.unit.workers.test_calibration_worker import (
    SCOPE,
    Clock,
    base_artifact,
    feedback,
    result,
)

pytestmark = pytest.mark.unit

CAP = 3
FLOOD = 10
TOTAL = "ragsift_calibration_refits_total"


def _loop(
    tmp_path: Path,
    *,
    min_labels: int = 200,
    refit_interval_s: float = 0,
    clock: Clock | None = None,
) -> FeedbackLoop:
    clock = clock or Clock()
    registry = CalibrationRegistry(
        base_artifact(), DirectoryCalibrationStore(tmp_path / "calibrations"), refresh_s=0
    )
    settings = FeedbackSettings(
        min_labels=min_labels, refit_interval_s=refit_interval_s, join_ttl_s=3600
    )
    store = SqliteFeedbackStore(tmp_path / "feedback.sqlite", clock=clock)
    return FeedbackLoop(store, registry, settings, Metrics(), clock=clock)


def _evicted(loop: FeedbackLoop) -> float | None:
    return loop.metrics.registry.get_sample_value(
        "ragsift_scope_state_evictions_total", {"monitor": "refit"}
    )


def _all_relevant(loop: FeedbackLoop, tenant: str, n: int = 40, *, event: int = 0) -> None:
    """``n`` labels of ``tenant``, every one relevant: no re-fit can be made of them."""
    results = [result(f"{tenant}-q{i}", 0.5 + i / 1000, tenant) for i in range(n)]
    loop.remember(results)
    for r in results:
        assert loop.apply(feedback(r.query_id, True, tenant, n=event)) is None


def test_a_flood_of_tenants_postponed_is_bounded_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(refit_state, "MAX_SCOPES", CAP)
    loop = _loop(tmp_path, min_labels=40)
    for n in range(FLOOD):
        _all_relevant(loop, f"flood{n}")
    postponed = loop.metrics.registry.get_sample_value(TOTAL, {"outcome": "postponed"})
    assert postponed == FLOOD
    assert _evicted(loop) == FLOOD - CAP
    assert len(loop.refits) == CAP
    # The last CAP scopes are the ones held: their replays are still not fitted again.
    _all_relevant(loop, f"flood{FLOOD - 1}", event=1)
    assert loop.metrics.registry.get_sample_value(TOTAL, {"outcome": "postponed"}) == FLOOD


def test_a_scope_dropped_for_the_bound_fits_its_postponed_labels_once_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the bound costs: a label that leaves the fitted set as it was (a user's
    report, never fit on) tries the dropped scope's postponed labels once more."""
    monkeypatch.setattr(refit_state, "MAX_SCOPES", 1)
    loop = _loop(tmp_path, min_labels=40)
    _all_relevant(loop, "alpha")
    _all_relevant(loop, "beta")  # takes alpha's place
    assert _evicted(loop) == 1
    _all_relevant(loop, "alpha", event=1)  # replays check nothing: alpha is not due
    reports = [result(f"alpha-r{i}", 0.5, "alpha") for i in range(2)]
    loop.remember(reports)
    for r in reports:
        assert loop.apply(feedback(r.query_id, False, "alpha", sampled=False)) is None
    # alpha's labels were fitted once more (postponed again), then held again.
    assert loop.metrics.registry.get_sample_value(TOTAL, {"outcome": "postponed"}) == 3
    assert _evicted(loop) == 2


def test_a_refit_put_in_force_leaves_nothing_of_its_scope(tmp_path: Path) -> None:
    """Postponed (every label relevant), then a label that makes a re-fit, put in
    force: the postponed digest is stale and goes with the rest of the scope."""
    loop = _loop(tmp_path, min_labels=40)
    _all_relevant(loop, "acme")
    scope = CalibrationScope("docs", "acme")
    assert loop.refits.postponed(scope) is not None
    wrong = result("acme-x", 0.85, "acme")
    loop.remember([wrong])
    version = loop.apply(feedback(wrong.query_id, False, "acme"))
    assert version is not None
    assert loop.registry.resolve("acme", "docs").version == version
    assert scope not in loop.refits
    assert len(loop.refits) == 0


def test_a_withheld_scope_keeps_only_its_reason(tmp_path: Path) -> None:
    """Postponed (labels all of one kind), then the labels change into a re-fit that is
    withheld (ADR 031, the set of test_calibration_worker's withheld test): the reason
    is kept for ``ragsift feedback``, the stale postponed digest is not."""
    loop = _loop(tmp_path)
    labelled = _withheld_labels()
    loop.remember([r for r, _ in labelled])
    for r, _ in labelled:  # every one not relevant: fewer to change (37) than relevant
        assert loop.apply(feedback(r.query_id, False)) is None
    assert loop.refits.postponed(SCOPE) is not None
    for r, y in labelled:
        loop.apply(feedback(r.query_id, y, n=1))
    assert loop.metrics.registry.get_sample_value(TOTAL, {"outcome": "withheld"})
    assert "wrong 1 of 20 times" in (loop.refits.withheld(SCOPE) or "")
    assert loop.refits.postponed(SCOPE) is None
    assert not loop.refits.is_due(SCOPE)


def _withheld_labels() -> list[tuple[RetrievalResult, bool]]:
    """200 labels whose re-fit is withheld (ADR 031): 20 answers, 1 of them wrong."""
    rng = random.Random(7)
    labelled = [(result(f"a{i}", 0.85), i != 0) for i in range(20)]
    labelled += [(result(f"r{i}", rng.uniform(0.3, 0.55)), i % 10 == 0) for i in range(180)]
    return labelled


def test_a_postponed_attempt_drops_the_reason_an_earlier_one_was_withheld(
    tmp_path: Path,
) -> None:
    """Withheld, then the labels changed (inside the re-fit interval, so nothing was
    fitted) into ones no re-fit can be made of (every one not relevant), tried once the
    interval passed: postponed. The earlier reason stayed, describing labels the scope
    no longer has (its counts, "wrong 1 of 20 times"), for whatever reads it."""
    clock = Clock()
    loop = _loop(tmp_path, refit_interval_s=600, clock=clock)
    labelled = _withheld_labels()
    loop.remember([r for r, _ in labelled])
    for r, y in labelled:
        assert loop.apply(feedback(r.query_id, y)) is None
    assert "wrong 1 of 20 times" in (loop.refits.withheld(SCOPE) or "")
    for r, _ in labelled:  # inside the interval: marked due, not fitted
        assert loop.apply(feedback(r.query_id, False, n=1)) is None
    assert loop.refits.is_due(SCOPE)
    clock.now += 600
    assert loop.apply(feedback(labelled[0][0].query_id, False, n=2)) is None  # a replay
    assert loop.metrics.registry.get_sample_value(TOTAL, {"outcome": "postponed"}) == 1
    assert loop.refits.postponed(SCOPE) is not None
    assert loop.refits.withheld(SCOPE) is None


def test_postponing_clears_a_withheld_reason_in_the_state_itself() -> None:
    states = RefitStates()
    states.withhold(SCOPE, "too few answers")
    states.postpone(SCOPE, "digest", "every label is relevant")
    assert states.withheld(SCOPE) is None
    assert states.postponed(SCOPE) == "digest"
    assert states.postponed_why(SCOPE) == "every label is relevant"  # for `ragsift feedback`
    states.withhold(SCOPE, "too few answers")  # of other labels: the reason is stale
    assert states.postponed_why(SCOPE) is None


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_scopes must be >= 1, got 0"):
        RefitStates(0)


def test_a_due_scope_whose_labels_fell_below_the_minimum_is_not_kept_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Withheld at 200 labels, then reports took 10 sampled labels' places inside the
    re-fit interval (due). Checked past it, 190 labels fit nothing, and the scope stayed
    due for good: each replayed label read every label of the scope again, and its entry
    (with a withheld reason of labels it no longer had) took one of the bounded slots.
    Below the minimum nothing is due: the label that brings the scope back to it is a
    changed one, which checks anyway. A scope whose labels `ragsift calibrations remove`
    forgot while it was due is this case too."""
    clock = Clock()
    loop = _loop(tmp_path, refit_interval_s=600, clock=clock)
    labelled = _withheld_labels()
    loop.remember([r for r, _ in labelled])
    for r, y in labelled:
        assert loop.apply(feedback(r.query_id, y)) is None
    assert loop.refits.withheld(SCOPE)
    for r, y in labelled[-10:]:  # the sampler chose none (share 0): reports replace them
        assert loop.apply(feedback(r.query_id, y, n=1, sampled=False)) is None
    assert loop.refits.is_due(SCOPE)
    clock.now += 600
    read = 0
    labels = loop.store.labels

    def counted(scope: CalibrationScope) -> list[StoredLabel]:
        nonlocal read
        read += 1
        return labels(scope)

    monkeypatch.setattr(loop.store, "labels", counted)
    first, relevant = labelled[0]
    assert loop.apply(feedback(first.query_id, relevant, n=2)) is None  # a replay: checks
    assert read == 1
    assert SCOPE not in loop.refits
    for r, y in labelled[:20]:  # replays: nothing changed, nothing due, nothing read
        assert loop.apply(feedback(r.query_id, y, n=3)) is None
    assert read == 1
    # A changed label still checks at once (one read), and fits nothing below the minimum.
    assert loop.apply(feedback(first.query_id, not relevant, n=4)) is None
    assert read == 2
    assert SCOPE not in loop.refits
