"""``ragsift eval --feedback``: the feedback loop replayed on a labelled set."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.cli.replay import feedback_words
from ragsift.confidence import (
    CalibrationArtifact,
    ConfidenceEngine,
    ConfidenceError,
    load_calibration,
)
from ragsift.confidence.refit import withheld_because
from ragsift.evaluation import RetrievalRun, load_squad, run_retrieval
from ragsift.evaluation.feedback import (
    FeedbackDraw,
    SimulatedFeedback,
    draw_feedback,
    repeat_feedback,
    simulate_feedback,
)
from ragsift.evaluation.mix import History, as_served
from ragsift.evaluation.scoring import hit_batch, served_config
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.engines import packaged_calibration_path
from tests.unit.evaluation.test_squad_eval import OUTSIDE, TOPICS, write_squad

EMBEDDER = "ragsift-hashing-v1-384"


def _shipped() -> CalibrationArtifact:
    path = packaged_calibration_path(EMBEDDER)
    assert path is not None
    return load_calibration(path, embedder_id=EMBEDDER, metric="cosine")


@pytest.fixture(autouse=True)
def hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI embeds with the model the shipped artifact below was fit for."""
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("feedback")
    labelled = write_squad(folder / "dev.json", TOPICS, answers=True)
    outside = write_squad(folder / "other.json", OUTSIDE, answers=False)
    return ["--labelled", str(labelled), "--out-of-scope", str(outside)]


@pytest.fixture(scope="module")
def run(data: list[str]) -> RetrievalRun:
    dataset = load_squad(Path(data[1]), Path(data[3]))
    return asyncio.run(run_retrieval(dataset, HashingEmbedder(), k=4))


def test_labels_come_from_the_evaluated_questions_and_the_refit_is_reproducible(
    run: RetrievalRun,
) -> None:
    base = _shipped()
    evaluated = np.ones(len(run.queries), dtype=bool)
    evaluated[:20] = False  # not evaluated: never labelled
    first = simulate_feedback(run, base, evaluated, FeedbackDraw(80))
    assert first.labelled.sum() == 80
    assert not first.labelled[:20].any()
    assert first.artifact.version != base.version
    assert first.artifact.data.source == f"feedback:eval/{run.dataset.name}"
    assert first.artifact.data.n_examples == 80
    assert 0 < first.positive_rate < 1
    again = simulate_feedback(run, base, evaluated, FeedbackDraw(80))
    assert again.artifact.version == first.artifact.version  # fixed seed and fit time
    assert (again.labelled == first.labelled).all()
    other = simulate_feedback(run, base, evaluated, FeedbackDraw(80, seed=7))
    assert (other.labelled != first.labelled).any()


def test_near_misses_give_labels_only_where_they_are_scored(run: RetrievalRun) -> None:
    base = _shipped()
    evaluated = np.ones(len(run.queries), dtype=bool)
    near = np.array([q.kind == "near_miss" for q in run.queries])
    assert near.any()
    scored = int((~near).sum())
    _, apart = draw_feedback(run, base, evaluated, FeedbackDraw(scored))  # every scored question
    assert not apart[near].any()
    assert apart[~near].all()
    _, negatives = draw_feedback(
        run, base, evaluated, FeedbackDraw(scored, near_miss_negatives=True)
    )
    assert negatives[near].any()


def test_no_near_misses_labels_every_scored_question_but_the_near_misses(
    run: RetrievalRun,
) -> None:
    """Labels given before the corpus lost what near misses ask for (ADR 039)."""
    base = _shipped()
    evaluated = np.ones(len(run.queries), dtype=bool)
    near = np.array([q.kind == "near_miss" for q in run.queries])
    clear = int((~near).sum())
    draw = FeedbackDraw(clear, sampled_from="no-near-misses", near_miss_negatives=True)
    _, labelled = draw_feedback(run, base, evaluated, draw)
    assert labelled[~near].all()
    assert not labelled[near].any()  # scored, yet never labelled
    with pytest.raises(ConfidenceError, match=f"only {clear} scored questions that are not"):
        draw_feedback(run, base, evaluated, FeedbackDraw(clear + 1, sampled_from="no-near-misses"))


def test_a_biased_draw_labels_more_of_what_went_wrong(run: RetrievalRun) -> None:
    """Users who report what went wrong: at bias 5 the labels hold fewer relevant
    results than a random draw of as many; the same seed gives the same draw."""
    base = _shipped()
    evaluated = np.ones(len(run.queries), dtype=bool)
    fair, _ = draw_feedback(run, base, evaluated, FeedbackDraw(60))
    biased, where = draw_feedback(run, base, evaluated, FeedbackDraw(60, bias=5.0))
    again, where_again = draw_feedback(run, base, evaluated, FeedbackDraw(60, bias=5.0))
    share = np.mean([r.relevant for r in fair])
    assert np.mean([r.relevant for r in biased]) < share
    assert (where == where_again).all()
    assert [r.relevant for r in again] == [r.relevant for r in biased]
    for bad in (0.5, float("nan"), float("inf")):
        with pytest.raises(ConfidenceError, match="bias must be a number >= 1"):
            FeedbackDraw(60, bias=bad)


def test_answered_feedback_is_drawn_from_answered_questions_only(run: RetrievalRun) -> None:
    base = _shipped()
    evaluated = np.ones(len(run.queries), dtype=bool)
    engine = ConfidenceEngine(served_config(base), calibration=base)
    assessed = engine.assess_batch(hit_batch(run, evaluated))
    answered = as_served(assessed.confidence, assessed.docs_within >= 1, base, "auto").answered
    n = int(answered.sum())
    assert n >= 40, "the test set must give the shipped artifact enough answers"
    results, labelled = draw_feedback(
        run, base, evaluated, FeedbackDraw(40, sampled_from="answered")
    )
    assert labelled.sum() == len(results) == 40
    assert answered[labelled].all()
    assert [r.query_id for r in results] == [
        q.query_id for q, x in zip(run.queries, labelled, strict=True) if x
    ]
    with pytest.raises(ConfidenceError, match=f"only {n} answered questions"):
        draw_feedback(run, base, evaluated, FeedbackDraw(n + 1, sampled_from="answered"))
    with pytest.raises(ConfidenceError, match="scored questions"):
        draw_feedback(run, base, evaluated, FeedbackDraw(len(run.queries) + 1))
    assert all(r.answered for r in results)
    # Labels on answers only: the re-fit keeps the map and only raises the bar (ADR 022).
    raised = simulate_feedback(run, base, evaluated, FeedbackDraw(40, sampled_from="answered"))
    assert raised.artifact.conformal.method.startswith("feedback-raise+")
    assert raised.artifact.coefficients == base.coefficients
    mixed, _ = draw_feedback(run, base, evaluated, FeedbackDraw(100))
    assert {r.answered for r in mixed} == {True, False}  # drawn from the traffic


def test_cli_scores_only_the_questions_that_gave_no_label(data: list[str]) -> None:
    runner = CliRunner()
    plain = runner.invoke(app, ["eval", *data, "--probes", "none", "--json"])
    assert plain.exit_code == 0, plain.output
    before = json.loads(plain.stdout.strip().splitlines()[-1])
    path = str(packaged_calibration_path(EMBEDDER))
    args = ["eval", *data, "--artifact", path, "--probes", "none", "--feedback", "60", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    total = sum(v for k, v in summary["counts"].items() if k != "documents")
    assert summary["evaluated_queries"] == total - 60
    feedback = summary["feedback"]
    assert feedback["labels"] == 60
    assert feedback["sampled_from"] == "all"
    assert feedback["base_version"] == _shipped().version
    assert summary["calibration_version"] == feedback["refit_version"] != feedback["base_version"]
    assert "re-fit on 60 feedback labels" in summary["calibration"]
    # The figures before the re-fit are on the same questions as after it.
    assert set(feedback["before"]) == {"calibrated", "calibrated@certified"}
    assert feedback["before"]["calibrated"]["n"] == summary["scorers"][0]["n"]
    assert before["evaluated_queries"] != summary["evaluated_queries"]
    words = runner.invoke(app, args[:-1])
    assert words.exit_code == 0, words.output
    assert "feedback: 60 labels from all questions" in words.output


def test_the_refit_is_served_after_the_base_served_the_labels(run: RetrievalRun) -> None:
    """ADR 040: the base served the labelled questions before the re-fit was in force,
    so the replay reads them first (the scope's history), as the service's scope does,
    in a seeded order; ``carried`` False serves the re-fit afresh."""
    base = _shipped()
    evaluated = np.ones(len(run.queries), dtype=bool)
    replayed = simulate_feedback(run, base, evaluated, FeedbackDraw(60))
    history = replayed.history
    assert history is not None
    assert history.artifact is base
    assert history.observed.size == 60
    assessed = ConfidenceEngine(served_config(base), calibration=base).assess_batch(
        hit_batch(run, evaluated)
    )
    labelled = replayed.labelled[evaluated]
    assert sorted(history.observed) == sorted(assessed.confidence[labelled])
    again = simulate_feedback(run, base, evaluated, FeedbackDraw(60))
    assert again.history is not None
    assert (again.history.observed == history.observed).all()
    assert simulate_feedback(run, base, evaluated, FeedbackDraw(60, carried=False)).history is None
    # Labels on answers only are not the traffic the base served: its history is
    # drawn from all of it, refusals included.
    answers = simulate_feedback(run, base, evaluated, FeedbackDraw(40, sampled_from="answered"))
    assert answers.history is not None
    assert answers.history.observed.size == 40
    assert (answers.history.observed < base.conformal.threshold).any()
    # Read first: on the same version, the scope's reading exists from the first
    # question on, where afresh it waits for the 30th.
    rest = evaluated & ~replayed.labelled
    after = ConfidenceEngine(served_config(base), calibration=base).assess_batch(
        hit_batch(run, rest)
    )
    fresh = as_served(after.confidence, after.docs_within >= 1, base, "auto")
    off_topic = History(base, np.zeros(400))  # a scope that was asked off-topic questions
    warm = as_served(after.confidence, after.docs_within >= 1, base, "auto", history=off_topic)
    assert fresh.estimated_share is not None
    assert warm.estimated_share is not None
    assert warm.estimated_share > fresh.estimated_share  # its history is still read


def test_the_replay_withholds_a_refit_as_the_worker_would(run: RetrievalRun) -> None:
    """ADR 031: the replay scores with what the worker would put in force."""
    base = _shipped()
    evaluated = np.ones(len(run.queries), dtype=bool)
    replayed = simulate_feedback(run, base, evaluated, FeedbackDraw(60))
    labels, _ = draw_feedback(run, base, evaluated, FeedbackDraw(60))
    assert replayed.withheld == withheld_because(replayed.artifact, labels)
    withheld = SimulatedFeedback(
        replayed.artifact, replayed.labelled, 0.3, "all", withheld="too few labels"
    )
    assert withheld.in_force(base) is base
    assert replayed.in_force(base) is (base if replayed.withheld else replayed.artifact)
    summary = withheld.to_dict(base)
    assert summary["withheld"] == "too few labels"
    summary["before"] = {"calibrated": {"answer_rate": 0.2, "risk": 0.02}}
    assert "(withheld: the base stays in force)" in feedback_words(summary)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--feedback", "39"], "greater than or equal to 40"),
        (
            ["--feedback", "60", "--feedback-from", "some"],
            "must be all, answered or no-near-misses, got 'some'",
        ),
        (["--feedback", "5000"], "--feedback: 5000 labels asked for, but only"),
        (["--feedback", str(10**20)], f"--feedback: {10**20} labels asked for, but only"),
        (["--feedback", "60", "--feedback-from", "名前\x01"], "must be all, answered or no-"),
        (["--feedback-bias", "3"], "--feedback-bias needs --feedback N"),
        (["--feedback", "60", "--feedback-bias", "0.5"], "greater than or equal to 1"),
        (["--feedback", "60", "--feedback-bias", "nan"], "less than or equal to 1000000"),
        (["--feedback", "60", "--feedback-bias", "1e300"], "less than or equal to 1000000"),
        (["--feedback-draws", "3"], "--feedback-draws needs --feedback N"),
        (["--feedback-afresh"], "--feedback-afresh needs --feedback N"),
        (["--feedback", "60", "--feedback-draws", "0"], "greater than or equal to 1"),
        (["--feedback", "60", "--feedback-draws", "1001"], "less than or equal to 1000"),
        (["--feedback", "60", "--feedback-draws", "x"], "unable to parse string as an integer"),
        (["--feedback", "5000", "--feedback-draws", "2"], "5000 labels asked for, but only"),
    ],
)
def test_cli_refuses_feedback_it_cannot_replay(
    data: list[str], options: list[str], message: str
) -> None:
    path = str(packaged_calibration_path(EMBEDDER))
    result = CliRunner().invoke(
        app, ["eval", *data, "--artifact", path, "--probes", "none", *options]
    )
    assert result.exit_code == 2
    assert message in " ".join(result.output.replace("│", " ").split())  # rich's box, unwrapped
    assert "Traceback" not in result.output


def test_repeated_draws_are_the_single_replay_drawn_again(run: RetrievalRun) -> None:
    """``eval --feedback-draws``: draw k is the replay at seed + k, its re-fit put in
    force, withheld or postponed as the worker would, and served on the rest."""
    base = _shipped()
    evaluated = np.ones(len(run.queries), dtype=bool)
    draw = FeedbackDraw(60)
    repeated = repeat_feedback(run, base, evaluated, draw, 4)
    assert [d.seed for d in repeated.draws] == [draw.seed + k for k in range(4)]
    for d in repeated.draws:
        one = simulate_feedback(run, base, evaluated, FeedbackDraw(60, seed=d.seed))
        in_force = one.in_force(base)
        expected = (
            "withheld"
            if one.withheld
            else "in_force"
            if one.artifact.conformal.feasible
            else "refuses"
        )
        assert d.outcome == expected
        bar = in_force.conformal.threshold if in_force.conformal.feasible else None
        assert d.threshold == bar
        assert 0.0 <= d.answer_rate <= 1.0
        assert (d.risk is None) == (d.answer_rate == 0.0)
    summary = repeated.to_dict()
    outcomes = ("in_force", "refuses", "withheld", "postponed")
    assert sum(summary[o] for o in outcomes) == summary["draws"] == 4
    assert len(summary["per_draw"]) == 4
    over = sum((d.risk or 0.0) > base.conformal.alpha for d in repeated.draws)
    assert summary["risk_over_alpha"] == over / 4
    with pytest.raises(ConfidenceError, match="at least 1"):
        repeat_feedback(run, base, evaluated, draw, 0)


def test_cli_reports_the_draws_beside_the_first(data: list[str]) -> None:
    path = str(packaged_calibration_path(EMBEDDER))
    args = ["eval", *data, "--artifact", path, "--probes", "none", "--feedback", "60"]
    runner = CliRunner()
    once = runner.invoke(app, [*args, "--json"])
    assert once.exit_code == 0, once.output
    single = json.loads(once.stdout.strip().splitlines()[-1])
    assert "draws" not in single["feedback"]
    result = runner.invoke(app, [*args, "--feedback-draws", "3", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    draws = summary["feedback"].pop("draws")
    assert summary == single  # the figures are the first draw's, as without draws
    assert draws["draws"] == 3
    first = draws["per_draw"][0]
    assert first[0] == 1  # FEEDBACK_SEED: the draw the figures use
    in_force = "withheld" if single["feedback"]["withheld"] else "in_force"
    assert first[1] in (in_force, "refuses")
    assert first[3] == round(single["scorers"][0]["answer_rate"], 4)
    words = runner.invoke(app, [*args, "--feedback-draws", "3"])
    assert words.exit_code == 0, words.output
    assert "feedback over 3 draws" in " ".join(words.output.split())


def test_the_least_feedback_count_is_the_refits_and_the_help_says_why() -> None:
    """eval --feedback takes any count a re-fit takes (40), the service's trigger
    (RAGSIFT_FEEDBACK_MIN_LABELS, 200) being another question; both floors agree."""
    from annotated_types import Ge

    from ragsift.confidence.refit import MIN_REFIT_LABELS
    from ragsift.settings import FeedbackSettings

    field = FeedbackSettings.model_fields["min_labels"]
    floors = [m.ge for m in field.metadata if isinstance(m, Ge)]
    assert floors == [MIN_REFIT_LABELS]
    shown = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    said = " ".join(part.strip("│ ") for part in shown.output.split())
    assert f"At least {MIN_REFIT_LABELS}, the fewest a re-fit takes" in said
    assert f"RAGSIFT_FEEDBACK_MIN_LABELS ({field.default} by default)" in said
