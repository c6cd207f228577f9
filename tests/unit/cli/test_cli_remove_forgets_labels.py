"""`ragsift calibrations remove --tenant T` forgets the labels a feedback re-fit is made of.

Kept, the next label re-fit the removed calibration from them (201 labels instead of
200): a re-fit that refused every query was back before anyone fixed its labels. In a
calibration worker that held the scope due, a replayed label did it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ragsift.confidence.artifact import CalibrationArtifact
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationScope,
    DirectoryCalibrationStore,
)
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import ScoredRecord, SqliteFeedbackStore
from ragsift.schemas import FeedbackEvent
from ragsift.settings import FeedbackSettings
from ragsift.workers.calibration import FeedbackLoop
from tests.unit.cli.conftest import run_cli
from tests.unit.cli.test_cli_calibrations import DEFAULT

ACME, BETA = CalibrationScope("docs", "acme"), CalibrationScope("docs", "beta")
N = 200
#: One interval long enough that the labels after the first re-fit are held back (due).
INTERVAL_S = 300.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def loop_over(data: Path, clock: Clock) -> FeedbackLoop:
    """The loop `ragsift feedback` runs over ``data`` (each run a new one), or a worker's."""
    registry = CalibrationRegistry(
        DEFAULT, DirectoryCalibrationStore(data / "calibrations"), refresh_s=0
    )
    settings = FeedbackSettings(min_labels=N, refit_interval_s=INTERVAL_S, join_ttl_s=10**7)
    store = SqliteFeedbackStore(data / "feedback.sqlite", clock=clock)
    return FeedbackLoop(store, registry, settings, Metrics(), clock=clock)


def scored(tenant: str, n: int) -> list[tuple[ScoredRecord, bool]]:
    """Results and their labels: right less often than the shipped calibration says."""
    rng = random.Random(tenant)
    out = []
    for i in range(n):
        top = rng.uniform(0.3, 0.9)
        record = ScoredRecord(
            query_id=f"{tenant}-q{i}",
            tenant_id=tenant,
            collection="docs",
            kept=True,
            signals={"top_score": top, "support": top * 0.8, "consensus": 0.5, "agreement": top},
            answered=top >= 0.6,
        )
        out.append((record, rng.random() < top - 0.3))
    return out


def label(record: ScoredRecord, relevant: bool, n: int = 0) -> FeedbackEvent:
    return FeedbackEvent(
        event_id=f"fb-{record.query_id}-{n}",
        query_id=record.query_id,
        tenant_id=record.tenant_id,
        relevant=relevant,
    )


@pytest.fixture
def labelled(tmp_path: Path) -> tuple[Path, Clock, FeedbackLoop, list[tuple[ScoredRecord, bool]]]:
    """acme re-fit on 200 labels, 10 more held back by the interval (due in ``worker``);
    beta with labels of its own."""
    data, clock = tmp_path / "data", Clock()
    worker = loop_over(data, clock)
    acme = scored("acme", N + 20)
    worker.store.remember([r for r, _ in acme] + [r for r, _ in scored("beta", 50)], 10**7)
    first = [worker.apply(label(r, y)) for r, y in acme[:N]]
    assert first[-1] is not None
    assert first.count(None) == N - 1
    clock.now += 1
    assert [worker.apply(label(r, y)) for r, y in acme[N : N + 10]] == [None] * 10
    assert worker.refits.is_due(ACME)
    for r, y in scored("beta", 50):
        worker.apply(label(r, y))
    clock.now += INTERVAL_S + 1
    return data, clock, worker, acme


def stored(data: Path) -> CalibrationArtifact | None:
    return DirectoryCalibrationStore(data / "calibrations").get(ACME)


def remove(data: Path, tenant: str = "acme") -> str:
    done = run_cli(
        ["calibrations", "remove", "--collection", "docs", "--tenant", tenant, "--data-dir",
         str(data)]
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return " ".join(done.output.split())


def test_the_next_label_does_not_refit_what_was_removed(
    labelled: tuple[Path, Clock, FeedbackLoop, list[tuple[ScoredRecord, bool]]],
) -> None:
    data, clock, _, acme = labelled
    said = remove(data)
    assert "forgot its 210 feedback labels" in said
    assert f"its next re-fit waits for {N} new sampled labels" in said
    cli = loop_over(data, clock)  # `ragsift feedback`: a new loop each run
    record, relevant = acme[N + 10]
    assert cli.apply(label(record, relevant)) is None
    assert stored(data) is None
    assert [s.record.query_id for s in cli.store.labels(ACME)] == [record.query_id]
    assert cli.store.last_refit(ACME) is None
    # Another tenant's labels in the same collection are its own.
    assert len(cli.store.labels(BETA)) == 50


def test_a_worker_holding_the_scope_due_does_not_refit_it_on_a_replay(
    labelled: tuple[Path, Clock, FeedbackLoop, list[tuple[ScoredRecord, bool]]],
) -> None:
    data, _, worker, acme = labelled
    remove(data)
    assert worker.refits.is_due(ACME)  # the worker's own state: no command reaches it
    replayed = [worker.apply(label(r, y, n=1)) for r, y in acme[:5]]
    assert replayed == [None] * 5
    assert stored(data) is None
    # The labels read again are new to the scope: counted toward its next re-fit.
    assert len(worker.store.labels(ACME)) == 5
    # ... and its state went with the first of them: too few labels, nothing is due.
    assert ACME not in worker.refits


def test_removing_a_collections_calibration_forgets_no_tenants_labels(
    labelled: tuple[Path, Clock, FeedbackLoop, list[tuple[ScoredRecord, bool]]],
) -> None:
    data, _, worker, _ = labelled
    DirectoryCalibrationStore(data / "calibrations").put(CalibrationScope("docs"), DEFAULT)
    done = run_cli(["calibrations", "remove", "--collection", "docs", "--data-dir", str(data)])
    assert done.exit_code == 0, done.output
    assert "forgot" not in done.output
    assert len(worker.store.labels(ACME)) == N + 10


def test_a_feedback_store_it_cannot_use_removes_nothing(
    labelled: tuple[Path, Clock, FeedbackLoop, list[tuple[ScoredRecord, bool]]],
) -> None:
    """Exit 1 naming the store, the calibration left in force: `remove` can run again."""
    data, _, worker, _ = labelled
    worker.store.close()
    (data / "feedback.sqlite").write_bytes(b"not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (data / f"feedback.sqlite{suffix}").unlink(missing_ok=True)
    done = run_cli(
        ["calibrations", "remove", "--collection", "docs", "--tenant", "acme", "--data-dir",
         str(data)]
    )  # fmt: skip
    assert done.exit_code == 1, done.output
    said = " ".join(done.output.split())
    assert "cannot write the calibration or feedback store" in said
    assert "feedback.sqlite" in said
    assert stored(data) is not None


def test_labels_are_forgotten_when_no_calibration_is_stored(tmp_path: Path) -> None:
    # A tenant with labels and no calibration of its own (too few labels yet, a re-fit
    # withheld, or one removed by hand): `remove` exited 2 and forgot nothing, so its
    # labels could not be forgotten at all.
    data, clock = tmp_path / "data", Clock()
    worker = loop_over(data, clock)
    acme = scored("acme", 50)
    worker.store.remember([r for r, _ in acme] + [r for r, _ in scored("beta", 5)], 10**7)
    for r, y in acme:
        assert worker.apply(label(r, y)) is None
    for r, y in scored("beta", 5):
        worker.apply(label(r, y))
    assert stored(data) is None
    said = remove(data)  # exit 0: something was removed
    assert "no calibration is stored for acme/docs" in said
    assert f"its queries use {DEFAULT.version}" in said
    assert "forgot its 50 feedback labels and its last re-fit" in said
    assert f"its next re-fit waits for {N} new sampled labels" in said
    assert worker.store.labels(ACME) == []
    assert len(worker.store.labels(BETA)) == 5  # another tenant's stay

    again = run_cli(
        ["calibrations", "remove", "--collection", "docs", "--tenant", "acme", "--data-dir",
         str(data)]
    )  # fmt: skip
    assert again.exit_code == 2, again.output  # nothing at all to remove: bad input
    said = " ".join(again.output.split())
    assert "no calibration is stored for acme/docs and no feedback labels: nothing removed" in (
        said
    )
