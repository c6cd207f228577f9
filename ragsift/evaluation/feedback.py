"""What feedback would do on a labelled set: ``ragsift eval --feedback N``.

The service re-fits a tenant's calibration from the labels its users give
(:mod:`ragsift.confidence.refit`, docs/feedback.md). The evaluation replays that
on a labelled set: ``N`` of the evaluated questions are labelled as a user would
label their results (the kept context held the answer, or not), the artifact in
force is re-fit on them exactly as the calibration worker re-fits it, and the
rest of the questions are scored with the re-fit, beside the artifact it came
from. No question that gave a label is scored afterwards.

Which questions get labels matters (docs/feedback.md): ``all`` draws them from
the traffic at random, the sample the re-fit's guarantee assumes; ``answered``
draws only from the questions the artifact answered, as when users label only
the answers they were shown. Labels come from the questions the figures score:
where near-miss questions are scored apart (SQuAD's, written to trick a reader,
which a user's traffic does not do), they give no label either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from ragsift.confidence import CalibrationArtifact, ConfidenceEngine
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.mix import UnanswerableShare
from ragsift.confidence.refit import LabelledResult, refit_calibration, withheld_because
from ragsift.confidence.signals import SIGNAL_NAMES
from ragsift.evaluation.mix import as_served, monitored
from ragsift.evaluation.runner import RetrievalRun
from ragsift.evaluation.scoring import answer_in_kept, hit_batch, relevance_matrix, served_config

__all__ = [
    "FEEDBACK_SEED",
    "FeedbackDraw",
    "FeedbackFrom",
    "SimulatedFeedback",
    "draw_feedback",
    "simulate_feedback",
]

FeedbackFrom = Literal["all", "answered"]
#: Seed of which questions give labels.
FEEDBACK_SEED: Final = 1
#: The re-fit's recorded time: fixed, so the same labels give the same artifact version.
_FITTED_AT: Final = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class FeedbackDraw:
    """Which questions give labels (see module doc).

    Attributes:
        n_labels: how many.
        sampled_from: ``all`` or ``answered``.
        near_miss_negatives: near-miss questions are scored, so they give labels too.
        unanswerable_share, near_miss, mix_lower: how ``answered`` is served (the mix
            bars).
        seed: which questions, for a given pool.
        bias: how much likelier a question whose kept context lacks the answer is to
            give a label than one whose context holds it. 1 is a random draw; above 1,
            labels users chose to give (what went wrong gets reported), which the worker
            keeps out of re-fits when they come as reported (ADR 023): the replay
            re-fits on them anyway, to show what they would do.
    """

    n_labels: int
    sampled_from: FeedbackFrom = "all"
    near_miss_negatives: bool = False
    unanswerable_share: UnanswerableShare = "auto"
    near_miss: bool = True
    mix_lower: bool = True
    seed: int = FEEDBACK_SEED
    bias: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bias) and self.bias >= 1.0):
            raise ConfidenceError(f"the feedback bias must be a number >= 1, got {self.bias}")


@dataclass(frozen=True, slots=True)
class SimulatedFeedback:
    """A re-fit on labels from part of the evaluated questions.

    Attributes:
        artifact: the re-fit artifact.
        labelled: (Q,) over the run's questions: True for those that gave a label.
        positive_rate: the labels' share of "relevant".
        sampled_from: ``all`` or ``answered``.
    """

    artifact: CalibrationArtifact
    labelled: npt.NDArray[np.bool_]
    positive_rate: float
    sampled_from: FeedbackFrom
    bias: float = 1.0
    withheld: str | None = None

    def in_force(self, base: CalibrationArtifact) -> CalibrationArtifact:
        """What the scope is scored with after the re-fit: the re-fit, or ``base`` where
        the worker would withhold it (ADR 031)."""
        return base if self.withheld is not None else self.artifact

    def to_dict(self, base: CalibrationArtifact) -> dict[str, object]:
        """JSON-ready summary: the labels and both thresholds."""
        return {
            "labels": int(self.labelled.sum()),
            "sampled_from": self.sampled_from,
            "bias": self.bias,
            "positive_rate": round(self.positive_rate, 4),
            "base_version": base.version,
            "base_threshold": base.conformal.threshold if base.conformal.feasible else None,
            "refit_version": self.artifact.version,
            "refit_threshold": self.artifact.conformal.threshold
            if self.artifact.conformal.feasible
            else None,
            "withheld": self.withheld,
        }


def draw_feedback(
    run: RetrievalRun,
    artifact: CalibrationArtifact,
    evaluated: npt.NDArray[np.bool_],
    draw: FeedbackDraw,
) -> tuple[list[LabelledResult], npt.NDArray[np.bool_]]:
    """The labels ``draw.n_labels`` of the ``evaluated`` questions would give, and which
    gave them.

    A question's label is what a user would say of its result: the kept context
    holds the answer (the label every figure of ``eval`` uses); each label says
    whether its result was answered as served (mix bars included). ``answered``
    draws from those. Near-miss questions give labels only with
    ``near_miss_negatives``, as they are scored.

    Raises:
        ConfidenceError: fewer questions to draw from than ``n_labels``.
    """
    idx = np.flatnonzero(evaluated)
    assessed = ConfidenceEngine(served_config(artifact), calibration=artifact).assess_batch(
        hit_batch(run, evaluated)
    )
    labels = answer_in_kept(assessed, relevance_matrix(run, evaluated))
    answered = as_served(
        assessed.confidence,
        assessed.docs_within >= 1,
        artifact,
        draw.unanswerable_share,
        near_miss=draw.near_miss,
        lower=draw.mix_lower,
        observed=monitored(artifact, assessed, run.mode == "dense"),
    ).answered
    pool = np.arange(idx.size)
    if not draw.near_miss_negatives:
        pool = pool[[run.queries[i].kind != "near_miss" for i in idx]]
    if draw.sampled_from == "answered":
        pool = pool[answered[pool]]
    if draw.n_labels > pool.size:
        where = "answered questions" if draw.sampled_from == "answered" else "scored questions"
        raise ConfidenceError(f"{draw.n_labels} labels asked for, but only {pool.size} {where}")
    rng = np.random.default_rng(draw.seed)
    if draw.bias == 1.0:  # the draw every figure of ADR 022 was made with
        chosen = np.sort(rng.choice(pool, size=draw.n_labels, replace=False))
    else:
        weight = np.where(labels[pool], 1.0, draw.bias)
        chosen = np.sort(
            rng.choice(pool, size=draw.n_labels, replace=False, p=weight / weight.sum())
        )
    results = [
        LabelledResult(
            query_id=run.queries[idx[j]].query_id,
            signals={
                n: float(v)
                for n, v in zip(SIGNAL_NAMES, assessed.signals[j], strict=True)
                if v == v
            },
            kept=bool(assessed.kept_count[j] > 0),
            relevant=bool(labels[j]),
            answered=bool(answered[j]),
            dense_only=run.mode == "dense",
        )
        for j in chosen
    ]
    labelled = np.zeros(len(run.queries), dtype=bool)
    labelled[idx[chosen]] = True
    return results, labelled


def simulate_feedback(
    run: RetrievalRun,
    artifact: CalibrationArtifact,
    evaluated: npt.NDArray[np.bool_],
    draw: FeedbackDraw,
) -> SimulatedFeedback:
    """Re-fit ``artifact`` on the labels :func:`draw_feedback` draws, as the worker would
    (withheld where it would withhold it: :meth:`SimulatedFeedback.in_force`).

    Raises:
        ConfidenceError: too few questions to draw from, or a re-fit the labels
            cannot support (too few, all of one kind).
    """
    results, labelled = draw_feedback(run, artifact, evaluated, draw)
    refit = refit_calibration(
        artifact, results, scope=f"eval/{run.dataset.name}", fitted_at=_FITTED_AT
    )
    positive = float(np.mean([r.relevant for r in results]))
    return SimulatedFeedback(
        refit, labelled, positive, draw.sampled_from, draw.bias, withheld_because(refit, results)
    )
