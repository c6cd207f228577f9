"""`ragsift feedback` on the embedded runtime: labels kept under the data dir, a re-fit when due."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import EmbedderSettings, Settings

QUESTIONS = (
    "How many days do I have to return the Orbit thermostat for a refund?",
    "What are the API rate limits per key?",
    "How long is temperature data kept?",
    "Does Orbit work with heat pumps?",
    "Who won the football world cup in 2014?",
    "What is the boiling point of ethanol?",
)
MIN_LABELS = 40


@pytest.fixture
def answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[RetrievalResult]:
    """Results of MIN_LABELS + 2 embedded queries, remembered under tmp_path."""
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")
    monkeypatch.setenv("RAGSIFT_FEEDBACK_MIN_LABELS", str(MIN_LABELS))
    monkeypatch.setenv("RAGSIFT_FEEDBACK_REFIT_INTERVAL_S", "0")
    settings = Settings(data_dir=tmp_path, embedder=EmbedderSettings(kind="hashing"))

    async def run() -> list[RetrievalResult]:
        async with EmbeddedRuntime(settings) as runtime:
            await runtime.ingest("acme", sample_documents())
            events = [
                QueryEvent(query_id=f"q{i}", tenant_id="acme", query=QUESTIONS[i % len(QUESTIONS)])
                for i in range(MIN_LABELS + 2)
            ]
            return [r for r in await runtime.ask(events) if isinstance(r, RetrievalResult)]

    return asyncio.run(run())


def label(tmp_path: Path, query_id: str, relevant: bool, *extra: str) -> Result:
    flag = "--relevant" if relevant else "--not-relevant"
    return CliRunner().invoke(
        app, ["feedback", query_id, flag, "--data-dir", str(tmp_path), *extra]
    )


def test_labels_refit_the_tenants_calibration_once_enough_exist(
    tmp_path: Path, answered: list[RetrievalResult]
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    scope = CalibrationScope("default", "acme")
    outputs = []
    for i, result in enumerate(answered[:MIN_LABELS]):
        # The first two questions of each cycle are what this user found useful; the
        # third is answered too, and this user says wrongly: a third of the answers.
        out = label(tmp_path, result.query_id, i % len(QUESTIONS) < 2)
        assert out.exit_code == 0, out.output
        outputs.append(out.output)
    assert "re-fit the calibration of acme/default" in outputs[-1]
    # Each label before says how far the fit is; the one that fits does not.
    assert f"(acme/default: 1 label; {MIN_LABELS - 1} more sampled labels until a fit)" in (
        " ".join(outputs[0].split())
    )
    assert "1 more sampled label until a fit" in " ".join(outputs[-2].split())
    assert "until a fit" not in outputs[-1]
    said = " ".join(outputs[-1].split())
    assert f"on {MIN_LABELS} labels" in said  # and what it did to the bar
    assert "answer threshold" in said
    assert not any("re-fit" in o for o in outputs[:-1])
    tuned = store.get(scope)
    assert tuned is not None
    assert tuned.data.n_examples == MIN_LABELS
    # The same label again: nothing changes.
    again = label(tmp_path, answered[0].query_id, True)
    assert again.exit_code == 0
    assert "re-fit" not in again.output
    assert store.get(scope) == tuned


def test_labels_no_refit_can_be_made_of_say_so(
    tmp_path: Path, answered: list[RetrievalResult]
) -> None:
    """Every label "not relevant": no re-fit can be made of them (one kind only), so it is
    postponed until other labels come. The output said only the label count, so a user
    labelled on past the minimum and never learnt why nothing changed."""
    outputs = []
    for result in answered[:MIN_LABELS]:
        out = label(tmp_path, result.query_id, False)
        assert out.exit_code == 0, out.output
        outputs.append(" ".join(out.output.split()))
    assert "re-fit of acme/default postponed until other labels come" in outputs[-1]
    assert not any("re-fit" in o for o in outputs[:-1])
    stored = DirectoryCalibrationStore(tmp_path / "calibrations")
    assert stored.get(CalibrationScope("default", "acme")) is None


def test_a_refit_too_few_labels_certify_is_withheld_and_said_so(
    tmp_path: Path, answered: list[RetrievalResult]
) -> None:
    """ADR 031: every answer labelled right, but 40 labels hold 21 answers, too few to
    certify a bar: the re-fit is withheld, and the scope keeps its calibration."""
    outputs = []
    for i, result in enumerate(answered[:MIN_LABELS]):
        out = label(tmp_path, result.query_id, i % len(QUESTIONS) < 3)
        assert out.exit_code == 0, out.output
        outputs.append(" ".join(out.output.split()))
    assert "re-fit of acme/default withheld" in outputs[-1]
    assert f"{MIN_LABELS} labels certify no answer threshold" in outputs[-1]
    assert "answered results among them were wrong 0 of" in outputs[-1]
    assert not any("re-fit" in o for o in outputs[:-1])
    assert (
        DirectoryCalibrationStore(tmp_path / "calibrations").get(
            CalibrationScope("default", "acme")
        )
        is None
    )


def test_unknown_query_and_another_tenant_are_refused(
    tmp_path: Path, answered: list[RetrievalResult]
) -> None:
    unknown = label(tmp_path, "never-asked", True)
    assert unknown.exit_code == 2  # an id that does not exist: bad input
    assert "no scored result" in unknown.output
    other = label(tmp_path, answered[0].query_id, True, "--tenant", "mallory")
    assert other.exit_code == 2
    assert "names tenant 'mallory'" in other.output
    hostile = label(tmp_path, "q\x00" + "x" * 5_000, True)
    assert hostile.exit_code == 2  # an id no event may carry: bad input, as for `ask`


def test_a_fault_of_the_stored_data_is_exit_1_and_says_it_is_not_the_input(
    tmp_path: Path, answered: list[RetrievalResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The input is checked before the loop runs, so a ValueError out of it is the re-fit's
    own (a result row with no collection, the first such fault found, is now passed over
    and counted as unreadable). It said only the bare error, which reads as a bad option."""
    from ragsift.workers.calibration import FeedbackLoop

    real = FeedbackLoop.apply

    def failing(self: FeedbackLoop, event: object, *, afresh: bool = False) -> str | None:
        if event.query_id == answered[0].query_id:  # type: ignore[attr-defined]
            raise ValueError("the re-fit's isotonic map has no points")
        return real(self, event, afresh=afresh)  # type: ignore[arg-type]

    monkeypatch.setattr(FeedbackLoop, "apply", failing)
    query_id = answered[0].query_id
    got = label(tmp_path, query_id, True)
    assert got.exit_code == 1, got.output  # not the input's fault: not 2
    said = " ".join(got.output.split())
    assert f"labelling {query_id} failed on the feedback store's data or its re-fit" in said
    assert "not on the input" in said
    assert "isotonic map has no points" in said
    assert "Traceback" not in got.output
    fine = label(tmp_path, answered[1].query_id, True)  # the other results are not affected
    assert fine.exit_code == 0, fine.output


def test_a_result_row_no_result_could_have_written_is_an_unknown_query(
    tmp_path: Path, answered: list[RetrievalResult]
) -> None:
    """A row with no collection read well and failed at its scope, exit 1 ("a calibration
    scope needs a collection"). It is unreadable, as a row of bad JSON is: passed over,
    counted, and the label has no result to join (exit 2, as for an unknown id)."""
    db = tmp_path / "feedback.sqlite"
    query_id = answered[0].query_id
    with sqlite3.connect(db) as conn:
        (body,) = conn.execute("SELECT body FROM scored WHERE query_id = ?", (query_id,)).fetchone()
        damaged = {**json.loads(body), "collection": ""}
        conn.execute(
            "UPDATE scored SET body = ? WHERE query_id = ?", (json.dumps(damaged), query_id)
        )
    got = label(tmp_path, query_id, True)
    assert got.exit_code == 2, got.output
    assert "no scored result" in " ".join(got.output.split())
    assert "Traceback" not in got.output
    fine = label(tmp_path, answered[1].query_id, True)
    assert fine.exit_code == 0, fine.output


def test_reported_labels_are_kept_and_said_so_but_never_re_fit(
    tmp_path: Path, answered: list[RetrievalResult]
) -> None:
    """Thumbs-downs a user chose to give (`--reported`): as many as a re-fit needs, and
    none happens; the output says how many labels are reports."""
    outputs = []
    for result in answered[:MIN_LABELS]:
        out = label(tmp_path, result.query_id, False, "--reported")
        assert out.exit_code == 0, out.output
        outputs.append(" ".join(out.output.split()))
    assert not any("re-fit" in o for o in outputs)
    assert (
        f"not relevant (reported) (acme/default: {MIN_LABELS} labels, {MIN_LABELS} of"
        in (outputs[-1])
    )
    assert "reported (never fit on)" in outputs[-1]
    # Reports bring a fit no nearer: as many sampled labels are wanted as at the start.
    assert f"; {MIN_LABELS} more sampled labels until a fit" in outputs[-1]
    assert (
        DirectoryCalibrationStore(tmp_path / "calibrations").get(
            CalibrationScope("default", "acme")
        )
        is None
    )


def test_the_same_label_again_is_said_to_change_nothing(
    tmp_path: Path, answered: list[RetrievalResult]
) -> None:
    # The output was the same whether the label was new or already there.
    first = label(tmp_path, answered[0].query_id, True)
    assert first.exit_code == 0, first.output
    assert "unchanged" not in first.output
    again = label(tmp_path, answered[0].query_id, True)
    assert again.exit_code == 0, again.output
    assert "unchanged: it was labelled so already" in " ".join(again.output.split())
    flipped = label(tmp_path, answered[0].query_id, False)
    assert "unchanged" not in flipped.output


@pytest.mark.parametrize("flags", [["--relevant", "--not-relevant"], []])
def test_a_label_is_one_of_the_two_flags(tmp_path: Path, flags: list[str]) -> None:
    # Both flags were accepted and the last one given won, silently.
    got = CliRunner().invoke(app, ["feedback", "q1", *flags, "--data-dir", str(tmp_path)])
    assert got.exit_code == 2
    assert "--relevant or --not-relevant" in got.output
    assert not any(tmp_path.iterdir())  # nothing was stored
