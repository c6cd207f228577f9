"""``eval --feedback``: replay the feedback loop on a labelled run (ADR 022)."""

from __future__ import annotations

from typing import Any

import typer

from ragsift.cli.common import print_error

__all__ = ["feedback_words", "replay_feedback"]


def replay_feedback(
    run: Any,
    artifact: Any,
    evaluated: Any,
    n_labels: int,
    sampled_from: str,
    served: dict[str, Any],
    bias: float = 1.0,
) -> tuple[Any, dict[str, Any]]:
    """``eval --feedback``: the re-fit artifact, and the figures before it on the same
    questions. The labelled questions leave ``evaluated`` (in place)."""
    from ragsift.confidence import ConfidenceError
    from ragsift.evaluation import evaluate_scorers
    from ragsift.evaluation.feedback import FeedbackDraw, simulate_feedback

    try:
        draw = FeedbackDraw(
            n_labels,
            sampled_from="answered" if sampled_from == "answered" else "all",
            near_miss_negatives=served["near_miss_negatives"],
            unanswerable_share=served["unanswerable_share"],
            near_miss=served["near_miss"],
            mix_lower=served["mix_lower"],
            bias=bias,
        )
        simulated = simulate_feedback(run, artifact, evaluated, draw)
    except ConfidenceError as exc:
        print_error(f"--feedback: {exc}")
        raise typer.Exit(2) from exc
    evaluated &= ~simulated.labelled
    before = evaluate_scorers(run, artifact, evaluated, **served)
    summary = simulated.to_dict(artifact)
    summary["before"] = {
        r.name: r.to_dict() for r in before.reports if r.name.startswith("calibrated")
    }
    return simulated.in_force(artifact), summary


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
