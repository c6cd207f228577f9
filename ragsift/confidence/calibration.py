"""Fit the calibrated scorer: a monotone logistic model plus a conformal threshold.

``fit_calibration(signals, labels)`` splits the labelled queries in two: the
first part fits p = sigmoid(b + w . x) by L2-regularized maximum likelihood
(scipy L-BFGS-B, with w >= 0 on score-monotone features so confidence never
falls when a hit improves); the second part, unseen by the fit, sets the
conformal threshold (:mod:`.conformal`). Scoring with the result is pure numpy
(:class:`~.scorers.CalibratedScorer`). See docs/adr/002-calibrated-confidence.md.

With ``cross_fit=True`` (ADR 025) each part is also scored by a model fit on the
other, the threshold is certified on every query's out-of-fold confidence, and the
model served is fit on all of them: the bar no longer rests on which half of the
queries the seed happened to put on which side.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ragsift.confidence._rows import row_sums
from ragsift.confidence._scipy import minimize_bounded
from ragsift.confidence.artifact import CalibrationArtifact, ConformalSpec, DataSummary, LevelSpec
from ragsift.confidence.config import LevelThresholds
from ragsift.confidence.conformal import DEFAULT_ALPHA, DEFAULT_DELTA, conformal_threshold
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.features import (
    DEFAULT_FEATURES,
    SCORE_MONOTONE_FEATURES,
    feature_matrix,
    validate_features,
)
from ragsift.confidence.mix import fit_mix_table
from ragsift.confidence.near_miss import fit_near_miss_table
from ragsift.confidence.normalize import METRICS, Metric
from ragsift.confidence.probes import in_scope_sample
from ragsift.confidence.signals import SIGNAL_NAMES

__all__ = [
    "CROSS_FIT",
    "fit_calibration",
    "fit_logistic",
    "fit_similarity_threshold",
    "predict_logistic",
]

FloatArray = npt.NDArray[np.float64]

# Weak ridge penalty: keeps coefficients finite on separable data without biasing
# probabilities measurably at the thousands of examples calibration uses.
DEFAULT_L2 = 1e-3
# Half the labelled data fits the model, half certifies the conformal threshold.
DEFAULT_CONFORMAL_FRACTION = 0.5
# Fewer than this many examples in either part cannot support a calibration.
_MIN_EXAMPLES = 20
#: The conformal method's prefix when both parts certify (``cross_fit=True``, ADR 025).
CROSS_FIT = "cross-fit"


def _sigmoid(z: FloatArray) -> FloatArray:
    return np.exp(-np.logaddexp(0.0, -z))


def predict_logistic(x: FloatArray, coef: FloatArray, intercept: float) -> FloatArray:
    """sigmoid(intercept + x @ coef), computed stably (pure numpy).

    The dot products add left to right (not BLAS's ``@``, whose kernels may change
    with the number of rows), so a query's probability does not depend on its batch.
    """
    return _sigmoid(row_sums(x * coef) + intercept)


def fit_logistic(
    x: FloatArray,
    y: FloatArray,
    *,
    nonnegative: Sequence[bool],
    l2: float = DEFAULT_L2,
) -> tuple[FloatArray, float]:
    """Maximum-likelihood logistic regression with optional w_j >= 0 constraints.

    Args:
        x: (n, d) features. y: (n,) labels in {0, 1}.
        nonnegative: per feature, whether its coefficient is bounded below by 0.
        l2: ridge penalty on the coefficients (not the intercept), per example.

    Returns:
        (coefficients, intercept).
    """
    n, d = x.shape
    # Standardize for a well-conditioned fit; a positive scale keeps coefficient signs.
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    xs = (x - mu) / sd

    def loss(theta: FloatArray) -> tuple[float, FloatArray]:
        w, b = theta[:d], theta[d]
        z = xs @ w + b
        # mean negative log-likelihood: log(1 + e^z) - y z
        nll = float(np.mean(np.logaddexp(0.0, z) - y * z)) + l2 * float(w @ w)
        r = (_sigmoid(z) - y) / n
        grad = np.concatenate([xs.T @ r + 2.0 * l2 * w, [r.sum()]])
        return nll, grad

    lower: list[float | None] = [0.0 if nn else None for nn in nonnegative] + [None]
    bounds = [(lo, None) for lo in lower]
    theta = minimize_bounded(loss, np.zeros(d + 1), bounds)
    w_s, b_s = theta[:d], float(theta[d])
    coef = w_s / sd
    intercept = b_s - float(coef @ mu)
    return coef, intercept


def fit_calibration(
    signals: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    embedder_id: str,
    metric: Metric,
    features: Sequence[str] = DEFAULT_FEATURES,
    alpha: float = DEFAULT_ALPHA,
    delta: float = DEFAULT_DELTA,
    levels: LevelThresholds | None = None,
    l2: float = DEFAULT_L2,
    conformal_fraction: float = DEFAULT_CONFORMAL_FRACTION,
    seed: int = 0,
    source: str = "unspecified",
    notes: str = "",
    groups: Sequence[str] | None = None,
    in_scope: Sequence[bool] | None = None,
    cross_fit: bool = False,
) -> CalibrationArtifact:
    """Fit a calibration artifact from a signal matrix and relevance labels.

    Args:
        signals: (n, len(SIGNAL_NAMES)) signal matrix, as from
            :func:`~.signals.compute_signal_matrix` (one row per labelled query).
        labels: 1 if the relevant context was among the kept hits, else 0.
        embedder_id, metric: what the scores came from; recorded and checked at load.
        features: which signals the model uses (see :mod:`.features`).
        alpha, delta: conformal target risk and failure probability.
        levels: level thresholds to record (seed defaults if None).
        l2: ridge penalty.
        conformal_fraction: share of examples held out for the conformal threshold.
        seed: seed of the fit/conformal split.
        source, notes: recorded in the data summary.
        groups: the article (document) each query was asked about; the conformal
            bound then counts correlated questions' evidence once
            (:func:`~.conformal.conformal_threshold`). None: queries are independent.
        in_scope: which queries are in scope (the rest: questions the corpus cannot
            answer); the artifact then keeps the conformal sample's in-scope rows,
            to re-certify on another collection (:mod:`.probes`).
        cross_fit: certify on both parts (ADR 025): each part's confidences come
            from the model fit on the other part, and the artifact's model is fit
            on every example. By default one part fits and the other certifies.

    Raises:
        ConfidenceError: bad shapes, labels or parameters; too few examples.
    """
    feats = validate_features(features)
    if metric not in METRICS:
        raise ConfidenceError(f"metric must be one of {METRICS}, got {metric!r}")
    s = np.asarray(signals, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != len(SIGNAL_NAMES):
        raise ConfidenceError(f"signals must have shape (n, {len(SIGNAL_NAMES)}), got {s.shape}")
    if y.shape != (s.shape[0],):
        raise ConfidenceError(f"labels must have shape ({s.shape[0]},), got {y.shape}")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ConfidenceError("labels must be 0 or 1")
    if not 0 < conformal_fraction < 1:
        raise ConfidenceError(f"conformal_fraction must be in (0, 1), got {conformal_fraction}")
    n = y.size
    n_conf = round(n * conformal_fraction)
    if min(n - n_conf, n_conf) < _MIN_EXAMPLES:
        raise ConfidenceError(
            f"need at least {_MIN_EXAMPLES} examples to fit and to certify, got {n} in total"
        )
    # Checked before any fitting: a bad call fails at once, whichever way it fits.
    if groups is not None and len(groups) != n:
        raise ConfidenceError(f"groups must have one entry per example, got {len(groups)} for {n}")
    if in_scope is not None and len(in_scope) != n:
        raise ConfidenceError(f"in_scope must have one entry per example, got {len(in_scope)}")
    perm = np.random.default_rng(seed).permutation(n)
    fit_idx, conf_idx = perm[n_conf:], perm[:n_conf]
    x = feature_matrix(s, feats)
    nonnegative = [f in SCORE_MONOTONE_FEATURES for f in feats]
    coef, intercept = fit_logistic(x[fit_idx], y[fit_idx], nonnegative=nonnegative, l2=l2)
    if cross_fit:
        # The other part's model scores the fit part; the certified sample is every
        # example, each scored by a model that did not see it, and the served model
        # sees them all (its confidences stay close to either part's: ADR 025).
        other, other_b = fit_logistic(x[conf_idx], y[conf_idx], nonnegative=nonnegative, l2=l2)
        out_of_fold = np.empty(n)
        out_of_fold[conf_idx] = predict_logistic(x[conf_idx], coef, intercept)
        out_of_fold[fit_idx] = predict_logistic(x[fit_idx], other, other_b)
        coef, intercept = fit_logistic(x, y, nonnegative=nonnegative, l2=l2)
        conf_idx = np.arange(n)
        conf_probs = out_of_fold
    else:
        conf_probs = predict_logistic(x[conf_idx], coef, intercept)
    conf_groups = None if groups is None else np.asarray(groups, dtype=object)[conf_idx]
    cr = conformal_threshold(conf_probs, y[conf_idx], alpha=alpha, delta=delta, groups=conf_groups)
    mix = fit_mix_table(conf_probs, y[conf_idx], alpha=alpha, delta=delta, groups=conf_groups)
    rows = (
        None
        if in_scope is None
        else in_scope_sample(
            conf_probs, y[conf_idx], np.asarray(in_scope, dtype=bool)[conf_idx], conf_groups
        )
    )
    near = (
        None
        if in_scope is None
        else fit_near_miss_table(
            conf_probs,
            y[conf_idx],
            np.asarray(in_scope, dtype=bool)[conf_idx],
            alpha=alpha,
            delta=delta,
            groups=conf_groups,
        )
    )
    lv = levels if levels is not None else LevelThresholds()
    return CalibrationArtifact(
        embedder_id=embedder_id,
        metric=metric,
        features=feats,
        # Clamp -0.0 and optimizer noise below zero on bounded coefficients.
        coefficients=tuple(
            max(float(c), 0.0) if f in SCORE_MONOTONE_FEATURES else float(c)
            for f, c in zip(feats, coef, strict=True)
        ),
        intercept=float(intercept),
        levels=LevelSpec(high=lv.high, medium=lv.medium, low=lv.low),
        conformal=ConformalSpec.certified(
            cr,
            method=f"{CROSS_FIT}+{cr.method}" if cross_fit else None,
            mix=mix,
            in_scope=rows,
            near_miss=near,
        ),
        data=DataSummary(
            source=source,
            n_examples=n,
            positive_rate=float(y.mean()),
            n_fit=n if cross_fit else int(fit_idx.size),
            n_conformal=int(conf_idx.size),
            notes=notes,
        ),
    )


# Share of answer-holding hits the fitted hit threshold keeps. Recall over
# precision: a dropped answer cannot be recovered downstream, an extra chunk
# costs little, and the calibrated confidence already prices the weak ones.
DEFAULT_HIT_RECALL = 0.90


def fit_similarity_threshold(
    scores: npt.ArrayLike, relevant: npt.ArrayLike, *, recall: float = DEFAULT_HIT_RECALL
) -> float:
    """The A1 hit threshold for one embedder: keeps ``recall`` of the answer-holding hits.

    Args:
        scores: normalized primary scores of retrieved hits (any shape; NaN = padding).
        relevant: same shape, True where the hit holds the answer.
        recall: share of relevant hits at or above the threshold.

    Raises:
        ConfidenceError: shapes differ, recall is out of (0, 1], or no hit is relevant.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(relevant, dtype=bool).ravel()
    if s.shape != y.shape:
        raise ConfidenceError(
            f"scores and relevant must have one shape, got {s.shape} vs {y.shape}"
        )
    if not 0.0 < recall <= 1.0:
        raise ConfidenceError(f"recall must be in (0, 1], got {recall}")
    positives = s[y & np.isfinite(s)]
    if positives.size == 0:
        raise ConfidenceError(
            "no retrieved hit is a relevant one: the hit threshold has nothing to fit on"
        )
    # The largest t with at least `recall` of the positives at or above it.
    ranked = np.sort(positives)[::-1]
    needed = int(np.ceil(recall * ranked.size))
    return float(np.floor(ranked[needed - 1] * 1e4) / 1e4)
