"""Report every scorer on the evaluated queries: ranking, calibration, answers, risk.

Each scorer gives a confidence and an answer/refuse decision per query. Both
are judged against one label (does the context ragsift keeps hold the
answer?). Besides ranking (AUROC, AURC, coverage at a precision) and
calibration (ECE), the report says what the operating point does: the answer
rate, the risk (answered without relevant context / answered) and whether
that risk stayed within the artifact's conformal target α. A scorer that
answers nothing has no risk (``None``), never a precision of 0.

Seed rules A–D are scored twice: at their fixed 0.70 hit bar (as designed)
and at the hit threshold fitted for the embedder (the ``@fit`` rows), so the
table separates what the scorer adds from what the threshold adds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence import (
    SIGNAL_NAMES,
    CalibrationArtifact,
    ConfidenceConfig,
    ConfidenceEngine,
    aurc,
    auroc,
    ece_by_chance,
    expected_calibration_error,
    proportion_interval,
    refusal_quality,
    risk_coverage_curve,
)
from ragsift.confidence.mix import UnanswerableShare
from ragsift.evaluation.mix import (
    History,
    OrderSpread,
    ServedMix,
    as_served,
    monitored,
    over_orders,
)
from ragsift.evaluation.runner import RetrievalRun
from ragsift.evaluation.scoring import (
    answer_in_kept,
    hit_batch,
    relevance_matrix,
    served_config,
)

__all__ = ["Evaluation", "ScorerReport", "evaluate_scorers", "proportion_interval"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
# Precisions at which coverage is reported: the usual "90% / 95% right" operating points.
PRECISION_POINTS = (0.90, 0.95)


@dataclass(frozen=True, slots=True)
class ScorerReport:
    """One scorer's figures on the evaluated queries.

    ``risk`` is None when nothing was answered; ``target_held`` is None then
    too, and when the artifact's conformal threshold was infeasible (the
    reason is in ``infeasible``).
    """

    name: str
    rule: str
    n: int
    auroc: float
    ece: float
    coverage_at_p90: float
    coverage_at_p95: float
    aurc: float
    answered: int
    answer_rate: float
    risk: float | None
    #: The risk's exact (Clopper-Pearson) 95% interval over the answered questions:
    #: a risk measured on a handful of answers says little, and this says how little.
    risk_interval: tuple[float, float] | None
    alpha: float
    target_held: bool | None
    infeasible: str | None
    refusal_precision: float
    refusal_recall: float
    near_miss_refusal_rate: float
    #: AUROC over in-scope and near-miss questions only: can the confidence tell "on
    #: topic and answers" from "on topic, no answer" (NaN without near misses).
    near_miss_auroc: float = float("nan")
    #: The ECE a perfectly calibrated scorer would reach by chance on these
    #: confidences, 95th percentile (:func:`~ragsift.confidence.ece_by_chance`):
    #: an ``ece`` under it is no evidence of miscalibration at this ``n``.
    ece_by_chance: float = float("nan")

    @property
    def target(self) -> str:
        """The target's outcome in words: held, missed, nothing answered or infeasible."""
        if self.infeasible is not None:
            return f"infeasible: {self.infeasible}"
        if self.target_held is None:
            return "nothing answered"
        return "held" if self.target_held else "missed"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN becomes null: JSON has no NaN)."""
        out: dict[str, Any] = {}
        for key, value in dataclasses.asdict(self).items():
            if isinstance(value, float):
                value = None if math.isnan(value) else round(value, 4)
            out[key] = value
        out["target"] = self.target
        return out


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The reports plus every scorer's per-query confidence and decision."""

    reports: list[ScorerReport]
    query_index: npt.NDArray[np.int64]
    """Indices (into the run's queries) of the evaluated queries."""
    labels: FloatArray
    scores: dict[str, tuple[FloatArray, BoolArray]]
    mix: ServedMix
    """What re-certifying at the evaluated questions' mix did to the calibrated answers."""
    signals: FloatArray
    """The calibrated scorer's signals, one row per query (columns: ``SIGNAL_NAMES``)."""
    orders: OrderSpread | None = None
    """The calibrated answers as served in several arrival orders (``orders`` > 1)."""

    def per_query(self, run: RetrievalRun) -> Iterator[dict[str, Any]]:
        """One JSON-ready row per evaluated query: id, kind, label, hit rank, the signals
        the calibrated scorer read (null: not read), each scorer."""
        ranks = run.relevant_rank()
        for row, i in enumerate(self.query_index):
            q = run.queries[i]
            yield {
                "query_id": q.query_id,
                "kind": q.kind,
                "label": int(self.labels[row]),
                "hit_rank": int(ranks[i]) or None,
                "signals": {
                    n: None if math.isnan(v) else round(v, 4)
                    for n, v in zip(SIGNAL_NAMES, self.signals[row].tolist(), strict=True)
                },
                "scorers": {
                    name: {"confidence": round(float(c[row]), 4), "answered": bool(a[row])}
                    for name, (c, a) in self.scores.items()
                },
            }


def _coverage_at(confidence: FloatArray, labels: FloatArray, precision: float) -> float:
    """Largest share of queries answerable (most confident first) at this precision."""
    curve = risk_coverage_curve(confidence, labels)
    ok = 1.0 - curve.risk >= precision - 1e-12
    return float(curve.coverage[ok].max()) if ok.any() else 0.0


def _report(
    name: str,
    rule: str,
    confidence: FloatArray,
    answered: BoolArray,
    labels: FloatArray,
    kinds: npt.NDArray[np.str_],
    *,
    scored: BoolArray,
    alpha: float,
    infeasible: str | None = None,
) -> ScorerReport:
    c, y, a = confidence[scored], labels[scored], answered[scored]
    # Out of scope (and near misses, when scored) should be refused.
    refusal = refusal_quality(~a, kinds[scored] != "in_scope")
    near = kinds == "near_miss"
    on_topic = near | (kinds == "in_scope")
    n_answered = int(a.sum())
    risk = float(1.0 - y[a].mean()) if n_answered else None
    return ScorerReport(
        name=name,
        rule=rule,
        n=int(scored.sum()),
        auroc=auroc(c, y),
        ece=expected_calibration_error(c, y),
        ece_by_chance=ece_by_chance(c),
        coverage_at_p90=_coverage_at(c, y, PRECISION_POINTS[0]),
        coverage_at_p95=_coverage_at(c, y, PRECISION_POINTS[1]),
        aurc=aurc(c, y),
        answered=n_answered,
        answer_rate=float(a.mean()) if a.size else 0.0,
        risk=risk,
        risk_interval=proportion_interval(int((y[a] == 0).sum()), n_answered),
        alpha=alpha,
        target_held=None if risk is None or infeasible else risk <= alpha,
        infeasible=infeasible,
        refusal_precision=refusal.precision,
        refusal_recall=refusal.recall,
        near_miss_refusal_rate=float((~answered[near]).mean()) if near.any() else float("nan"),
        near_miss_auroc=auroc(confidence[on_topic], labels[on_topic])
        if near.any()
        else float("nan"),
    )


def _seed_rules(
    engine: Any, base: ConfidenceConfig, hit_bar: float, suffix: str
) -> Iterator[tuple[str, str, FloatArray, BoolArray]]:
    """Seeds A–D at one hit bar: (name, rule, confidence, answered)."""
    bar = f"{hit_bar:.2f}"
    a = engine(scorer="mean-kept", similarity_threshold=hit_bar)
    yield (
        f"seed-A{suffix}",
        f"A3/A4: mean of hits >= {bar}, answer unless no_relevant_context",
        a.confidence,
        a.confidence >= base.levels.low,
    )
    b = engine(scorer="weighted", similarity_threshold=hit_bar)
    yield (
        f"seed-B{suffix}",
        f"B2: weighted signals (hit bar {bar}), answer at >= 0.50 (LOW and up)",
        b.confidence,
        b.confidence >= base.levels.low,
    )
    c = engine(scorer="composite", similarity_threshold=hit_bar)
    yield (
        f"seed-C{suffix}",
        f"C1: composite (hit bar {bar}), advisory below 0.70",
        c.confidence,
        c.confidence >= base.advisory.advisory,
    )
    docs = b.docs_within.astype(np.float64)
    yield (
        f"seed-D{suffix}",
        f"D1: answerable with >= {base.min_documents} documents within {bar}",
        np.minimum(docs / base.min_documents, 1.0),
        b.docs_within >= base.min_documents,
    )


def evaluate_scorers(
    run: RetrievalRun,
    artifact: CalibrationArtifact,
    evaluated: np.ndarray,
    *,
    near_miss_negatives: bool = False,
    unanswerable_share: UnanswerableShare = "auto",
    near_miss: bool = True,
    mix_lower: bool = True,
    watched: tuple[CalibrationArtifact, FloatArray] | None = None,
    orders: int = 1,
    history: History | None = None,
) -> Evaluation:
    """The calibrated scorer and the seed rules A–E on the ``evaluated`` queries.

    Near-miss questions are scored separately (their refusal rate) unless
    ``near_miss_negatives``: then they join every figure as negatives. The
    ``calibrated`` row answers as the service would at ``unanswerable_share``
    (:func:`~ragsift.evaluation.mix.as_served`), reading near misses with
    ``near_miss`` and lowering the bar with ``mix_lower`` (ADR 030);
    ``calibrated@certified`` at the certified threshold alone.
    ``watched``: the calibration and confidences the scope's mix reads the questions
    at, where not ``artifact``'s (a keyword-only run: the same questions' hybrid
    confidences, :func:`~ragsift.evaluation.mix.hybrid_reads`, ADR 029).
    ``orders``: over 1, the ``calibrated`` row is also replayed in that many arrival
    orders (:func:`~ragsift.evaluation.mix.over_orders`, ``Evaluation.orders``).
    ``history``: the scope's traffic before the evaluated queries, which its mix read
    first (``eval --feedback``: the labelled questions as the base served them).
    """
    batch = hit_batch(run, evaluated)
    kinds = np.array([q.kind for q in run.queries])[evaluated]
    scored = np.ones(len(kinds), dtype=bool) if near_miss_negatives else kinds != "near_miss"
    base = ConfidenceConfig(embedder_id=run.embedder_id)
    alpha = artifact.conformal.alpha

    def engine(**changes: Any) -> Any:  # the seed rules, each on the same hits
        return ConfidenceEngine(dataclasses.replace(base, **changes)).assess_batch(batch)

    fitted_bar = artifact.similarity_threshold
    hit_bar = base.similarity_threshold if fitted_bar is None else fitted_bar
    cal = ConfidenceEngine(served_config(artifact), calibration=artifact).assess_batch(batch)
    # One label for every scorer: does the context ragsift keeps hold the answer?
    labels = answer_in_kept(cal, relevance_matrix(run, evaluated))
    conformal = artifact.conformal
    infeasible = (
        None
        if conformal.feasible
        else f"no threshold certified risk <= {conformal.alpha} on"
        f" {conformal.n_calibration} calibration queries"
    )
    reads: dict[str, Any] = {
        "near_miss": near_miss,
        "lower": mix_lower,
        "observed": monitored(artifact, cal, run.mode == "dense")
        if watched is None
        else watched[1],
        "watched": None if watched is None else watched[0],
        "history": history,
    }
    served = as_served(cal.confidence, cal.docs_within >= 1, artifact, unanswerable_share, **reads)
    spread = (
        None
        if orders <= 1
        else over_orders(
            orders,
            labels,
            scored,
            cal.confidence,
            cal.docs_within >= 1,
            artifact,
            unanswerable_share,
            **reads,
        )
    )
    rows: list[tuple[str, str, FloatArray, BoolArray]] = [
        (
            "calibrated",
            f"X1: calibrated probability, conformal answer threshold {conformal.threshold:.2f}"
            f" re-certified at the traffic's mix ({_mix_words(served)})",
            served.confidence,
            served.answered,
        ),
        (
            "calibrated@certified",
            f"X1 at the conformal answer threshold {conformal.threshold:.2f} alone",
            cal.confidence,
            cal.answerable,
        ),
    ]
    plain = list(_seed_rules(engine, base, base.similarity_threshold, ""))
    fitted = list(_seed_rules(engine, base, hit_bar, "@fit")) if fitted_bar is not None else []
    for i, row in enumerate(plain):
        rows.append(row)
        rows.extend(fitted[i : i + 1])
    e = engine(scorer="weighted", selection="adaptive")
    e_conf = e.selection.adaptive_confidence
    e_conf = np.zeros(len(labels)) if e_conf is None else np.clip(e_conf, 0.0, 1.0)
    e_answer = np.array([s != "no_results" for s in e.stop_reasons], dtype=bool)
    e_answer &= e_conf >= base.adaptive.threshold
    rows.append(("seed-E", "E1: adaptive-k accumulated confidence, stop at 0.70", e_conf, e_answer))
    reports = [
        _report(
            name,
            rule,
            np.asarray(conf, dtype=np.float64),
            np.asarray(answered, dtype=bool),
            labels,
            kinds,
            scored=scored,
            alpha=alpha,
            infeasible=infeasible if name.startswith("calibrated") else None,
        )
        for name, rule, conf, answered in rows
    ]
    scores = {
        name: (np.asarray(conf, dtype=np.float64), np.asarray(answered, dtype=bool))
        for name, _, conf, answered in rows
    }
    index = np.flatnonzero(evaluated)
    return Evaluation(reports, index, labels, scores, served, cal.signals, spread)


def _mix_words(served: ServedMix) -> str:
    """How the mix bar was set, in words for the rule column."""
    if served.calibration_share is None:
        return "no mix table in the artifact"
    if served.mode == "off":
        return "off"
    if served.mode != "auto":
        return f"declared {served.mode:.2f} unanswerable; bar {served.bar:.2f}"
    if served.estimated_share is None:
        return "too few questions to estimate"
    near = ""
    if served.near_miss_share is not None:
        near = (
            f", {served.near_miss_share:.2f} near misses (>= {served.near_miss_lower:.2f})"
            f" vs {served.calibration_near_miss:.2f}"
        )
    lowered = f"; {served.lowered} at a lower bar" if served.lowered else ""
    return (
        f"estimated {served.estimated_share:.2f} unanswerable ({served.lower_bound:.2f}"
        f"-{served.upper_bound:.2f}) vs {served.calibration_share:.2f} calibrated{near};"
        f" final bar {served.bar:.2f}{lowered}"
    )
