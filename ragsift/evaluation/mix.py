"""The answer decisions of the evaluated questions as the service would make them, mix included.

The service re-certifies a scope's answer threshold at the share of
unanswerable queries it estimates from its recent traffic
(``RAGSIFT_CONFIDENCE_UNANSWERABLE_SHARE``, ragsift/confidence/mix.py). The
evaluation replays that: the evaluated questions arrive as one scope's traffic,
in a seeded random order, and each is decided at the bar its scope had when
it arrived (the estimate covers the questions before it and itself; the first
``min_samples`` are decided at the certified bar, and a young scope's bar moves
only as far as the lower bound of its share allows), and raised where near
misses show (ADR 021). Where the out-of-scope mix moved its bar, its confidence
is the one the service reports, at the share that moved it (ADR 016).
A dense-only run's scope reads each question as the hybrid model would score it
(:func:`~ragsift.retrieval.mix_watch.monitored_confidence`, ADR 028). A keyword-only
run's questions are never counted in their scope (ADR 029): its mix is read from the
same questions searched hybrid, as the scope's hybrid traffic sets it, and each is held
to the bar the keyword model's own tables certify at that mix.
No label is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence import BatchAssessment, CalibrationArtifact, ConfidenceEngine
from ragsift.confidence.mix import MixReading, UnanswerableShare
from ragsift.confidence.mix_monitor import MixMonitor
from ragsift.confidence.scorers import CalibratedScorer, ScoringInputs
from ragsift.confidence.served import served_bar
from ragsift.evaluation.runner import RetrievalRun
from ragsift.evaluation.scoring import hit_batch, served_config
from ragsift.retrieval.mix_watch import reported_prior

__all__ = [
    "History",
    "OrderSpread",
    "ServedMix",
    "answer_rate_and_risk",
    "as_served",
    "hybrid_reads",
    "monitored",
    "over_orders",
    "percentiles",
]

#: Seed of the arrival order of the evaluated questions.
ARRIVAL_SEED = 0


@dataclass(frozen=True, slots=True)
class ServedMix:
    """What the mix did to the calibrated scorer's answers.

    Attributes:
        answered: per evaluated question, answered at its scope's bar on arrival.
        confidence: per evaluated question, its confidence as reported: at the share
            that moved its bar, else the calibrated one.
        mode: ``auto``, ``off`` or the declared share.
        calibration_share: the calibration sample's share of unanswerable queries.
        estimated_share: the estimate after the last question (None: too few, or not auto).
        lower_bound: its one-sided 95% lower bound, which sets the bar.
        bar: the bar after the last question.
        raised: questions decided at a bar other than the certified one.
        upper_bound: the estimate's one-sided 95% upper bound, which sets a lowered
            bar (ADR 030).
        lowered: questions decided at a bar under the certified one.
        raise_share, raise_lower: the share the raise reads (over the questions at
            0.05 and over, as the share of all they are worth, ADR 045) and its lower
            bound, after the last question.
        near_miss_share, near_miss_lower: the three-kind estimate of near misses
            after the last question and its lower bound (None: no near-miss table,
            too few questions, or not auto; ADR 021).
        calibration_near_miss: the calibration sample's share of near misses.
    """

    answered: npt.NDArray[np.bool_]
    confidence: npt.NDArray[np.float64]
    mode: UnanswerableShare
    calibration_share: float | None
    estimated_share: float | None
    lower_bound: float | None
    bar: float
    raised: int
    near_miss_share: float | None = None
    near_miss_lower: float | None = None
    calibration_near_miss: float | None = None
    upper_bound: float | None = None
    lowered: int = 0
    raise_share: float | None = None
    raise_lower: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the per-question decisions)."""
        return {
            "mode": self.mode,
            "calibration_share": self.calibration_share,
            "estimated_share": self.estimated_share,
            "lower_bound": self.lower_bound,
            "upper_bound": self.upper_bound,
            "raise_share": self.raise_share,
            "raise_lower_bound": self.raise_lower,
            "bar": self.bar,
            "questions_at_another_bar": self.raised,
            "questions_at_a_lower_bar": self.lowered,
            "calibration_near_miss_share": self.calibration_near_miss,
            "estimated_near_miss_share": self.near_miss_share,
            "near_miss_lower_bound": self.near_miss_lower,
        }


@dataclass(frozen=True, slots=True)
class History:
    """A scope's traffic before the evaluated questions: the calibration that served it
    and what the scope's mix read of each question, in arrival order. Its histograms
    carry over to the evaluated questions' calibration where the scales allow (ADR
    040), as when a feedback re-fit is put in force after its base served the labels."""

    artifact: CalibrationArtifact
    observed: npt.NDArray[np.float64]


def as_served(
    confidence: npt.NDArray[np.float64],
    enough_documents: npt.NDArray[np.bool_],
    artifact: CalibrationArtifact,
    mode: UnanswerableShare,
    *,
    near_miss: bool = True,
    lower: bool = True,
    seed: int = ARRIVAL_SEED,
    observed: npt.NDArray[np.float64] | None = None,
    watched: CalibrationArtifact | None = None,
    history: History | None = None,
) -> ServedMix:
    """Each question's answer under its scope's mix bar on arrival (see module doc).

    Args:
        confidence: the calibrated scorer's confidence per evaluated question.
        enough_documents: the question keeps enough documents to answer (D1).
        artifact: the calibration (its certified threshold and mix table).
        mode: ``RAGSIFT_CONFIDENCE_UNANSWERABLE_SHARE``.
        near_miss: read near misses too (``RAGSIFT_CONFIDENCE_NEAR_MISS=auto``).
        lower: lower the bar where the traffic is clearly more answerable
            (``RAGSIFT_CONFIDENCE_MIX_LOWER=auto``, ADR 030).
        seed: the arrival order's seed.
        observed: the confidence the scope's mix reads per question, where it is not
            ``confidence`` (dense-only questions, ADR 028; keyword-only ones, ADR 029).
        watched: the calibration whose tables read ``observed``, where it is not
            ``artifact`` (keyword-only questions: the hybrid model's, ADR 029).
        history: the scope's traffic before these questions, read first.
    """
    certified = artifact.conformal
    base = certified.threshold if certified.feasible else 1.0
    table = certified.mix
    near = certified.near_miss if near_miss else None
    watch = artifact if watched is None else watched
    read_table = watch.conformal.mix
    read_near = watch.conformal.near_miss if near_miss else None
    bars = np.full(confidence.shape, base)
    reported = np.array(confidence, dtype=np.float64, copy=True)
    estimate: MixReading | None = None
    seen = confidence if observed is None else observed
    bar = base
    if table is not None and mode != "off":
        monitor = MixMonitor()
        if mode == "auto" and history is not None:
            _read(monitor, history, near_miss)
        for i in np.random.default_rng(seed).permutation(confidence.size):
            if mode == "auto" and read_table is not None:
                estimate = monitor.observe(
                    "eval", "eval", watch.version, read_table, seen[i], read_near
                )
            served = served_bar(base, table, near, mode, estimate, lower=lower)
            bar = bars[i] = served.bar
            if served.reported_at is not None:  # reported as the service reports it
                prior = reported_prior(table.unanswerable_share, served.reported_at)
                if prior is not None:
                    reported[i] = prior.apply(float(confidence[i]))
    near_reading = None if estimate is None else estimate.near_miss
    raising = None if estimate is None else estimate.raising()
    return ServedMix(
        answered=enough_documents & (confidence >= bars),
        confidence=reported,
        mode=mode,
        calibration_share=None if table is None else table.unanswerable_share,
        estimated_share=None if estimate is None else estimate.share,
        lower_bound=None if estimate is None else estimate.lower,
        bar=bar,
        raised=int((bars != base).sum()),
        upper_bound=None if estimate is None else estimate.upper,
        lowered=int((bars < base).sum()),
        raise_share=None if raising is None else raising[0],
        raise_lower=None if raising is None else raising[1],
        near_miss_share=None if near_reading is None else near_reading.share,
        near_miss_lower=None if near_reading is None else near_reading.lower,
        calibration_near_miss=None if near is None else near.near_miss_share,
    )


def _read(monitor: MixMonitor, history: History, near_miss: bool) -> None:
    """Count ``history``'s questions in ``monitor``'s one scope, as its calibration read them."""
    table = history.artifact.conformal.mix
    if table is None:
        return
    near = history.artifact.conformal.near_miss if near_miss else None
    version = history.artifact.version
    for c in history.observed.tolist():
        monitor.observe("eval", "eval", version, table, c, near)


def monitored(
    artifact: CalibrationArtifact, assessed: BatchAssessment, dense_only: bool
) -> npt.NDArray[np.float64] | None:
    """The confidences a scope's mix reads, where they are not the served ones: a
    dense-only run's as the hybrid model scores them
    (:func:`~ragsift.retrieval.mix_watch.monitored_confidence`); None otherwise."""
    if not dense_only or artifact.dense_only is None:
        return None
    none = np.zeros(assessed.confidence.shape)
    inputs = ScoringInputs(assessed.signals, none, assessed.selection.kept_count, none)
    return CalibratedScorer(artifact).score(inputs)


def hybrid_reads(
    run: RetrievalRun, artifact: CalibrationArtifact, evaluated: npt.NDArray[np.bool_]
) -> npt.NDArray[np.float64]:
    """What a scope's mix reads of ``run``'s ``evaluated`` questions (a hybrid run):
    their hybrid confidences under ``artifact``, for keyword-only questions, which the
    scope never counts (ADR 029)."""
    if run.mode != "hybrid":
        raise ValueError(f"a scope's mix is read from hybrid searches, got {run.mode!r}")
    engine = ConfidenceEngine(served_config(artifact), calibration=artifact)
    return engine.assess_batch(hit_batch(run, evaluated)).confidence


def answer_rate_and_risk(
    answered: npt.NDArray[np.bool_], right: npt.NDArray[np.bool_]
) -> tuple[float, float | None]:
    """Share answered, and share of the answers without the relevant context (None:
    nothing answered), over questions already cut to those scored."""
    rate = float(answered.mean()) if answered.size else 0.0
    return rate, float(1.0 - right[answered].mean()) if answered.any() else None


def percentiles(values: npt.NDArray[np.float64], qs: tuple[float, ...]) -> dict[str, float]:
    """``{"p10": ..., "p50": ...}``: the ``qs`` quantiles of ``values``, to 4 decimals."""
    return {f"p{round(q * 100)}": round(float(np.quantile(values, q)), 4) for q in qs}


@dataclass(frozen=True, slots=True)
class OrderSpread:
    """The calibrated answers as served in several arrival orders (``eval
    --arrival-orders``): the order moves when each reading starts and how soon a bar
    moves, so one order is one sample of a scope's early traffic.

    Attributes:
        answer_rate, risk: per order, over the scored questions (risk NaN: none answered).
        alpha: the artifact's risk target.
    """

    answer_rate: npt.NDArray[np.float64]
    risk: npt.NDArray[np.float64]
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the spread of both, and the share of orders whose risk is over
        alpha and over alpha + 0.03 (``risk_over_target``: issue 14's target)."""
        risk = self.risk[~np.isnan(self.risk)]
        return {
            "orders": int(self.answer_rate.size),
            "answer_rate": percentiles(self.answer_rate, (0.1, 0.5, 0.9)),
            "risk": percentiles(risk, (0.1, 0.5, 0.9, 1.0)) if risk.size else None,
            "risk_over_alpha": round(float(np.mean(np.nan_to_num(self.risk) > self.alpha)), 4),
            "risk_over_target": round(
                float(np.mean(np.nan_to_num(self.risk) > self.alpha + 0.03)), 4
            ),
        }


def over_orders(
    orders: int,
    labels: npt.NDArray[np.float64],
    scored: npt.NDArray[np.bool_],
    confidence: npt.NDArray[np.float64],
    enough_documents: npt.NDArray[np.bool_],
    artifact: CalibrationArtifact,
    mode: UnanswerableShare,
    **served: Any,
) -> OrderSpread:
    """:func:`as_served` in ``orders`` arrival orders (seeds :data:`ARRIVAL_SEED` on; the
    first is the one every figure uses), each scored on the ``scored`` questions.

    Raises:
        ValueError: ``orders`` under 1.
    """
    if orders < 1:
        raise ValueError(f"orders must be at least 1, got {orders}")
    right, rates, risks = labels[scored] != 0, [], []
    for seed in range(ARRIVAL_SEED, ARRIVAL_SEED + orders):
        answered = as_served(
            confidence, enough_documents, artifact, mode, seed=seed, **served
        ).answered[scored]
        rate, risk = answer_rate_and_risk(answered, right)
        rates.append(rate)
        risks.append(float("nan") if risk is None else risk)
    return OrderSpread(np.array(rates), np.array(risks), artifact.conformal.alpha)
