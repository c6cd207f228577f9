"""Score a retrieval run with every scorer, fit the calibration, report the metrics.

Label of a query: 1 when the paragraph holding its answer is among the hits
ragsift keeps (the context handed to the LLM contains the answer), 0
otherwise — always 0 for out-of-scope questions. Every scorer's confidence is
judged against that same label. The data is split by article: calibration is
fit on one part and every figure is reported on the other (near-miss
questions are reported separately: retrieval alone can rarely tell them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence import (
    BatchAssessment,
    CalibrationArtifact,
    ConfidenceConfig,
    ConfidenceEngine,
    HitBatch,
    aurc,
    auroc,
    expected_calibration_error,
    fit_calibration,
    fit_similarity_threshold,
    refusal_quality,
    risk_coverage_curve,
)
from ragsift.confidence.signals import prepare_batch
from ragsift.evaluation.runner import RetrievalRun
from ragsift.retrieval.pipeline import hit_scores

__all__ = ["ScorerReport", "evaluate_scorers", "fit_from_run", "split_mask"]

FIT_FRACTION = 0.5  # half the articles fit the calibration, the other half report


@dataclass(frozen=True, slots=True)
class ScorerReport:
    """One scorer's figures on the report split."""

    name: str
    rule: str
    auroc: float
    ece: float
    coverage_at_p90: float
    coverage_at_p95: float
    aurc: float
    refusal_precision: float
    refusal_recall: float
    near_miss_refusal_rate: float
    answered_precision: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            k: (round(v, 4) if isinstance(v, float) else v)
            for k, v in dataclasses.asdict(self).items()
        }


def split_mask(run: RetrievalRun, fit_fraction: float = FIT_FRACTION, seed: int = 0) -> np.ndarray:
    """True for queries in the fit split; whole articles go to one side."""
    groups = sorted({q.group for q in run.queries})
    rng = np.random.default_rng(seed)
    chosen = set(rng.permutation(groups)[: round(len(groups) * fit_fraction)])
    return np.array([q.group in chosen for q in run.queries])


def relevance_matrix(run: RetrievalRun, mask: np.ndarray) -> np.ndarray:
    """(Q, K) True where hit k of a masked query is its answer's paragraph."""
    idx = np.flatnonzero(mask)
    width = max((len(run.hits[i]) for i in idx), default=0)
    out = np.zeros((len(idx), max(width, 1)), dtype=bool)
    for row, i in enumerate(idx):
        target = run.queries[i].relevant_doc
        for col, hit in enumerate(run.hits[i]):
            out[row, col] = target is not None and hit.doc_id == target
    return out


def answer_in_kept(assessed: BatchAssessment, relevant: np.ndarray) -> np.ndarray:
    """1 when the answer's paragraph is among the kept hits (the context an LLM gets)."""
    order = assessed.prepared.order
    ranked = np.take_along_axis(relevant[:, : order.shape[1]], order, axis=1)
    kept = np.arange(order.shape[1])[None, :] < assessed.selection.kept_count[:, None]
    return np.asarray((ranked & kept).any(axis=1), dtype=np.float64)


def _batch(run: RetrievalRun, mask: np.ndarray) -> HitBatch:
    idx = np.flatnonzero(mask)
    return HitBatch.from_hits([hit_scores(run.hits[i], run.mode, ()) for i in idx])


def fit_from_run(
    run: RetrievalRun, *, alpha: float = 0.1, fit_fraction: float = FIT_FRACTION, seed: int = 0
) -> tuple[CalibrationArtifact, np.ndarray]:
    """Fit the hit threshold and the calibrated scorer on the fit split.

    First the A1 hit threshold for this embedder (keeping 90% of the hits that
    hold an answer), then the probability that the kept context holds the answer.
    Returns the artifact and the split mask (True = fit side).
    """
    fit = split_mask(run, fit_fraction, seed)
    mask = fit & np.array([q.kind != "near_miss" for q in run.queries])
    batch = _batch(run, mask)
    relevant = relevance_matrix(run, mask)
    base = ConfidenceConfig(scorer="weighted", embedder_id=run.embedder_id)
    primary = prepare_batch(batch, base.normalization).primary
    threshold = fit_similarity_threshold(primary, relevant[:, : primary.shape[1]])
    config = dataclasses.replace(base, similarity_threshold=threshold)
    assessed = ConfidenceEngine(config).assess_batch(batch)
    labels = answer_in_kept(assessed, relevant)
    counts = run.dataset.counts()
    fitted = fit_calibration(
        assessed.signals,
        labels,
        embedder_id=run.embedder_id,
        metric="cosine",
        alpha=alpha,
        seed=seed,
        source=f"{run.dataset.name} ({run.mode}, k={run.k})",
        notes=(
            f"label: the answer's paragraph is among the kept hits ({run.mode} top {run.k},"
            f" hit threshold {threshold} keeping 90% of answer-holding hits); fit on"
            f" {int(mask.sum())} in-scope and out-of-scope questions from half the"
            f" articles; corpus {counts['documents']} paragraphs"
        ),
    )
    data = fitted.model_dump(mode="json")
    data.update(similarity_threshold=threshold, version="")
    return CalibrationArtifact.model_validate(data), fit


def _coverage_at(confidence: np.ndarray, labels: np.ndarray, precision: float) -> float:
    """Largest share of queries answerable (most confident first) at this precision."""
    curve = risk_coverage_curve(confidence, labels)
    ok = 1.0 - curve.risk >= precision - 1e-12
    return float(curve.coverage[ok].max()) if ok.any() else 0.0


def _report(
    name: str,
    rule: str,
    confidence: npt.NDArray[np.float64],
    answered: npt.NDArray[np.bool_],
    labels: np.ndarray,
    kinds: np.ndarray,
) -> ScorerReport:
    core = kinds != "near_miss"
    c, y = confidence[core], labels[core]
    refusal = refusal_quality(~answered[core], kinds[core] == "out_of_scope")
    near = kinds == "near_miss"
    answered_core = answered[core]
    return ScorerReport(
        name=name,
        rule=rule,
        auroc=auroc(c, y),
        ece=expected_calibration_error(c, y),
        coverage_at_p90=_coverage_at(c, y, 0.90),
        coverage_at_p95=_coverage_at(c, y, 0.95),
        aurc=aurc(c, y),
        refusal_precision=refusal.precision,
        refusal_recall=refusal.recall,
        near_miss_refusal_rate=float((~answered[near]).mean()) if near.any() else float("nan"),
        answered_precision=float(y[answered_core].mean()) if answered_core.any() else 0.0,
    )


def evaluate_scorers(
    run: RetrievalRun, artifact: CalibrationArtifact, fit: np.ndarray
) -> list[ScorerReport]:
    """The calibrated scorer and the seed rules A–E on the report split."""
    report = ~fit
    batch = _batch(run, report)
    kinds = np.array([q.kind for q in run.queries])[report]
    base = ConfidenceConfig(embedder_id=run.embedder_id)
    out: list[ScorerReport] = []

    def engine(**changes: Any) -> ConfidenceEngine:
        config = dataclasses.replace(base, **changes)
        cal = artifact if config.scorer == "calibrated" else None
        return ConfidenceEngine(config, calibration=cal)

    hit_bar = artifact.similarity_threshold
    cal = engine(  # as the pipeline runs it (ragsift.retrieval.engines.EngineSet)
        scorer="calibrated",
        similarity_threshold=base.similarity_threshold if hit_bar is None else hit_bar,
        min_documents=1,
    ).assess_batch(batch)
    # One label for every scorer: does the context ragsift keeps hold the answer?
    labels = answer_in_kept(cal, relevance_matrix(run, report))
    out.append(
        _report(
            "calibrated",
            "X1: calibrated probability, conformal answer threshold",
            cal.confidence,
            cal.answerable,
            labels,
            kinds,
        )
    )
    a = engine(scorer="mean-kept").assess_batch(batch)
    out.append(
        _report(
            "seed-A",
            "A3/A4: mean of hits >= 0.70, answer unless no_relevant_context",
            a.confidence,
            a.confidence >= base.levels.low,
            labels,
            kinds,
        )
    )
    b = engine(scorer="weighted").assess_batch(batch)
    out.append(
        _report(
            "seed-B",
            "B2: weighted signals, answer at >= 0.50 (LOW and up)",
            b.confidence,
            b.confidence >= base.levels.low,
            labels,
            kinds,
        )
    )
    c = engine(scorer="composite").assess_batch(batch)
    out.append(
        _report(
            "seed-C",
            "C1: composite, advisory below 0.70",
            c.confidence,
            c.confidence >= base.advisory.advisory,
            labels,
            kinds,
        )
    )
    d_docs = b.docs_within.astype(np.float64)
    d_conf = np.minimum(d_docs / base.min_documents, 1.0)
    out.append(
        _report(
            "seed-D",
            "D1: answerable with >= 2 documents within 0.70",
            d_conf,
            b.docs_within >= base.min_documents,
            labels,
            kinds,
        )
    )
    e = engine(scorer="weighted", selection="adaptive").assess_batch(batch)
    e_conf = e.selection.adaptive_confidence
    e_conf = np.zeros(len(labels)) if e_conf is None else np.clip(e_conf, 0.0, 1.0)
    e_answer = np.array([s != "no_results" for s in e.stop_reasons])
    e_answer &= e_conf >= base.adaptive.threshold
    out.append(
        _report(
            "seed-E",
            "E1: adaptive-k accumulated confidence, stop at 0.70",
            e_conf,
            e_answer,
            labels,
            kinds,
        )
    )
    return out


def risk_coverage_points(confidence: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """A few points of the risk–coverage curve, for the JSON report."""
    curve = risk_coverage_curve(confidence, labels)
    return {
        "coverage": curve.coverage[:: max(1, len(curve.coverage) // 10)].tolist(),
        "risk": curve.risk[:: max(1, len(curve.risk) // 10)].tolist(),
    }
