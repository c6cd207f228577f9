"""What a dense-only query's ``agreement`` is taken to be (ADR 028).

``agreement`` is the best hit both retrievers rank (max_i min(dense_i, bm25_i)).
A query searched with ``mode: dense`` has no BM25 channel, so the signal is
missing; the model's plain imputation (:mod:`.features`) takes the top score for
it: one retriever, nothing to disagree with. That is the best agreement a hit can
show, and the model weighs agreement most: measured on SQuAD 2.0's half 2 with a
quarter of each article's paragraphs left out, dense-only queries scored by the
hybrid-fit model were answered without their answer 14.1% of the time at a
threshold certified for 10% (docs/evaluation.md).

An artifact fit with ``ragsift calibrate`` therefore carries a :class:`DenseOnlyFit`:
the agreement a dense-only query is imputed, ``clip(intercept + slope x top, 0,
top)``, fit by log-loss on the same questions searched dense-only, the model's other
parameters held as fit. It never exceeds the plain imputation, never falls when the
top score rises (``slope >= 0``), and its risk at the served threshold is bounded on
the fit questions (:func:`fit_dense_only`). An artifact without one imputes as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from ragsift.confidence.conformal import (
    _GRID,
    _START_MIN_ANSWERED,
    _group_index,
    risk_upper_bounds,
)
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.signals import SIGNAL_INDEX

__all__ = ["DenseOnlyFit", "fill_dense_only", "fit_dense_only"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_AGREEMENT = SIGNAL_INDEX["agreement"]
_TOP = SIGNAL_INDEX["top_score"]
# The coarse search: intercepts and slopes 0.02 apart, then 0.001 apart around the best.
_INTERCEPTS = np.round(np.arange(-1.0, 1.0001, 0.02), 3)
_SLOPES = np.round(np.arange(0.0, 1.5001, 0.02), 3)
_FINE = np.round(np.arange(-0.02, 0.02001, 0.001), 4)
# A pull towards the plain imputation (intercept 0, slope 1), per example: the loss is
# flat along a line of (intercept, slope) pairs (a higher intercept with a lower slope
# imputes nearly the same), so without it the last digits of the model's coefficients
# would move the fit along that line from one run to the next.
_RIDGE = 1e-3
# The certification walks from imputing no agreement (step 0) to the fit (the last).
_WALK_STEPS = 21
_DECIMALS = 4
# Pairs whose losses are computed in one pass (bounds the memory of a large fit).
_PAIRS_PER_PASS = 256


class DenseOnlyFit(BaseModel):
    """The agreement imputed for a dense-only query: ``clip(intercept + slope x top, 0, top)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intercept: float = Field(ge=-1.0, le=1.0)
    slope: float = Field(ge=0.0, le=2.0)
    #: Dense-only searches of the fit questions it was fit and bounded on.
    n_examples: int = Field(ge=0)
    #: The risk's upper bound at the artifact's threshold with this imputation, on them.
    risk_upper_bound: float = Field(ge=0.0, le=1.0)
    #: Share of them answered at that threshold.
    coverage: float = Field(ge=0.0, le=1.0)

    def impute(self, top: FloatArray) -> FloatArray:
        """The agreement for top scores ``top``."""
        return np.minimum(np.maximum(self.intercept + self.slope * top, 0.0), top)

    def describe(self) -> str:
        """One line for a summary."""
        return (
            f"dense-only agreement = clip({self.intercept:g} + {self.slope:g} x top, 0, top);"
            f" risk bound {self.risk_upper_bound:.3f} at the threshold, answering"
            f" {self.coverage:.1%} of {self.n_examples} dense-only searches"
        )


def fill_dense_only(
    signals: FloatArray, dense_only: BoolArray | bool, fit: DenseOnlyFit | None
) -> FloatArray:
    """``signals`` with the missing agreement of dense-only rows imputed by ``fit``
    (the same array when there is nothing to fill)."""
    if fit is None or not np.any(dense_only):
        return signals
    rows = np.isnan(signals[:, _AGREEMENT]) & np.asarray(dense_only, dtype=bool)
    if not rows.any():
        return signals
    out = signals.copy()
    out[rows, _AGREEMENT] = fit.impute(out[rows, _TOP])
    return out


def _imputed(top: FloatArray, intercepts: FloatArray, slopes: FloatArray) -> FloatArray:
    """(P, n) agreements of P (intercept, slope) pairs."""
    raw = intercepts[:, None] + slopes[:, None] * top[None, :]
    return np.minimum(np.maximum(raw, 0.0), top[None, :])


def _losses(
    base: FloatArray,
    weight: float,
    top: FloatArray,
    y: FloatArray,
    intercepts: FloatArray,
    slopes: FloatArray,
) -> FloatArray:
    """Mean log-loss plus the ridge towards (0, 1), per (intercept, slope) pair."""
    nll = np.empty(intercepts.size)
    for start in range(0, intercepts.size, _PAIRS_PER_PASS):
        part = slice(start, start + _PAIRS_PER_PASS)
        z = base[None, :] + weight * _imputed(top, intercepts[part], slopes[part])
        nll[part] = np.mean(np.logaddexp(0.0, z) - y[None, :] * z, axis=1)
    return np.asarray(nll + _RIDGE * (intercepts**2 + (slopes - 1.0) ** 2), dtype=np.float64)


def _best(base: FloatArray, weight: float, top: FloatArray, y: FloatArray) -> tuple[float, float]:
    ii, ss = np.meshgrid(_INTERCEPTS, _SLOPES, indexing="ij")
    coarse = _losses(base, weight, top, y, ii.ravel(), ss.ravel())
    c0, c1 = ii.ravel()[coarse.argmin()], ss.ravel()[coarse.argmin()]
    fi, fs = np.meshgrid(c0 + _FINE, np.maximum(c1 + _FINE, 0.0), indexing="ij")
    fine = _losses(base, weight, top, y, fi.ravel(), fs.ravel())
    return float(fi.ravel()[fine.argmin()]), float(fs.ravel()[fine.argmin()])


def fit_dense_only(
    base: npt.ArrayLike,
    weight: float,
    top: npt.ArrayLike,
    labels: npt.ArrayLike,
    kept: npt.ArrayLike,
    *,
    threshold: float,
    alpha: float,
    delta: float,
    groups: Sequence[str] | None = None,
) -> DenseOnlyFit:
    """Fit and bound the dense-only imputation on dense-only searches of labelled questions.

    Args:
        base: per search, the model's logit without the agreement term (the other
            features' terms and the intercept).
        weight: the model's agreement coefficient.
        top: per search, the top score.
        labels: 1 when the answer is among the kept hits.
        kept: per search, the kept hits (a search keeping none scores 0, as served).
        threshold, alpha, delta: the artifact's answer threshold and its risk target.
        groups: the article each question was asked about (the bound counts them).

    The imputation is fit on the searches that kept a hit, then certified by a fixed
    sequence from imputing no agreement towards the fit, stopping before the first
    step whose risk bound at ``threshold`` exceeds ``alpha``: the fit is kept only
    as far as the questions certify it.

    Raises:
        ConfidenceError: mismatched lengths, or no search that kept a hit.
    """
    b = np.asarray(base, dtype=np.float64)
    t = np.asarray(top, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    k = np.asarray(kept, dtype=np.int64)
    if not b.shape == t.shape == y.shape == k.shape or b.ndim != 1:
        raise ConfidenceError(
            f"base, top, labels and kept must be 1-D of one length, got {b.shape}, {t.shape},"
            f" {y.shape} and {k.shape}"
        )
    some = k > 0
    if not some.any():
        raise ConfidenceError("no dense-only search kept a hit: nothing to fit the imputation on")
    c0, c1 = _best(b[some], weight, t[some], y[some])
    steps = np.linspace(0.0, 1.0, _WALK_STEPS)
    z = b[None, :] + weight * _imputed(t, steps * c0, steps * c1)
    conf = np.where(some[None, :], 1.0 / (1.0 + np.exp(-z)), 0.0)
    wrong = (y < 0.5).astype(np.int64)
    index = _group_index(groups, y.shape) if groups is not None else None
    at = int(np.searchsorted(_GRID, round(threshold, 2)))
    # As the threshold's own walk (:func:`~.conformal.fixed_sequence_walk`), the test
    # starts where enough questions are answered for a bound to mean something.
    needed = min(_START_MIN_ANSWERED, max(int(y[some].sum()), 1))
    chosen, bound, coverage = 0, 1.0, 0.0
    for step in range(_WALK_STEPS):
        upper, answered, _ = risk_upper_bounds(conf[step], wrong, index, delta)
        if answered[at] >= needed and upper[at] > alpha:
            break
        chosen, bound, coverage = step, float(upper[at]), float(answered[at] / y.size)
    return DenseOnlyFit(
        intercept=round(float(steps[chosen] * c0), _DECIMALS),
        slope=round(float(steps[chosen] * c1), _DECIMALS),
        n_examples=int(y.size),
        risk_upper_bound=round(min(bound, 1.0), _DECIMALS),
        coverage=round(coverage, _DECIMALS),
    )
