"""What feedback would do on a labelled set: ``ragsift eval --feedback N``.

The service re-fits a tenant's calibration from the labels its users give
(:mod:`ragsift.confidence.refit`, docs/feedback.md). The evaluation replays that
on a labelled set: ``N`` of the evaluated questions are labelled as a user would
label their results (the kept context held the answer, or not), the artifact in
force is re-fit on them exactly as the calibration worker re-fits it, and the
rest of the questions are scored with the re-fit, beside the artifact it came
from. No question that gave a label is scored afterwards.

One draw of labels is one sample: whether a few hundred labels certify a bar, and
what it then risks, varies from draw to draw. :func:`repeat_feedback` (``eval
--feedback-draws K``) replays K draws and reports how often the re-fit was put in
force, withheld or refused everything, and the spread of what was served after it.

Which questions get labels matters (docs/feedback.md): ``all`` draws them from
the traffic at random, the sample the re-fit's guarantee assumes; ``answered``
draws only from the questions the artifact answered, as when users label only
the answers they were shown; ``no-near-misses`` draws from every question but
the near misses, as when a scope was labelled before it lost the documents that
make them near misses, and is served after (ADR 039). Labels come from the
questions the figures score: where near-miss questions are scored apart (SQuAD's,
written to trick a reader, which a user's traffic does not do), they give no
label either.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from ragsift.confidence import BatchAssessment, CalibrationArtifact, ConfidenceEngine
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.mix import UnanswerableShare
from ragsift.confidence.refit import LabelledResult, refit_calibration, withheld_because
from ragsift.confidence.signals import SIGNAL_NAMES
from ragsift.evaluation.mix import (
    History,
    answer_rate_and_risk,
    as_served,
    monitored,
    percentiles,
)
from ragsift.evaluation.runner import RetrievalRun
from ragsift.evaluation.scoring import answer_in_kept, hit_batch, relevance_matrix, served_config

__all__ = [
    "FEEDBACK_SEED",
    "FeedbackDraw",
    "FeedbackFrom",
    "RepeatedFeedback",
    "SimulatedFeedback",
    "draw_feedback",
    "repeat_feedback",
    "simulate_feedback",
]

FeedbackFrom = Literal["all", "answered", "no-near-misses"]
#: What ``sampled_from`` draws from, in words.
_POOLS: Final[dict[str, str]] = {
    "all": "scored questions",
    "answered": "answered questions",
    "no-near-misses": "scored questions that are not near misses",
}
#: Seed of which questions give labels.
FEEDBACK_SEED: Final = 1
#: The re-fit's recorded time: fixed, so the same labels give the same artifact version.
_FITTED_AT: Final = datetime(2026, 1, 1, tzinfo=UTC)
#: What became of one draw's re-fit: put in force with a bar; put in force with none
#: (the labels show wrong answers: the scope refuses); withheld (ADR 031); or not
#: made (the labels are all of one kind: the worker postpones it).
DrawOutcome = Literal["in_force", "refuses", "withheld", "postponed"]


@dataclass(frozen=True, slots=True)
class FeedbackDraw:
    """Which questions give labels (see module doc).

    Attributes:
        n_labels: how many.
        sampled_from: ``all``, ``answered`` or ``no-near-misses``.
        near_miss_negatives: near-miss questions are scored, so they give labels too.
        unanswerable_share, near_miss, mix_lower: how ``answered`` is served (the mix
            bars).
        seed: which questions, for a given pool.
        bias: how much likelier a question whose kept context lacks the answer is to
            give a label than one whose context holds it. 1 is a random draw; above 1,
            labels users chose to give (what went wrong gets reported), which the worker
            keeps out of re-fits when they come as reported (ADR 023): the replay
            re-fits on them anyway, to show what they would do.
        carried: what is in force after the re-fit is served after the base served the
            traffic the labels came from (the labelled questions; for labels on answers
            only or biased ones, as many drawn from that traffic), so its scope starts
            from what the base's read, where the scales allow (ADR 040), as the
            service's does; False: afresh.
    """

    n_labels: int
    sampled_from: FeedbackFrom = "all"
    near_miss_negatives: bool = False
    unanswerable_share: UnanswerableShare = "auto"
    near_miss: bool = True
    mix_lower: bool = True
    seed: int = FEEDBACK_SEED
    bias: float = 1.0
    carried: bool = True

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
        sampled_from: ``all``, ``answered`` or ``no-near-misses``.
    """

    artifact: CalibrationArtifact
    labelled: npt.NDArray[np.bool_]
    positive_rate: float
    sampled_from: FeedbackFrom
    bias: float = 1.0
    withheld: str | None = None
    #: The traffic the base served before the re-fit, read before what is in force.
    history: History | None = None

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
    return _labelled(run, evaluated, _serve(run, artifact, evaluated, draw), draw)[:2]


@dataclass(frozen=True, slots=True)
class _Served:
    """The ``evaluated`` questions as an artifact serves them: one row each."""

    assessed: BatchAssessment
    labels: npt.NDArray[np.bool_]
    answered: npt.NDArray[np.bool_]
    scored: npt.NDArray[np.bool_]
    kinds: npt.NDArray[np.str_]
    #: What the scope's mix read of each (:func:`~ragsift.evaluation.mix.monitored`).
    observed: npt.NDArray[np.float64]

    def rates(self) -> tuple[float, float | None]:
        """Answer rate and risk over the scored questions (None: nothing answered)."""
        return answer_rate_and_risk(self.answered[self.scored], self.labels[self.scored])


def _serve(
    run: RetrievalRun,
    artifact: CalibrationArtifact,
    evaluated: npt.NDArray[np.bool_],
    draw: FeedbackDraw,
    history: History | None = None,
) -> _Served:
    assessed = ConfidenceEngine(served_config(artifact), calibration=artifact).assess_batch(
        hit_batch(run, evaluated)
    )
    read = monitored(artifact, assessed, run.mode == "dense")
    observed = assessed.confidence if read is None else read
    answered = as_served(
        assessed.confidence,
        assessed.docs_within >= 1,
        artifact,
        draw.unanswerable_share,
        near_miss=draw.near_miss,
        lower=draw.mix_lower,
        observed=observed,
        history=history,
    ).answered
    kinds = np.array([q.kind for q in run.queries])[evaluated]
    return _Served(
        assessed,
        answer_in_kept(assessed, relevance_matrix(run, evaluated)),
        answered,
        np.ones(kinds.size, dtype=bool) if draw.near_miss_negatives else kinds != "near_miss",
        kinds,
        observed,
    )


def _labelled(
    run: RetrievalRun,
    evaluated: npt.NDArray[np.bool_],
    served: _Served,
    draw: FeedbackDraw,
    artifact: CalibrationArtifact | None = None,
) -> tuple[list[LabelledResult], npt.NDArray[np.bool_], History | None]:
    """:func:`draw_feedback`'s draw from questions already served, and with ``artifact``
    (what served them) and ``draw.carried``, their :class:`History` in a seeded order."""
    idx = np.flatnonzero(evaluated)
    assessed, labels, answered = served.assessed, served.labels, served.answered
    pool = np.flatnonzero(served.scored)
    if draw.sampled_from == "no-near-misses":  # the traffic before the near misses came
        pool = pool[served.kinds[pool] != "near_miss"]
    traffic = pool
    if draw.sampled_from == "answered":
        pool = pool[answered[pool]]
    if draw.n_labels > pool.size:
        where = _POOLS[draw.sampled_from]
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
    history = None
    if artifact is not None and draw.carried:
        # What the base served before the re-fit: the labelled questions where they
        # are a random draw of that traffic, else as many drawn from it at random
        # (labels on answers only, or on what went wrong, are not what it served).
        plain = draw.sampled_from != "answered" and draw.bias == 1.0
        before = chosen if plain else rng.choice(traffic, size=chosen.size, replace=False)
        history = History(artifact, served.observed[rng.permutation(before)])
    return results, labelled, history


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
    results, labelled, history = _labelled(
        run, evaluated, _serve(run, artifact, evaluated, draw), draw, artifact
    )
    refit = refit_calibration(
        artifact, results, scope=f"eval/{run.dataset.name}", fitted_at=_FITTED_AT
    )
    positive = float(np.mean([r.relevant for r in results]))
    withheld = withheld_because(refit, results)
    return SimulatedFeedback(
        refit, labelled, positive, draw.sampled_from, draw.bias, withheld, history
    )


@dataclass(frozen=True, slots=True)
class DrawResult:
    """One draw of :func:`repeat_feedback`: its seed, what became of its re-fit, the bar
    put in force (None: none), and the answer rate and risk then served on the
    questions that gave no label (risk None: nothing answered)."""

    seed: int
    outcome: DrawOutcome
    threshold: float | None
    answer_rate: float
    risk: float | None


@dataclass(frozen=True, slots=True)
class RepeatedFeedback:
    """Many draws of one :class:`FeedbackDraw` (seeds ``seed``, ``seed + 1``, ...)."""

    draws: tuple[DrawResult, ...]
    alpha: float

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: how often each outcome, the spread of what was served after the
        re-fit, the share of draws whose risk exceeded alpha, and every draw."""
        rates = np.array([d.answer_rate for d in self.draws])
        risks = np.array([d.risk for d in self.draws if d.risk is not None])
        outcomes: tuple[DrawOutcome, ...] = ("in_force", "refuses", "withheld", "postponed")

        return {
            "draws": len(self.draws),
            **{o: sum(d.outcome == o for d in self.draws) for o in outcomes},
            "answer_rate": percentiles(rates, (0.1, 0.5, 0.9)),
            "risk": percentiles(risks, (0.1, 0.5, 0.9, 1.0)) if risks.size else None,
            "risk_over_alpha": round(
                float(np.mean([(d.risk or 0.0) > self.alpha for d in self.draws])), 4
            ),
            "per_draw": [
                [
                    d.seed,
                    d.outcome,
                    d.threshold,
                    round(d.answer_rate, 4),
                    None if d.risk is None else round(d.risk, 4),
                ]
                for d in self.draws
            ],
        }


def repeat_feedback(
    run: RetrievalRun,
    artifact: CalibrationArtifact,
    evaluated: npt.NDArray[np.bool_],
    draw: FeedbackDraw,
    draws: int,
) -> RepeatedFeedback:
    """``draws`` draws of ``draw`` (seeds ``draw.seed`` on), each re-fit as the worker
    re-fits it and put in force, withheld or postponed as the worker would, then the
    questions that gave no label scored with what is in force, as served.

    Raises:
        ConfidenceError: ``draws`` under 1, or too few questions to draw from.
    """
    if draws < 1:
        raise ConfidenceError(f"draws must be at least 1, got {draws}")
    base = _serve(run, artifact, evaluated, draw)
    results = []
    for seed in range(draw.seed, draw.seed + draws):
        labels, labelled, history = _labelled(
            run, evaluated, base, dataclasses.replace(draw, seed=seed), artifact
        )
        outcome: DrawOutcome
        try:
            refit = refit_calibration(artifact, labels, scope="eval/draws", fitted_at=_FITTED_AT)
        except ConfidenceError:  # all of one kind: the worker postpones the re-fit
            in_force, outcome = artifact, "postponed"
        else:
            withheld = withheld_because(refit, labels) is not None
            in_force = artifact if withheld else refit
            outcome = (
                "withheld" if withheld else "in_force" if refit.conformal.feasible else "refuses"
            )
        answer_rate, risk = _serve(run, in_force, evaluated & ~labelled, draw, history).rates()
        bar = in_force.conformal.threshold if in_force.conformal.feasible else None
        results.append(DrawResult(seed, outcome, bar, answer_rate, risk))
    return RepeatedFeedback(tuple(results), artifact.conformal.alpha)
