"""Conformal (Learn-then-Test) threshold: answer only where selective risk is provably <= alpha.

Given calibration confidences and labels (1 = the relevant context is among the
kept hits), we want the lowest confidence threshold t (answer the most queries)
such that the *selective risk*

    R(t) = P(label = 0 | confidence >= t)

is at most alpha. This is "Learn then Test" (Angelopoulos et al., 2021) with
fixed-sequence testing:

* the grid is t = 1.00, 0.99, ..., 0.00, walked from the most conservative end;
* at each t the errors among the n_t answered calibration queries are
  Binomial(n_t, R(t)); we reject "R(t) > alpha" when the exact one-sided
  Clopper-Pearson upper bound U(t) at level delta is <= alpha;
* the walk starts at the highest t with at least ``min(100, n)`` answered
  queries (a start that depends on confidences only, so the labels stay
  independent Binomial draws given it) and stops at the first t it cannot
  reject; the answer is the last rejected t. One exception reads the labels:
  a sample with fewer than twice the start's positives (200) starts where at
  most half that many are answered (``fixed_sequence_walk``): a start past its
  positives always fails, and one at all of them fails unless the ranking is
  perfect (ADR 034).
  Never under the fewest answers that certify alpha with none wrong (22 at
  alpha = delta = 0.1), nor past the positives. That uses one number of the
  sample, its count of positives, and only in small samples (a small
  collection's self-calibration, a feedback re-fit on a few hundred labels).

Testing in a fixed order needs no multiplicity correction, so with probability
>= 1 - delta over the calibration sample, the chosen t has true risk <= alpha.

**Clustered samples.** That argument needs the calibration queries to be
independent draws. Questions are not: many are asked about one article (one
document), and whether they are answered rightly moves with the article, so a
sample of 2,000 questions over 17 articles holds far less evidence than 2,000
independent ones (on SQuAD half 1 the variance of the risk estimate is 5-40
times the binomial one). Certified per question, the bound was 0.096 and the
risk on the other half's articles 0.13. With ``groups`` (the article or
document each query was asked about) the bound counts the evidence the groups
hold: at each t the ratio estimate's cluster-robust variance (linearised,
with the small-sample factor k/(k-1) over the k groups answered) against the
binomial one gives a design effect ``deff >= 1``; the Clopper-Pearson bound is
taken at the effective size ``n_t / deff`` (Kish), widened by the ratio of the
Student t quantile with k - 1 degrees of freedom to the normal one, because
the variance itself is estimated from k groups. With one query per group it
is the per-query bound exactly (no design effect, no widening). It is an
approximation (a design-effect bound, not an exact test); what it does on data
the fit did not see is measured in docs/evaluation.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence._scipy import beta_ppf, norm_ppf, t_ppf
from ragsift.confidence.errors import ConfidenceError

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_DELTA",
    "ConformalResult",
    "conformal_threshold",
    "fewest_to_certify",
    "fixed_sequence_walk",
    "risk_upper_bounds",
]

# ragsift defaults: at most 10% of answered queries without relevant context,
# guaranteed with 90% probability over the calibration sample.
DEFAULT_ALPHA = 0.10
DEFAULT_DELTA = 0.10
# 101 candidate thresholds, 0.01 apart: as fine as the level boundaries are given.
_GRID = np.round(np.linspace(0.0, 1.0, 101), 2)
# Answered queries needed where the walk starts: enough that a well-calibrated top slice
# (a few % errors) can already be certified at alpha = 0.1 (ragsift default).
_START_MIN_ANSWERED = 100
# ... and, re-weighted to a mix where answered queries count less (:mod:`.mix`), this
# many queries' worth: enough to certify alpha = 0.1 with a couple of errors.
_START_MIN_EFFECTIVE = 50


@dataclass(frozen=True, slots=True)
class ConformalResult:
    """The chosen threshold and its evidence.

    Attributes:
        threshold: answer when confidence >= threshold.
        feasible: False if no grid threshold met the bound (then answer nothing).
        risk_upper_bound: U(threshold), the certified risk bound.
        coverage: share of calibration queries answered at the threshold.
        alpha, delta, n_calibration: the request and the data size.
    """

    threshold: float
    feasible: bool
    risk_upper_bound: float
    coverage: float
    alpha: float
    delta: float
    n_calibration: int
    method: str = "ltt-fixed-sequence-clopper-pearson"
    n_groups: int | None = None
    """Groups (articles, documents) the sample was drawn in; None: queries are independent."""
    design_effect: float | None = None
    """Variance of the risk estimate at the threshold over the binomial one (>= 1), with groups."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def _clopper_pearson_upper(
    errors: npt.NDArray[np.int64], n: npt.NDArray[np.int64], level: float
) -> npt.NDArray[np.float64]:
    """Exact one-sided upper confidence bound of a binomial rate (1 where n = 0 or all err)."""
    out = np.ones(errors.shape, dtype=np.float64)
    ok = (n > 0) & (errors < n)
    out[ok] = beta_ppf(
        1.0 - level, (errors[ok] + 1).astype(np.float64), (n[ok] - errors[ok]).astype(np.float64)
    )
    return out


def conformal_threshold(
    confidence: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    alpha: float = DEFAULT_ALPHA,
    delta: float = DEFAULT_DELTA,
    groups: npt.ArrayLike | None = None,
) -> ConformalResult:
    """Smallest grid threshold whose selective risk is certified <= alpha (see module doc).

    Args:
        confidence: calibration confidences in [0, 1].
        labels: 1 if the relevant context was among the kept hits, else 0.
        alpha: target risk.
        delta: allowed probability that the certificate is wrong.
        groups: the group (article, document) of each query; the bound then counts
            the evidence of correlated questions once (see module doc).

    Raises:
        ConfidenceError: bad alpha/delta or mismatched inputs.
    """
    if not 0 < alpha < 1:
        raise ConfidenceError(f"alpha must be in (0, 1), got {alpha}")
    if not 0 < delta < 1:
        raise ConfidenceError(f"delta must be in (0, 1), got {delta}")
    conf = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(labels)
    if conf.ndim != 1 or conf.shape != y.shape:
        raise ConfidenceError(
            f"confidence and labels must be 1-D and equal length, got {conf.shape} and {y.shape}"
        )
    if np.isnan(conf).any():
        raise ConfidenceError("confidence must not contain NaN")
    group_index = _group_index(groups, conf.shape)
    wrong = (y == 0).astype(np.int64)
    upper, n_answered, deff = risk_upper_bounds(conf, wrong, group_index, delta)
    chosen = fixed_sequence_walk(upper, n_answered, int((y != 0).sum()), alpha, delta=delta)
    n_groups = None if group_index is None else int(group_index.max(initial=-1) + 1)
    if chosen < 0:
        return ConformalResult(
            1.0, False, 1.0, 0.0, alpha, delta, int(conf.size), **_method(n_groups, None)
        )
    g = chosen
    total = max(conf.size, 1)
    return ConformalResult(
        threshold=float(_GRID[g]),
        feasible=True,
        risk_upper_bound=float(upper[g]),
        coverage=float(n_answered[g] / total),
        alpha=alpha,
        delta=delta,
        n_calibration=int(conf.size),
        **_method(n_groups, float(deff[g])),
    )


def risk_upper_bounds(
    conf: npt.NDArray[np.float64],
    wrong: npt.NDArray[np.int64],
    group_index: npt.NDArray[np.intp] | None,
    delta: float,
    *,
    weights: tuple[float, float] = (1.0, 1.0),
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Per grid threshold: the risk's upper bound, the answered count and the design effect.

    ``weights`` = (w_wrong, w_right) re-weights the two kinds of calibration query,
    as a different mix of answerable and unanswerable queries would
    (:mod:`.mix`); (1, 1) is the calibration sample's own mix.
    """
    order = np.argsort(-conf, kind="stable")
    n_answered = np.searchsorted(-conf[order], -_GRID, side="right").astype(np.int64)
    if group_index is None and weights == (1.0, 1.0):
        cum_wrong = np.concatenate([[0], np.cumsum(wrong[order])])
        errors = cum_wrong[n_answered].astype(np.int64)
        return _clopper_pearson_upper(errors, n_answered, delta), n_answered, np.ones(_GRID.shape)
    if group_index is None:  # weighted, independent queries: the per-question bound
        w = np.where(wrong[order] == 1, weights[0], weights[1])
        total_w = np.concatenate([[0.0], np.cumsum(w)])[n_answered]
        errors_w = np.concatenate([[0.0], np.cumsum(w * wrong[order])])[n_answered]
        n_eff = _weighted_size(total_w, n_answered, weights)
        e_eff = errors_w / np.where(total_w > 0, total_w, 1.0) * n_eff
        return _beta_upper(e_eff, n_eff, n_answered, delta), n_answered, np.ones(_GRID.shape)
    upper, deff = _clustered_upper(conf, wrong, group_index, n_answered, delta, weights)
    return upper, n_answered, deff


def _weighted_size(
    total_w: npt.NDArray[np.float64],
    n_answered: npt.NDArray[np.int64],
    weights: tuple[float, float],
) -> npt.NDArray[np.float64]:
    """The binomial size a weighted count is worth: ``(sum w)^2 / (w_wrong * w_right * n)``.

    The variance-matched size of a ratio whose weights follow the label; ``n``
    itself at equal weights.
    """
    if weights == (1.0, 1.0):
        return n_answered.astype(np.float64)
    safe = np.maximum(n_answered, 1)
    return np.where(n_answered > 0, total_w**2 / (weights[0] * weights[1] * safe), 0.0)


def _beta_upper(
    e_eff: npt.NDArray[np.float64],
    n_eff: npt.NDArray[np.float64],
    n_answered: npt.NDArray[np.int64],
    delta: float,
) -> npt.NDArray[np.float64]:
    """Clopper-Pearson upper bound at a (possibly fractional) effective size; 1 where empty."""
    upper = np.ones(_GRID.shape, dtype=np.float64)
    ok = (n_answered > 0) & (e_eff < n_eff)
    upper[ok] = beta_ppf(1.0 - delta, e_eff[ok] + 1.0, n_eff[ok] - e_eff[ok])
    return upper


def fewest_to_certify(alpha: float, delta: float) -> int:
    """The fewest answered queries whose Clopper-Pearson bound can certify ``alpha`` at
    level ``delta``: all of them right, ``1 - delta ** (1 / n) <= alpha`` (22 at
    alpha = delta = 0.1). Fewer say nothing about alpha either way."""
    if not (0 < alpha < 1 and 0 < delta < 1):
        return 1
    return math.ceil(math.log(delta) / math.log1p(-alpha))


def fixed_sequence_walk(
    upper: npt.NDArray[np.float64],
    n_answered: npt.NDArray[np.int64],
    positives: int,
    alpha: float,
    *,
    delta: float,
    down_weight: float = 1.0,
) -> int:
    """The grid index the fixed-sequence test stops at (see module doc), or -1 for none.

    ``down_weight`` is how much less an answered query may count than in the
    calibration sample (w_wrong / w_right of a re-weighted mix): the start then
    needs :data:`_START_MIN_EFFECTIVE` queries' worth at that weight, if that is
    more than the usual start. It depends on the weights only, never on labels.
    ``delta`` sets the least start of a small sample: the fewest answers that
    certify ``alpha`` when none is wrong.
    """
    # A small sample (a small collection's self-calibration, a feedback re-fit) may
    # hold too few positives for the start: past them it always fails, and at all of
    # them it answers as many as are right, which only a perfect ranking passes
    # (ADR 034: 200 feedback labels at SQuAD's mix hold ~50). Start where at most
    # half of them are answered instead, but never under the fewest answers that can
    # certify alpha at all (22 at alpha = delta = 0.1), where a start always fails.
    # The plain walk (start 100) is unchanged at 200 positives or more; a re-weighted
    # one may start lower at extreme mixes (the shipped tables did not move).
    total = int(n_answered.max(initial=0))
    needed = max(_START_MIN_ANSWERED, math.ceil(_START_MIN_EFFECTIVE * down_weight))
    fewest = fewest_to_certify(alpha, delta)
    start = min(needed, max(math.ceil(positives / 2), min(positives, fewest), 1), total)
    if total == 0:
        return -1
    enough = np.flatnonzero(n_answered >= start)
    chosen = -1
    for g in range(int(enough.max()), -1, -1):
        if upper[g] > alpha:
            break
        chosen = g
    return chosen


def _method(n_groups: int | None, deff: float | None) -> dict[str, Any]:
    if n_groups is None:
        return {}
    return {
        "method": "ltt-fixed-sequence-clopper-pearson-clustered",
        "n_groups": n_groups,
        "design_effect": None if deff is None else round(deff, 4),
    }


def _group_index(
    groups: npt.ArrayLike | None, shape: tuple[int, ...]
) -> npt.NDArray[np.intp] | None:
    """Dense group numbers 0..k-1 per query, or None without groups."""
    if groups is None:
        return None
    g = np.asarray(groups)
    if g.shape != shape:
        raise ConfidenceError(f"groups must match confidence in length, got {g.shape} and {shape}")
    _, index = np.unique(g, return_inverse=True)
    return np.asarray(index, dtype=np.intp).reshape(shape)


def _clustered_upper(
    conf: npt.NDArray[np.float64],
    wrong: npt.NDArray[np.int64],
    group: npt.NDArray[np.intp],
    n_answered: npt.NDArray[np.int64],
    delta: float,
    weights: tuple[float, float],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per grid threshold: the design-effect Clopper-Pearson upper bound, and the design effect.

    With ``weights`` (w_wrong, w_right) the risk is the weighted ratio, and the
    binomial size it is compared with is the weighted sample's effective one,
    ``(sum w)^2 / (w_wrong * w_right * n)`` (the variance-matched size of a ratio
    whose weights follow the label; ``n`` at equal weights).
    """
    w_wrong, w_right = weights
    k_all = int(group.max(initial=-1) + 1)
    w = np.where(wrong == 1, w_wrong, w_right)
    # answered[g, i] is small enough here (101 x n): the grid walk is one matrix product.
    answered = (conf[None, :] >= _GRID[:, None]).astype(np.float64) * w[None, :]
    per_group_n = np.zeros((_GRID.size, max(k_all, 1)))
    per_group_e = np.zeros_like(per_group_n)
    for g_idx in range(_GRID.size):
        per_group_n[g_idx] = np.bincount(group, weights=answered[g_idx], minlength=k_all)
        per_group_e[g_idx] = np.bincount(group, weights=answered[g_idx] * wrong, minlength=k_all)
    n = _weighted_size(per_group_n.sum(axis=1), n_answered, weights)
    single = np.bincount(group, minlength=k_all).max(initial=0) <= 1
    return design_effect_bound(per_group_n, per_group_e, n, n_answered, delta, single=single)


def design_effect_bound(
    per_group_n: npt.NDArray[np.float64],
    per_group_e: npt.NDArray[np.float64],
    n: npt.NDArray[np.float64],
    n_answered: npt.NDArray[np.int64],
    delta: float,
    *,
    single: bool,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The bound and the design effect per grid threshold, from its weighted answers and
    errors per group, at the binomial size ``n`` (``single``: one query per group)."""
    total_w = per_group_n.sum(axis=1)
    safe_w = np.where(total_w > 0, total_w, 1.0)
    risk = per_group_e.sum(axis=1) / safe_w
    safe_n = np.maximum(n, 1.0)
    k = (per_group_n > 0).sum(axis=1).astype(np.float64)
    resid = ((per_group_e - risk[:, None] * per_group_n) ** 2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        v_cluster = np.where(k > 1, k / (k - 1) * resid / safe_w**2, np.inf)
        # The binomial variance, floored at one error's worth so a zero-error slice
        # still has a scale to compare the clustered variance with.
        v_binom = np.maximum(risk * (1.0 - risk), 1.0 / safe_n) / safe_n
        deff = np.maximum(1.0, v_cluster / v_binom)
    if single:
        # One query per group: the per-question bound exactly (at the weighted size).
        deff = np.ones_like(deff)
    else:
        several = k > 1
        widen = np.ones_like(deff)
        widen[several] = (t_ppf(1.0 - delta, k[several] - 1.0) / norm_ppf(1.0 - delta)) ** 2
        deff = deff * widen
    n_eff = np.where(np.isfinite(deff), n / deff, 0.0)
    return _beta_upper(risk * n_eff, n_eff, n_answered, delta), deff
