"""`ragsift feedback` is a process per label: it cannot remember that a scope is due, so
a label that changed nothing checks for a re-fit too, as a worker's due scope does.

Before, `ragsift feedback` said "the next label (this one again too) re-fits" when its
re-fit could not be stored, and the same label again printed "unchanged" and re-fit
nothing: only a changed label did, where a worker (and the console) re-fit on either.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsift.confidence.artifact import CalibrationArtifact
from ragsift.confidence.registry import CalibrationRegistry, CalibrationScope
from tests.unit.cli.conftest import run_cli
from tests.unit.cli.test_cli_remove_forgets_labels import (
    Clock,
    N,
    label,
    loop_over,
    scored,
    stored,
)


def test_the_same_label_again_refits_what_could_not_be_stored_and_then_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, clock = tmp_path / "data", Clock()
    worker = loop_over(data, clock)
    acme = scored("acme", N)
    worker.store.remember([r for r, _ in acme], 10**7)
    for r, y in acme[:-1]:
        assert worker.apply(label(r, y)) is None
    worker.store.close()
    last, relevant = acme[-1]
    args = ["feedback", last.query_id, "--relevant" if relevant else "--not-relevant"]
    args += ["--data-dir", str(data)]

    def full_disk(
        self: CalibrationRegistry, scope: CalibrationScope, a: CalibrationArtifact
    ) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(CalibrationRegistry, "put", full_disk)
        failed = run_cli(args)
    assert failed.exit_code == 1, failed.output
    assert "the next label (this one again too) re-fits" in " ".join(failed.output.split())
    assert stored(data) is None

    again = run_cli(args)
    assert again.exit_code == 0, again.output
    said = " ".join(again.output.split())
    assert "unchanged: it was labelled so already" in said
    assert "re-fit the calibration of acme/docs" in said
    refit = stored(data)
    assert refit is not None

    replay = run_cli(args)  # re-fit on these labels already: a replay changes nothing
    assert replay.exit_code == 0, replay.output
    assert "re-fit" not in replay.output
    assert stored(data) == refit


def test_redis_down_for_the_re_fit_says_the_label_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Redis calibration store's outage is a service error (the worker waits it
    # out): read as the feedback store's, it said nothing of the label being kept.
    from ragsift.retrieval.redis_calibration import CalibrationStoreDownError

    data, clock = tmp_path / "data", Clock()
    worker = loop_over(data, clock)
    acme = scored("acme", N)
    worker.store.remember([r for r, _ in acme], 10**7)
    for r, y in acme[:-1]:
        assert worker.apply(label(r, y)) is None
    worker.store.close()
    last, relevant = acme[-1]
    args = ["feedback", last.query_id, "--relevant" if relevant else "--not-relevant"]

    def down(self: CalibrationRegistry, scope: CalibrationScope, a: CalibrationArtifact) -> None:
        raise CalibrationStoreDownError(
            "redis calibration store: ConnectionError: refused", service="redis"
        )

    monkeypatch.setattr(CalibrationRegistry, "put", down)
    failed = run_cli([*args, "--data-dir", str(data)])
    assert failed.exit_code == 1, failed.output
    said = " ".join(failed.output.split())
    assert f"labelled {last.query_id}, but its re-fit could not be stored" in said
    assert "the label is kept" in said
