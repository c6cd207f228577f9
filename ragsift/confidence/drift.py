"""Calibration drift: has a scope's top-hit score distribution moved away from its reference?

A calibration's probabilities hold for queries like the ones it was checked on.
When a tenant's traffic changes (a new topic, out-of-domain questions, a
re-embedded corpus), the top-hit scores move first. Per (tenant, collection) a
:class:`DriftMonitor` keeps

* a **reference** histogram: the first ``min_samples`` top-hit scores seen under
  the calibration version in use (a new version, e.g. after a feedback re-fit,
  starts a new reference); and
* a **rolling sketch**: the later scores in the same fixed bins, with counts
  decayed by half every ``half_life`` queries, so it follows recent traffic;

and compares them with the population stability index

    PSI = sum_b (cur_b - ref_b) * ln(cur_b / ref_b)

over bin shares (floored at ``1e-4`` so an empty bin is finite). By the usual
convention PSI < 0.1 is stable, 0.1-0.25 a moderate shift and > 0.25 a shift that
needs action: the default threshold. No PSI is reported before the sketch holds
``min_samples`` (decayed) queries. A trip is reported once, when PSI first
crosses the threshold; it re-arms when PSI falls back under it.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from ragsift.confidence.errors import ConfidenceError

__all__ = [
    "DEFAULT_HALF_LIFE",
    "DEFAULT_MIN_SAMPLES",
    "DEFAULT_PSI_THRESHOLD",
    "DriftMonitor",
    "DriftReading",
    "decay_per_query",
    "psi",
]

FloatArray = npt.NDArray[np.float64]

# The conventional "act on it" level of the population stability index.
DEFAULT_PSI_THRESHOLD: Final = 0.25
# Both the reference and the sketch need this many queries: with 10 bins, PSI's
# sampling noise between two samples of one distribution is about (bins - 1) / n
# per sample (~0.09 at 200), well under the threshold.
DEFAULT_MIN_SAMPLES: Final = 200
# Queries after which an observation counts half: the sketch follows the last
# ~1,000 queries, so a shift shows within a few hundred.
DEFAULT_HALF_LIFE: Final = 500.0
# Ten equal bins over the normalized score range [0, 1].
BINS: Final = 10
# Shares are floored at this before the logarithm: an empty bin costs a finite amount.
_FLOOR: Final = 1e-4
# Scopes monitored at once; later scopes are not monitored (bounded memory).
MAX_SCOPES: Final = 10_000


def _bin(score: float) -> int:
    """The bin of a normalized score; NaN counts as no hit (0), anything else is clipped."""
    if math.isnan(score):
        score = 0.0
    score = min(max(score, 0.0), 1.0)  # before scaling: 1e308 * BINS would overflow
    return min(int(score * BINS), BINS - 1)


def decay_per_query(min_samples: int, half_life: float) -> float:
    """The factor a decayed histogram is multiplied by per query, once the window is checked.

    Raises:
        ConfidenceError: ``min_samples`` < 1, or more than the decayed histogram can
            ever hold (its weight never exceeds ``half_life / ln 2`` queries).
    """
    if min_samples < 1:
        raise ConfidenceError(f"min_samples must be >= 1, got {min_samples}")
    if min_samples >= half_life / math.log(2):
        raise ConfidenceError(
            f"min_samples ({min_samples}) must be below half_life / ln 2"
            f" ({half_life / math.log(2):.0f}): the decayed histogram would never reach it"
        )
    return float(0.5 ** (1.0 / half_life))


def psi(reference: npt.ArrayLike, current: npt.ArrayLike) -> float:
    """Population stability index of two histograms (counts or shares) over the same bins.

    Raises:
        ConfidenceError: shapes differ, or a histogram is empty or negative.
    """
    ref = np.asarray(reference, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    if ref.shape != cur.shape or ref.ndim != 1:
        raise ConfidenceError(
            f"histograms must be 1-D and equal length, got {ref.shape}, {cur.shape}"
        )
    # Each total once, and min() for the sign (after the totals: an empty histogram
    # has no min). This runs per query once a scope is full, where numpy's per-call
    # overhead, not the ten bins, is the cost.
    ref_total, cur_total = ref.sum(), cur.sum()
    if ref_total <= 0 or cur_total <= 0 or ref.min() < 0 or cur.min() < 0:
        raise ConfidenceError("histograms must be non-negative with a positive total")
    p = np.maximum(ref / ref_total, _FLOOR)
    q = np.maximum(cur / cur_total, _FLOOR)
    return float(np.sum((q - p) * np.log(q / p)))


@dataclass(frozen=True, slots=True)
class DriftReading:
    """What one observation says about its scope.

    Attributes:
        psi: the current PSI, or None while the reference or the sketch is too small.
        shifted: PSI is above the threshold now.
        tripped: this observation is the one that crossed the threshold (report once).
    """

    psi: float | None
    shifted: bool
    tripped: bool


@dataclass(slots=True)
class _Scope:
    version: str
    reference: FloatArray = field(default_factory=lambda: np.zeros(BINS))
    sketch: FloatArray = field(default_factory=lambda: np.zeros(BINS))
    shifted: bool = False


class DriftMonitor:
    """Per (tenant, collection): the reference and rolling sketch of top-hit scores.

    Args:
        threshold: PSI above which a scope counts as shifted.
        min_samples: queries in the reference, and (decayed) in the sketch, before a PSI.
        half_life: queries after which an observation's weight in the sketch halves.

    Thread-safe. Each process keeps its own sketches (replicas alarm on their share
    of the traffic; the alert takes the maximum).
    """

    def __init__(
        self,
        *,
        threshold: float = DEFAULT_PSI_THRESHOLD,
        min_samples: int = DEFAULT_MIN_SAMPLES,
        half_life: float = DEFAULT_HALF_LIFE,
    ):
        if threshold <= 0:
            raise ConfidenceError(f"threshold must be > 0, got {threshold}")
        self.threshold = threshold
        self.min_samples = min_samples
        self._decay = decay_per_query(min_samples, half_life)
        self._scopes: dict[tuple[str, str], _Scope] = {}
        self._lock = threading.Lock()

    def state(self, tenant: str, collection: str, version: str) -> DriftReading:
        """A scope's state without adding a query (for one whose top score is on another
        scale): shifted or not, never tripped here, no PSI."""
        with self._lock:
            scope = self._scopes.get((tenant, collection))
            shifted = scope is not None and scope.version == version and scope.shifted
        return DriftReading(None, shifted, False)

    def observe(self, tenant: str, collection: str, version: str, top_score: float) -> DriftReading:
        """Add one query's top-hit score to its scope; return the scope's state."""
        key = (tenant, collection)
        b = _bin(top_score)
        with self._lock:
            state = self._scopes.get(key)
            if state is None or state.version != version:
                if state is None and len(self._scopes) >= MAX_SCOPES:
                    return DriftReading(None, False, False)
                state = self._scopes[key] = _Scope(version)
            if state.reference.sum() < self.min_samples:
                state.reference[b] += 1.0
                return DriftReading(None, False, False)
            state.sketch *= self._decay
            state.sketch[b] += 1.0
            if state.sketch.sum() < self.min_samples:
                return DriftReading(None, False, False)
            value = psi(state.reference, state.sketch)
            shifted = value > self.threshold
            tripped = shifted and not state.shifted
            state.shifted = shifted
            return DriftReading(value, shifted, tripped)
