"""``eval --feedback``: replay the feedback loop on a labelled run (ADR 022)."""

from __future__ import annotations

from typing import Annotated, Any, Final, cast

import typer

from ragsift.cli.common import print_error
from ragsift.cli.render import spread_words
from ragsift.confidence.refit import MIN_REFIT_LABELS
from ragsift.settings import FeedbackSettings

__all__ = [
    "FEEDBACK_HELP",
    "MAX_ARRIVAL_ORDERS",
    "MAX_FEEDBACK_DRAWS",
    "ArrivalOrders",
    "Feedback",
    "FeedbackAfresh",
    "FeedbackBias",
    "FeedbackDraws",
    "FeedbackFrom",
    "check_feedback_options",
    "draws_words",
    "feedback_words",
    "replay_feedback",
]

#: Most arrival orders ``eval --arrival-orders`` replays (each replays every question's
#: mix reading: a fraction of a second on SQuAD dev half 2).
MAX_ARRIVAL_ORDERS: Final = 1000
#: Most draws ``eval --feedback-draws`` replays: each re-fits and serves every question
#: again (about a second a draw on SQuAD dev half 2).
MAX_FEEDBACK_DRAWS: Final = 1000
#: ``eval --feedback``'s help. Its least count is the re-fit's own (refit_calibration
#: refuses fewer), not the service's RAGSIFT_FEEDBACK_MIN_LABELS: that one says when a
#: scope's first re-fit is due, and a replay is asked what any count would do (ADR 034
#: measured 200, 300 and 500). The setting cannot go below the re-fit's least count either.
FEEDBACK_HELP: Final = (
    "Replay the feedback loop: label this many of the evaluated questions as a user would"
    " (the kept context held the answer, or not), re-fit the calibration on them as the"
    " calibration worker does (docs/feedback.md), and score the other questions with the"
    f" re-fit, beside the calibration before it. At least {MIN_REFIT_LABELS}, the fewest a"
    " re-fit takes: the service waits for RAGSIFT_FEEDBACK_MIN_LABELS"
    f" ({FeedbackSettings.model_fields['min_labels'].default} by default) before its first,"
    " and a replay shows what any count would do."
)


# ``eval``'s feedback and arrival-order options.
Feedback = Annotated[
    int | None,
    typer.Option(
        "--feedback",
        help=FEEDBACK_HELP,
        min=MIN_REFIT_LABELS,
    ),
]

FeedbackFrom = Annotated[
    str,
    typer.Option(
        "--feedback-from",
        help="Which questions give --feedback labels: 'all' (drawn from the traffic at"
        " random, the sample the re-fit's guarantee assumes), 'answered' (only"
        " questions the calibration answered, as when users label what they were shown)"
        " or 'no-near-misses' (every question but the near misses, as when a scope was"
        " labelled before it lost the documents that make them near misses: with"
        " --holes F --near-miss-negatives, the re-fit is then served on traffic that"
        " has them).",
        metavar="all|answered|no-near-misses",
    ),
]

FeedbackBias = Annotated[
    float,
    typer.Option(
        "--feedback-bias",
        help="With --feedback: a question whose kept context lacks the answer is this"
        " many times as likely to give a label (users who report what went wrong)."
        " 1 is a random draw. The worker keeps such labels out of re-fits when they"
        " come as reported (docs/feedback.md); the replay re-fits on them anyway, to"
        " show what they would do.",
        min=1.0,
        max=1e6,
    ),
]

FeedbackDraws = Annotated[
    int,
    typer.Option(
        "--feedback-draws",
        help="With --feedback: replay this many draws of the labels (the first is the"
        " one the figures use) and report how often the re-fit was put in force,"
        " withheld or refused everything, and the spread of the answer rate and risk"
        " served after it (JSON: feedback.draws). One draw of a few hundred labels is"
        " one sample.",
        min=1,
        max=MAX_FEEDBACK_DRAWS,
    ),
]

FeedbackAfresh = Annotated[
    bool,
    typer.Option(
        "--feedback-afresh",
        help="With --feedback: serve what is in force after the re-fit from an empty"
        " mix reading (as before ADR 040). By default its scope starts from what the"
        " base's read of the traffic the labels came from, where the scales allow, as"
        " the service's does.",
    ),
]

ArrivalOrders = Annotated[
    int,
    typer.Option(
        "--arrival-orders",
        help="Replay the calibrated answers as served in this many arrival orders of"
        " the questions (the first is the one the figures use) and report the spread"
        " of the answer rate and risk (JSON: mix.orders): the order moves when the"
        " scope's readings start and how soon its bar moves.",
        min=1,
        max=MAX_ARRIVAL_ORDERS,
    ),
]


def check_feedback_options(
    feedback: int | None,
    sampled_from: str,
    bias: float,
    draws: int,
    mode: str,
    *,
    afresh: bool = False,
) -> None:
    """Refuse (exit 2, with the reason) ``eval`` feedback options that cannot replay."""
    if sampled_from not in ("all", "answered", "no-near-misses"):
        print_error(
            f"--feedback-from must be all, answered or no-near-misses, got {sampled_from!r}"
        )
        raise typer.Exit(2)
    if feedback is None and bias != 1.0:
        print_error("--feedback-bias needs --feedback N (the labels it biases)")
        raise typer.Exit(2)
    if feedback is None and afresh:
        print_error("--feedback-afresh needs --feedback N (the re-fit it serves)")
        raise typer.Exit(2)
    if feedback is None and draws != 1:
        print_error("--feedback-draws needs --feedback N (the labels it draws)")
        raise typer.Exit(2)
    if feedback is not None and mode == "keyword":
        print_error(
            "--feedback replays the re-fit of the hybrid model, which keyword-only labels"
            " never feed (ADR 029): use --mode hybrid or dense"
        )
        raise typer.Exit(2)


def replay_feedback(
    run: Any,
    artifact: Any,
    evaluated: Any,
    n_labels: int,
    sampled_from: str,
    served: dict[str, Any],
    bias: float = 1.0,
    draws: int = 1,
    *,
    carried: bool = True,
) -> tuple[Any, dict[str, Any], Any]:
    """``eval --feedback``: the re-fit artifact, the figures before it on the same
    questions, and the traffic the base served before the re-fit (the scope's history:
    None with ``carried`` False). The labelled questions leave ``evaluated`` (in place).
    With ``draws`` over 1 (``--feedback-draws``), the summary's ``draws`` holds that many
    draws of the labels, each re-fit and served as the worker would."""
    from ragsift.confidence import ConfidenceError
    from ragsift.evaluation import evaluate_scorers
    from ragsift.evaluation.feedback import repeat_feedback, simulate_feedback

    draw = _draw(n_labels, sampled_from, served, bias, carried)
    repeated = None
    try:
        if draws > 1:  # from every evaluated question, before the first draw's leave
            repeated = repeat_feedback(run, artifact, evaluated, draw, draws)
        simulated = simulate_feedback(run, artifact, evaluated, draw)
    except ConfidenceError as exc:
        print_error(f"--feedback: {exc}")
        raise typer.Exit(2) from exc
    evaluated &= ~simulated.labelled
    before = evaluate_scorers(run, artifact, evaluated, **served, history=simulated.history)
    summary = {**simulated.to_dict(artifact), "carried": carried}
    summary["before"] = {
        r.name: r.to_dict() for r in before.reports if r.name.startswith("calibrated")
    }
    if repeated is not None:
        summary["draws"] = repeated.to_dict()
    return simulated.in_force(artifact), summary, simulated.history


def draws_words(draws: dict[str, Any]) -> str:
    """One line: what became of the draws' re-fits and what was served after them."""
    return (
        f"feedback over {draws['draws']} draws: re-fit in force {draws['in_force']},"
        f" refusing everything {draws['refuses']}, withheld {draws['withheld']},"
        f" postponed {draws['postponed']}; after it, {spread_words(draws, 'draws')}"
    )


def feedback_words(replayed: dict[str, Any]) -> str:
    """One line: the labels, the thresholds, and the served figures before the re-fit."""
    before = replayed["before"]["calibrated"]
    risk = "nothing answered" if before["risk"] is None else f"risk {before['risk']:.3f}"

    def bar(value: float | None) -> str:
        return "none certified" if value is None else f"{value:.2f}"

    bias = replayed["bias"]
    biased = "" if bias == 1.0 else f", the wrong ones {bias:g}x as likely to be labelled"
    withheld = "" if replayed["withheld"] is None else " (withheld: the base stays in force)"

    return (
        f"feedback: {replayed['labels']} labels from {replayed['sampled_from']} questions"
        f"{biased}"
        f" ({replayed['positive_rate']:.0%} relevant); answer threshold"
        f" {bar(replayed['base_threshold'])} -> {bar(replayed['refit_threshold'])}"
        f"{withheld};"
        f" before the re-fit, on the same questions: answer rate"
        f" {before['answer_rate']:.3f}, {risk}"
    )


def _draw(
    n_labels: int, sampled_from: str, served: dict[str, Any], bias: float, carried: bool
) -> Any:
    """The labels ``eval --feedback`` draws, served as the evaluation serves.

    Raises:
        ConfidenceError: a bias under 1 (the CLI's bounds keep it out).
    """
    from ragsift.evaluation.feedback import FeedbackDraw, FeedbackFrom

    return FeedbackDraw(
        n_labels,
        sampled_from=cast(FeedbackFrom, sampled_from),
        near_miss_negatives=served["near_miss_negatives"],
        unanswerable_share=served["unanswerable_share"],
        near_miss=served["near_miss"],
        mix_lower=served["mix_lower"],
        bias=bias,
        carried=carried,
    )
