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

one pair per calibration version the scope's results carry. Results of one scope
can carry two at once: a reranked query is scored without the calibration
(``none``) and, when the reranker fails, the same scope's next query with it. A
pair per version keeps each on its own scale, where one pair restarted at every
switch never held a reference. A version not seen in the scope's last
``2 * min_samples`` queries (one a re-fit replaced) is dropped, its PSI with it, and
at most :data:`MAX_VERSIONS` are kept per scope. The scope's PSI (the gauge) is the
highest of its versions'. At most :data:`MAX_SCOPES` scopes are sketched at once: a new
one past it takes the place of the one seen least recently (tenant ids come from
events, and a cap that refused new scopes left the first ones seen holding it for good).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from ragsift.confidence.errors import ConfidenceError
from ragsift.lru import Recent

__all__ = [
    "DEFAULT_HALF_LIFE",
    "DEFAULT_MIN_SAMPLES",
    "DEFAULT_PSI_THRESHOLD",
    "MAX_VERSIONS",
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
#: Scopes sketched at once (bounded memory, at most ~2 KB each): past it, the one seen least
#: recently is dropped, its reference with it. Ample for one deployment's live scopes.
MAX_SCOPES: Final = 10_000
#: Calibration versions sketched at once per scope: past it, the least recently seen
#: one is dropped.
MAX_VERSIONS: Final = 4


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
        psi: the current PSI of the observation's calibration version, or None while
            its reference or sketch is too small.
        shifted: that PSI is above the threshold now.
        tripped: this observation is the one that crossed the threshold (report once).
        scope_psi: the highest current PSI over the scope's versions (what the gauge
            shows), or None while none has one.
    """

    psi: float | None
    shifted: bool
    tripped: bool
    scope_psi: float | None = None


@dataclass(slots=True)
class _Sketch:
    """One calibration version's reference and rolling sketch."""

    last_seen: int
    reference: FloatArray = field(default_factory=lambda: np.zeros(BINS))
    sketch: FloatArray = field(default_factory=lambda: np.zeros(BINS))
    shifted: bool = False
    psi: float | None = None


@dataclass(slots=True)
class _Scope:
    seen: int = 0
    versions: dict[str, _Sketch] = field(default_factory=dict)

    def sketch_of(self, version: str, stale_after: int) -> _Sketch:
        """The version's sketch (a new one if none), after dropping the versions not
        seen in the last ``stale_after`` queries."""
        self.seen += 1
        stale = [v for v, k in self.versions.items() if self.seen - k.last_seen > stale_after]
        for v in stale:
            del self.versions[v]
        got = self.versions.get(version)
        if got is None:
            if len(self.versions) >= MAX_VERSIONS:
                oldest = min(self.versions, key=lambda v: self.versions[v].last_seen)
                del self.versions[oldest]
            got = self.versions[version] = _Sketch(self.seen)
        got.last_seen = self.seen
        return got

    def highest_psi(self) -> float | None:
        values = [k.psi for k in self.versions.values() if k.psi is not None]
        return max(values) if values else None


class DriftMonitor:
    """Per (tenant, collection): the reference and rolling sketch of top-hit scores.

    Args:
        threshold: PSI above which a scope counts as shifted.
        min_samples: queries in the reference, and (decayed) in the sketch, before a PSI.
        half_life: queries after which an observation's weight in the sketch halves.

    Thread-safe. Each process keeps its own sketches (replicas alarm on their share
    of the traffic; the alert takes the maximum). ``on_evict`` is told of each scope
    dropped to stay within :data:`MAX_SCOPES` (the pipeline counts them).
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
        self._scopes: Recent[tuple[str, str], _Scope] = Recent(MAX_SCOPES)
        self._lock = threading.Lock()
        self.on_evict: Callable[[], None] | None = None

    def state(self, tenant: str, collection: str, version: str) -> DriftReading:
        """A version's state in its scope without adding a query (for one whose top
        score is on another scale): shifted or not, never tripped here, no PSI."""
        with self._lock:
            scope = self._scopes.peek((tenant, collection))  # a look is not a query
            sketch = None if scope is None else scope.versions.get(version)
            shifted = sketch is not None and sketch.shifted
        return DriftReading(None, shifted, False)

    def observe(self, tenant: str, collection: str, version: str, top_score: float) -> DriftReading:
        """Add one query's top-hit score to its scope's sketch of ``version``; return
        that version's state."""
        key = (tenant, collection)
        b = _bin(top_score)
        evicted = False
        with self._lock:
            scope = self._scopes.get(key)
            if scope is None:
                scope = _Scope()
                evicted = self._scopes.put(key, scope)
            reading = self._observe(scope, version, b)
        if evicted and self.on_evict is not None:
            self.on_evict()
        return reading

    def _observe(self, scope: _Scope, version: str, b: int) -> DriftReading:
        """Count bin ``b`` in the scope's sketch of ``version`` (the lock is held)."""
        state = scope.sketch_of(version, 2 * self.min_samples)
        if state.reference.sum() < self.min_samples:
            state.reference[b] += 1.0
            return DriftReading(None, False, False, scope.highest_psi())
        state.sketch *= self._decay
        state.sketch[b] += 1.0
        if state.sketch.sum() < self.min_samples:
            return DriftReading(None, False, False, scope.highest_psi())
        value = state.psi = psi(state.reference, state.sketch)
        shifted = value > self.threshold
        tripped = shifted and not state.shifted
        state.shifted = shifted
        return DriftReading(value, shifted, tripped, scope.highest_psi())
