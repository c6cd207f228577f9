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
  queries (a start that depends on confidences only, never on labels, so the
  labels stay independent Binomial draws given it) and stops at the first t
  it cannot reject; the answer is the last rejected t.

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

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence._scipy import beta_ppf, norm_ppf, t_ppf
from ragsift.confidence.errors import ConfidenceError

__all__ = ["DEFAULT_ALPHA", "DEFAULT_DELTA", "ConformalResult", "conformal_threshold"]

# ragsift defaults: at most 10% of answered queries without relevant context,
# guaranteed with 90% probability over the calibration sample.
DEFAULT_ALPHA = 0.10
DEFAULT_DELTA = 0.10
# 101 candidate thresholds, 0.01 apart: as fine as the level boundaries are given.
_GRID = np.round(np.linspace(0.0, 1.0, 101), 2)
# Answered queries needed where the walk starts: enough that a well-calibrated top slice
# (a few % errors) can already be certified at alpha = 0.1 (ragsift default).
_START_MIN_ANSWERED = 100


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
    # answered[g, i]: query i answered at grid threshold g; counted via sorting for speed.
    order = np.argsort(-conf, kind="stable")
    conf_sorted = conf[order]
    cum_wrong = np.concatenate([[0], np.cumsum(wrong[order])])
    n_answered = np.searchsorted(-conf_sorted, -_GRID, side="right").astype(np.int64)
    errors = cum_wrong[n_answered].astype(np.int64)
    if group_index is None:
        upper = _clopper_pearson_upper(errors, n_answered, delta)
        deff = np.ones(_GRID.shape)
    else:
        upper, deff = _clustered_upper(conf, wrong, group_index, n_answered, errors, delta)
    total = max(conf.size, 1)
    # A small sample (a small collection's self-calibration) may hold fewer positives
    # than the start needs; starting past them would always fail. Start where at
    # most that many are answered instead (unchanged for every larger sample).
    start = min(_START_MIN_ANSWERED, max(int((y != 0).sum()), 1), conf.size)
    enough = np.flatnonzero(n_answered >= start)
    chosen = -1
    if conf.size:
        for g in range(int(enough.max()), -1, -1):
            if upper[g] > alpha:
                break
            chosen = g
    n_groups = None if group_index is None else int(group_index.max(initial=-1) + 1)
    if chosen < 0:
        return ConformalResult(
            1.0, False, 1.0, 0.0, alpha, delta, int(conf.size), **_method(n_groups, None)
        )
    g = chosen
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
    errors: npt.NDArray[np.int64],
    delta: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per grid threshold: the design-effect Clopper-Pearson upper bound, and the design effect."""
    k_all = int(group.max(initial=-1) + 1)
    # answered[g, i] is small enough here (101 x n): the grid walk is one matrix product.
    answered = (conf[None, :] >= _GRID[:, None]).astype(np.float64)
    per_group_n = np.zeros((_GRID.size, max(k_all, 1)))
    per_group_e = np.zeros_like(per_group_n)
    for g_idx in range(_GRID.size):
        per_group_n[g_idx] = np.bincount(group, weights=answered[g_idx], minlength=k_all)
        per_group_e[g_idx] = np.bincount(group, weights=answered[g_idx] * wrong, minlength=k_all)
    n = n_answered.astype(np.float64)
    e = errors.astype(np.float64)
    safe_n = np.maximum(n, 1.0)
    risk = e / safe_n
    k = (per_group_n > 0).sum(axis=1).astype(np.float64)
    resid = ((per_group_e - risk[:, None] * per_group_n) ** 2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        v_cluster = np.where(k > 1, k / (k - 1) * resid / safe_n**2, np.inf)
        # The binomial variance, floored at one error's worth so a zero-error slice
        # still has a scale to compare the clustered variance with.
        v_binom = np.maximum(risk * (1.0 - risk), 1.0 / safe_n) / safe_n
        deff = np.maximum(1.0, v_cluster / v_binom)
    if np.bincount(group, minlength=k_all).max(initial=0) <= 1:
        deff = np.ones_like(deff)  # one query per group: the per-question bound exactly
    else:
        several = k > 1
        widen = np.ones_like(deff)
        widen[several] = (t_ppf(1.0 - delta, k[several] - 1.0) / norm_ppf(1.0 - delta)) ** 2
        deff = deff * widen
    n_eff = n / deff
    e_eff = risk * n_eff
    upper = np.ones(_GRID.shape, dtype=np.float64)
    ok = (n > 0) & (e_eff < n_eff) & np.isfinite(deff)
    upper[ok] = beta_ppf(1.0 - delta, e_eff[ok] + 1.0, n_eff[ok] - e_eff[ok])
    return upper, deff
