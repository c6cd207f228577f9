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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence._scipy import beta_ppf
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
) -> ConformalResult:
    """Smallest grid threshold whose selective risk is certified <= alpha (see module doc).

    Args:
        confidence: calibration confidences in [0, 1].
        labels: 1 if the relevant context was among the kept hits, else 0.
        alpha: target risk.
        delta: allowed probability that the certificate is wrong.

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
    wrong = (y == 0).astype(np.int64)
    # answered[g, i]: query i answered at grid threshold g; counted via sorting for speed.
    order = np.argsort(-conf, kind="stable")
    conf_sorted = conf[order]
    cum_wrong = np.concatenate([[0], np.cumsum(wrong[order])])
    n_answered = np.searchsorted(-conf_sorted, -_GRID, side="right").astype(np.int64)
    errors = cum_wrong[n_answered].astype(np.int64)
    upper = _clopper_pearson_upper(errors, n_answered, delta)
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
    if chosen < 0:
        return ConformalResult(1.0, False, 1.0, 0.0, alpha, delta, int(conf.size))
    g = chosen
    return ConformalResult(
        threshold=float(_GRID[g]),
        feasible=True,
        risk_upper_bound=float(upper[g]),
        coverage=float(n_answered[g] / total),
        alpha=alpha,
        delta=delta,
        n_calibration=int(conf.size),
    )
