"""Reading a scope's share of unanswerable queries from its confidence histogram.

The traffic's histogram is a mixture of the calibration sample's two kinds; the
maximum-likelihood share (Saerens et al., 2002, for label shift) is the estimate,
and the likelihood-ratio interval gives its one-sided 95% bounds
(:mod:`.mix` has the design). The raise reads the same estimate on the queries at
0.05 and over only (:class:`AboveMixture`, ADR 045): under it a query is answered at
no bar the raise sets, so questions far off a collection's subjects, however many,
add no risk at its bar and do not raise it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.mix import (
    HISTOGRAM_BINS,
    FloatArray,
    MixReading,
    MixTable,
    _smoothed,
)

__all__ = ["ABOVE_BIN", "AboveMixture", "estimate_unanswerable_share"]

#: Half the chi-square(1) quantile at 0.90: the likelihood-ratio interval's drop
#: from the maximum that bounds the share from below at 95% (one-sided).
_LOWER_BOUND_DROP: Final = 2.7055 / 2
#: Candidate shares for the maximum-likelihood estimate.
_ESTIMATE_GRID: Final = np.linspace(0.0, 1.0, 1001)
#: The raise reads the queries from this bin up (confidence 0.05 and over, ADR 045):
#: one under it is answered at no bar the raise sets, so however many there are, they
#: add no risk there, and a stream of questions far off the collection's subjects
#: must not raise the bar for the ones on them.
ABOVE_BIN: Final = 1


def estimate_unanswerable_share(histogram: npt.ArrayLike, table: MixTable) -> MixReading:
    """The maximum-likelihood share of unanswerable queries behind a confidence histogram.

    ``histogram`` counts (or decayed weights) of traffic confidences in the
    table's bins. Each class's histogram is smoothed by half a query per bin.
    The reading carries the estimate and its one-sided 95% lower bound.

    Raises:
        ConfidenceError: the histogram has the wrong length, is negative or empty.
    """
    h = np.asarray(histogram, dtype=np.float64)
    if h.shape != (HISTOGRAM_BINS,) or (h < 0).any() or h.sum() <= 0:
        raise ConfidenceError(
            f"histogram must be {HISTOGRAM_BINS} non-negative counts with a positive total"
        )
    return _estimate(_log_mixture(table), h, _above_mixture(table))


def _kinds(table: MixTable) -> tuple[FloatArray, FloatArray]:
    """The unanswerable and answerable kinds' smoothed histograms."""
    return (
        _smoothed(table.unanswerable, table.n_unanswerable),
        _smoothed(table.answerable, table.n_answerable),
    )


def _log_mixture(table: MixTable) -> FloatArray:
    """log P(bin | share) for every candidate share (rows) and bin (columns)."""
    return _mixture_over(*_kinds(table))


def _mixture_over(p0: FloatArray, p1: FloatArray) -> FloatArray:
    share = _ESTIMATE_GRID[:, None]
    return np.asarray(np.log(share * p0[None, :] + (1.0 - share) * p1[None, :]), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class AboveMixture:
    """The two-kind mixture over the bins from :data:`ABOVE_BIN` up (each kind's
    histogram renormalized there), and each candidate share there as the share of all
    queries it is worth: the same number of each kind over the cut, in the
    calibration's proportions under it (ADR 045)."""

    log_mixture: FloatArray
    worth: FloatArray

    def read(self, histogram: FloatArray) -> tuple[float, float]:
        """The share over the cut and its one-sided 95% lower bound, as shares of all
        queries; (0, 0) when no query is over the cut (nothing there to answer)."""
        above = histogram[ABOVE_BIN:]
        if above.sum() <= 0:
            return 0.0, 0.0
        reading = _estimate(self.log_mixture, above)
        at = np.searchsorted(_ESTIMATE_GRID, [reading.share, reading.lower])
        return float(self.worth[at[0]]), float(self.worth[at[1]])


def _above_mixture(table: MixTable) -> AboveMixture:
    """:class:`AboveMixture` of ``table``'s two kinds."""
    p0, p1 = _kinds(table)
    q0, q1 = float(p0[ABOVE_BIN:].sum()), float(p1[ABOVE_BIN:].sum())
    mixture = _mixture_over(p0[ABOVE_BIN:] / q0, p1[ABOVE_BIN:] / q1)
    # s' over the cut is worth s = s' / q0 / (s' / q0 + (1 - s') / q1) of all queries.
    over = _ESTIMATE_GRID / q0
    worth = over / (over + (1.0 - _ESTIMATE_GRID) / q1)
    return AboveMixture(mixture, worth)


def _estimate(
    log_mixture: FloatArray, histogram: FloatArray, above: AboveMixture | None = None
) -> MixReading:
    loglik = log_mixture @ histogram
    best = int(np.argmax(loglik))
    # The log-likelihood is concave in the share: the bounds are its first and last
    # grid points within the interval's drop of the maximum.
    plausible = loglik >= loglik[best] - _LOWER_BOUND_DROP
    lower = int(np.argmax(plausible))
    upper = plausible.size - 1 - int(np.argmax(plausible[::-1]))
    return MixReading(
        float(_ESTIMATE_GRID[best]),
        float(_ESTIMATE_GRID[lower]),
        upper=float(_ESTIMATE_GRID[upper]),
        above=None if above is None else above.read(histogram),
    )
