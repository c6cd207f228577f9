"""Two processes re-fitting one scope at once (a rebalance's overlap, the console and
`ragsift feedback`): the calibration last put covers every stored label.

Before, each fit the labels it read and put the result: a re-fit of the labels
before the other's label, put after the other's re-fit of them all, stayed in force
without that label until the next changed label.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragsift.confidence.artifact import CalibrationArtifact
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationScope,
    DirectoryCalibrationStore,
)
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import SqliteFeedbackStore
from ragsift.settings import FeedbackSettings
from ragsift.workers.feedback_loop import FeedbackLoop
from ragsift.workers.scope_refit import REFIT_TRIES
from tests.unit.workers.test_calibration_worker import (
    SCOPE,
    Clock,
    base_artifact,
    feedback,
    traffic,
)


def process(tmp_path: Path, clock: Clock) -> FeedbackLoop:
    """One process's loop over the stores every process shares (one data dir)."""
    registry = CalibrationRegistry(
        base_artifact(), DirectoryCalibrationStore(tmp_path / "calibrations"), refresh_s=0
    )
    settings = FeedbackSettings(min_labels=200, refit_interval_s=0, join_ttl_s=3600)
    store = SqliteFeedbackStore(tmp_path / "feedback.sqlite", clock=clock)
    return FeedbackLoop(store, registry, settings, Metrics(), clock=clock)


def stored(loop: FeedbackLoop) -> CalibrationArtifact:
    held = loop.registry.examine(SCOPE)[0]
    assert held is not None, "no re-fit is stored"
    return held


def covered(loop: FeedbackLoop) -> int:
    """How many labels the calibration in force was fit on."""
    return stored(loop).data.n_examples


def before_put(
    loop: FeedbackLoop, monkeypatch: pytest.MonkeyPatch, step: Callable[[], Any]
) -> None:
    """Run ``step`` once, after ``loop`` fit its labels and before its re-fit is put."""
    put = loop.registry.put
    pending = [step]

    def delayed(scope: CalibrationScope, artifact: CalibrationArtifact) -> None:
        if pending:
            pending.pop()()
        put(scope, artifact)

    monkeypatch.setattr(loop.registry, "put", delayed)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_refit_put_after_the_others_refit_of_more_labels_is_fit_again(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = process(tmp_path, clock), process(tmp_path, clock)
    labelled = traffic(201)
    first.remember([r for r, _ in labelled])
    for r, y in labelled[:199]:
        assert first.apply(feedback(r.query_id, y)) is None
    (r200, y200), (r201, y201) = labelled[199], labelled[200]

    # While the first fits the 200 labels, the second stores the 201st and puts its
    # re-fit of all 201; then the first puts its re-fit of 200.
    before_put(first, monkeypatch, lambda: second.apply(feedback(r201.query_id, y201)))
    first.apply(feedback(r200.query_id, y200))

    assert len(first.store.labels(SCOPE)) == 201
    assert covered(first) == 201  # before: 200, the second's label left out
    assert covered(second) == 201
    # Its record names the labels in force: a replay of either label changes nothing.
    in_force = stored(first).version
    assert first.apply(feedback(r201.query_id, y201)) is None
    assert second.apply(feedback(r200.query_id, y200)) is None
    assert stored(second).version == in_force


def test_a_refit_put_before_the_others_leaves_the_others_in_force(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other order needs nothing: the second's re-fit, of every label, is put last.
    first, second = process(tmp_path, clock), process(tmp_path, clock)
    labelled = traffic(201)
    first.remember([r for r, _ in labelled])
    for r, y in labelled[:200]:
        first.apply(feedback(r.query_id, y))
    assert covered(first) == 200
    r, y = labelled[200]
    assert second.apply(feedback(r.query_id, y)) is not None
    assert covered(first) == 201


def test_labels_that_keep_changing_under_the_refit_leave_the_scope_due(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another writer stores a label during each of this process's re-fits: it stops
    # after REFIT_TRIES, its scope due, so its next label (a replay too) fits again.
    loop, other = process(tmp_path, clock), process(tmp_path, clock)
    labelled = traffic(200 + REFIT_TRIES)
    loop.remember([r for r, _ in labelled])
    for r, y in labelled[:199]:
        loop.apply(feedback(r.query_id, y))
    extra = iter(labelled[200:])
    put = loop.registry.put

    def busy(scope: CalibrationScope, artifact: CalibrationArtifact) -> None:
        nxt = next(extra, None)
        if nxt is not None:  # stored beside the re-fit, as another process does
            other.store.put_label(
                other.scope_of(other.store.recall(nxt[0].query_id, "acme")),  # type: ignore[arg-type]
                _label(other, nxt[0].query_id, nxt[1], clock),
            )
        put(scope, artifact)

    monkeypatch.setattr(loop.registry, "put", busy)
    r, y = labelled[199]
    assert loop.apply(feedback(r.query_id, y)) is not None
    assert loop.refits.is_due(SCOPE)
    assert covered(loop) == 199 + REFIT_TRIES  # each try fit what was there
    monkeypatch.setattr(loop.registry, "put", put)
    assert loop.apply(feedback(r.query_id, y)) is not None  # the same label again
    assert covered(loop) == 200 + REFIT_TRIES
    assert not loop.refits.is_due(SCOPE)


def _label(loop: FeedbackLoop, query_id: str, relevant: bool, clock: Clock) -> Any:
    from ragsift.retrieval.feedback_store import StoredLabel

    record = loop.store.recall(query_id, "acme")
    assert record is not None
    return StoredLabel(record=record, relevant=relevant, at=clock(), sampled=True)
