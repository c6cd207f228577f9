"""Evaluation metrics for confidence (X7): AUROC, ECE, risk-coverage, AURC, refusal quality.

All take a confidence per query and a label (1 = the relevant context was
retrieved / the query deserved an answer) and are pure numpy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence._scipy import beta_ppf, rankdata_rows
from ragsift.confidence.errors import ConfidenceError

__all__ = [
    "RefusalQuality",
    "RiskCoverage",
    "aurc",
    "auroc",
    "brier_score",
    "ece_by_chance",
    "expected_calibration_error",
    "proportion_interval",
    "refusal_quality",
    "risk_coverage_curve",
]

FloatArray = npt.NDArray[np.float64]
# Ten equal-width bins: the common ECE convention (Guo et al., 2017).
DEFAULT_ECE_BINS = 10


def _inputs(confidence: npt.ArrayLike, labels: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    c = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if c.ndim != 1 or c.shape != y.shape:
        raise ConfidenceError(
            f"confidence and labels must be 1-D and equal length, got {c.shape} and {y.shape}"
        )
    if not np.isin(y, (0.0, 1.0)).all():
        raise ConfidenceError("labels must be 0 or 1")
    return c, y


def auroc(confidence: npt.ArrayLike, labels: npt.ArrayLike) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties count half); NaN if one class only."""
    c, y = _inputs(confidence, labels)
    n_pos = float(y.sum())
    n_neg = float(y.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata_rows(c)
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def expected_calibration_error(
    confidence: npt.ArrayLike, labels: npt.ArrayLike, n_bins: int = DEFAULT_ECE_BINS
) -> float:
    """ECE: sum over equal-width bins of (bin share) x |mean label - mean confidence|."""
    if n_bins < 1:
        raise ConfidenceError(f"n_bins must be > 0, got {n_bins}")
    c, y = _inputs(confidence, labels)
    if c.size == 0:
        return 0.0
    idx = np.minimum((c * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(idx, minlength=n_bins).astype(np.float64)
    gap = np.abs(
        np.bincount(idx, weights=y, minlength=n_bins)
        - np.bincount(idx, weights=c, minlength=n_bins)
    )
    return float(gap.sum() / c.size) if count.sum() else 0.0


def ece_by_chance(
    confidence: npt.ArrayLike,
    *,
    quantile: float = 0.95,
    draws: int = 400,
    n_bins: int = DEFAULT_ECE_BINS,
    seed: int = 0,
) -> float:
    """The ECE a perfectly calibrated scorer shows on these confidences by chance.

    ECE is biased upward on a small sample: labels drawn true to each confidence
    still miss their bins' means. This draws them ``draws`` times (label 1 with
    probability the confidence; seeded, so a report repeats) and returns the
    ``quantile`` of their ECEs. A measured ECE under it is no evidence of
    miscalibration at this sample size; on 60 questions that bound is about 0.1.
    """
    if not 0.0 < quantile < 1.0 or draws < 1 or n_bins < 1:
        raise ConfidenceError(
            f"need 0 < quantile < 1, draws > 0, n_bins > 0; got {quantile}, {draws}, {n_bins}"
        )
    c, _ = _inputs(confidence, np.zeros(np.shape(confidence)))
    if c.size == 0:
        return 0.0
    idx = np.minimum((c * n_bins).astype(np.int64), n_bins - 1)
    labels = np.random.default_rng(seed).random((draws, c.size)) < c
    # one bincount over every draw: draw d's bins are d * n_bins + bin
    cell = (np.arange(draws)[:, None] * n_bins + idx).ravel()
    hits = np.bincount(cell, weights=labels.ravel(), minlength=draws * n_bins)
    mass = np.tile(np.bincount(idx, weights=c, minlength=n_bins), draws)
    ece = np.abs(hits - mass).reshape(draws, n_bins).sum(axis=1) / c.size
    return float(np.quantile(ece, quantile))


def brier_score(confidence: npt.ArrayLike, labels: npt.ArrayLike) -> float:
    """Mean squared error of the confidence as a probability."""
    c, y = _inputs(confidence, labels)
    return float(np.mean((c - y) ** 2)) if c.size else 0.0


@dataclass(frozen=True, slots=True)
class RiskCoverage:
    """Selective risk at each coverage when answering the most confident queries first.

    Attributes:
        coverage: share of queries answered (1/n, 2/n, ..., 1).
        risk: share of answered queries with label 0.
        threshold: the confidence of the last answered query.
    """

    coverage: FloatArray
    risk: FloatArray
    threshold: FloatArray

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of lists."""
        return {k: v.tolist() for k, v in asdict(self).items()}


def risk_coverage_curve(confidence: npt.ArrayLike, labels: npt.ArrayLike) -> RiskCoverage:
    """The risk-coverage curve (Geifman & El-Yaniv, 2017).

    Queries with equal confidence cannot be told apart, so within a tie the
    errors are spread evenly (the expectation over orders) instead of
    following input order, which would flatter a constant scorer.
    """
    c, y = _inputs(confidence, labels)
    order = np.argsort(-c, kind="stable")
    ranked, errors = c[order], 1.0 - y[order]
    wrong = np.cumsum(errors)
    if c.size:
        group = np.r_[0, np.cumsum(ranked[1:] != ranked[:-1])]
        starts = np.r_[0, np.flatnonzero(ranked[1:] != ranked[:-1]) + 1]
        sizes = np.diff(np.r_[starts, c.size])
        before = np.r_[0.0, wrong][starts]
        total = np.add.reduceat(errors, starts)
        within = np.arange(c.size) - starts[group] + 1
        wrong = before[group] + total[group] * within / sizes[group]
    answered = np.arange(1, c.size + 1, dtype=np.float64)
    return RiskCoverage(answered / max(c.size, 1), wrong / answered, c[order])


def aurc(confidence: npt.ArrayLike, labels: npt.ArrayLike) -> float:
    """Area under the risk-coverage curve (mean selective risk over coverages); lower is better."""
    curve = risk_coverage_curve(confidence, labels)
    return float(curve.risk.mean()) if curve.risk.size else 0.0


@dataclass(frozen=True, slots=True)
class RefusalQuality:
    """How well refusals match the queries that should be refused."""

    precision: float
    recall: float
    refusal_rate: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def refusal_quality(refused: npt.ArrayLike, should_refuse: npt.ArrayLike) -> RefusalQuality:
    """Precision and recall of refusals (NaN when undefined)."""
    r = np.asarray(refused, dtype=bool)
    s = np.asarray(should_refuse, dtype=bool)
    if r.shape != s.shape or r.ndim != 1:
        raise ConfidenceError(f"inputs must be 1-D and equal length, got {r.shape} and {s.shape}")
    tp = float((r & s).sum())
    precision = tp / r.sum() if r.sum() else float("nan")
    recall = tp / s.sum() if s.sum() else float("nan")
    return RefusalQuality(
        precision=float(precision),
        recall=float(recall),
        refusal_rate=float(r.mean()) if r.size else 0.0,
        n=int(r.size),
    )


def proportion_interval(errors: int, answered: int) -> tuple[float, float] | None:
    """Two-sided 95% Clopper-Pearson interval of errors / answered (None: nothing answered).

    Any share of counts: ``errors`` of ``answered``.
    """
    if answered == 0:
        return None
    e, n = np.array([float(errors)]), float(answered)
    lower = 0.0 if errors == 0 else float(beta_ppf(0.025, e, np.array([n - errors + 1.0]))[0])
    upper = (
        1.0 if errors == answered else float(beta_ppf(0.975, e + 1.0, np.array([n - errors]))[0])
    )
    return round(lower, 4), round(upper, 4)
