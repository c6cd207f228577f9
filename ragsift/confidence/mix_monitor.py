"""The traffic's mix per scope, without labels: a decayed confidence histogram each.

:class:`MixMonitor` keeps, per (tenant, collection), a decayed histogram of the
calibrated confidence of the queries it is shown, and reads the share of
unanswerable queries behind it (:func:`ragsift.confidence.mix_estimate.estimate_unanswerable_share`:
the maximum-likelihood share and its one-sided 95% lower bound) once the scope
holds ``min_samples``. :mod:`ragsift.retrieval.mix_watch` decides what the
reading does to a scope's bar and its reported confidence. At most
:data:`MAX_SCOPES` scopes are kept: a new one past it takes the place of the one seen
least recently (tenant ids come from events; a cap that refused new scopes left the
first ones seen holding it, and a later tenant on the certified bar, for good).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from ragsift.confidence.drift import decay_per_query
from ragsift.confidence.mix import HISTOGRAM_BINS, FloatArray, MixReading, MixTable
from ragsift.confidence.mix_estimate import (
    AboveMixture,
    _above_mixture,
    _estimate,
    _log_mixture,
)
from ragsift.confidence.mix_state import ScopeState
from ragsift.confidence.near_miss import (
    YOUNG_WEIGHT,
    NearMissTable,
    estimate_near_miss,
    near_miss_log_mixture,
)
from ragsift.lru import Recent

__all__ = [
    "DEFAULT_HALF_LIFE",
    "DEFAULT_MIN_SAMPLES",
    "MAX_SCOPES",
    "REFRESH_EVERY",
    "MixMonitor",
    "ScopeState",
]

#: Queries a scope's histogram needs before its share is estimated (the lower bound,
#: not this count, keeps a young scope's noise from moving its mix bar; its near-miss
#: bar rises on the estimate until it weighs YOUNG_WEIGHT, ADR 037).
DEFAULT_MIN_SAMPLES: Final = 30
#: A scope's running weight is brought back to 1 past this (well inside float range).
_RESCALE_AT: Final = 1e100
#: Queries after which an observation's weight halves: the estimate follows the
#: last ~1,000 queries of a scope.
DEFAULT_HALF_LIFE: Final = 500.0
#: Observations between two estimates of a scope's share.
REFRESH_EVERY: Final = 16
#: Scopes tracked at once (bounded memory, a few KB each): past it, the one seen least
#: recently is dropped (its next query starts it afresh). As many as the drift monitor.
MAX_SCOPES: Final = 10_000
#: Calibrations whose log-mixtures are kept at once (one per version in use).
_NEAR_MIXTURES: Final = 64


class MixMonitor:
    """Per (tenant, collection): a decayed histogram of the calibrated confidence.

    Args:
        min_samples: (decayed) queries before the share is estimated.
        half_life: queries after which an observation's weight halves.

    A new calibration version starts the scope afresh, but for a histogram on the
    scale of one the scope kept (:meth:`NearMissTable.scales`: a feedback re-fit reads
    on its base's bins, ADR 040), which carries over, in this process or from a saved
    state (:meth:`restore`). The estimate is refreshed
    every :data:`REFRESH_EVERY` observations (it moves slowly; the likelihood over
    1,001 candidate shares is not worth computing per query). Thread-safe. Each
    process estimates from its own share of the traffic.
    """

    def __init__(
        self, *, min_samples: int = DEFAULT_MIN_SAMPLES, half_life: float = DEFAULT_HALF_LIFE
    ) -> None:
        self.min_samples = min_samples
        self._decay = decay_per_query(min_samples, half_life)
        self._scopes: Recent[tuple[str, str], _MixScope] = Recent(MAX_SCOPES)
        #: Histograms saved by an earlier process, waiting for their scope's first query.
        self._restored: dict[tuple[str, str], ScopeState] = {}
        self._near_mixtures: dict[str, FloatArray] = {}
        self._mixtures: dict[str, tuple[FloatArray, AboveMixture]] = {}
        self._lock = threading.Lock()
        #: told of each scope dropped to stay within MAX_SCOPES (the pipeline counts them)
        self.on_evict: Callable[[], None] | None = None

    def observe(
        self,
        tenant: str,
        collection: str,
        version: str,
        table: MixTable,
        confidence: float,
        near_miss: NearMissTable | None = None,
    ) -> MixReading | None:
        """Add one query's confidence to its scope; its reading (None while too few).

        With the calibration's ``near_miss`` table the reading carries the three-kind
        estimate too (:func:`~ragsift.confidence.near_miss.estimate_near_miss`). A
        table with ``edges`` (ADR 039) reads a histogram of its own, binned at them,
        saved and restored with the other."""
        key = (tenant, collection)
        if confidence != confidence:  # NaN: no hit, no confidence
            confidence = 0.0
        b = min(max(int(confidence * HISTOGRAM_BINS), 0), HISTOGRAM_BINS - 1)
        with self._lock:
            scope, evicted = self._scope(key, version, table, near_miss)
            reading = self._add(scope, b, confidence, table)
        if evicted and self.on_evict is not None:
            self.on_evict()
        return reading

    def _scope(
        self,
        key: tuple[str, str],
        version: str,
        table: MixTable,
        near_miss: NearMissTable | None,
    ) -> tuple[_MixScope, bool]:
        """The scope of ``key`` under ``version``, now the most recently seen, and
        whether another was dropped to make room for it (the lock is held)."""
        scope = self._scopes.get(key)
        if scope is not None and scope.version == version:
            return scope, False
        near = None if near_miss is None else self._near_mixture(version, near_miss)
        whole, above = self._mixture(version, table)
        old, scope = scope, _MixScope(version, whole, near, scale=version, above=above)
        if near_miss is not None:
            scope.scale, scope.near_scale = near_miss.scales(version)
            if near_miss.edges is not None:
                scope.near_edges = np.asarray(near_miss.edges[1:-1], dtype=np.float64)
                scope.near_counts = [0.0] * HISTOGRAM_BINS
        saved = self._restored.pop(key, None)
        if saved is not None and saved.version == version:
            scope.resume(saved.counts, self._decay, saved.near_counts)
        elif old is not None:
            scope.carry(old, self._decay)
        elif saved is not None:  # saved under another version: what is on a scale
            scope.carry(_MixScope.saved(saved, self._decay), self._decay)
        return scope, self._scopes.put(key, scope)

    def _add(
        self, scope: _MixScope, b: int, confidence: float, table: MixTable
    ) -> MixReading | None:
        """Count one query in bin ``b``; the scope's reading (the lock is held)."""
        weight = scope.add(b, self._decay, confidence)
        if weight < self.min_samples:
            return self._near_only(scope, table)
        every = REFRESH_EVERY if weight > YOUNG_WEIGHT else 1  # a young scope: every query
        if scope.estimate is None or not scope.estimate.mixed or scope.since >= every:
            counts = scope.decayed(self._decay)
            scope.estimate = _estimate(scope.log_mixture, counts, scope.above)
            near_counts = counts if scope.near_counts is None else scope.decayed_near(self._decay)
            if scope.near_log_mixture is not None and near_counts.sum() >= self.min_samples:
                near_reading = estimate_near_miss(scope.near_log_mixture, near_counts)
                scope.estimate = dataclasses.replace(scope.estimate, near_miss=near_reading)
            scope.since = 0
        return scope.estimate

    def _near_only(self, scope: _MixScope, table: MixTable) -> MixReading | None:
        """The reading of a scope too young for the two-kind mix whose near-miss
        histogram, carried over a version change, is not (ADR 040): the near misses
        read, the two-kind part neutral (``mixed`` False). None otherwise."""
        if scope.near_counts is None or scope.near_log_mixture is None:
            return None
        counts = scope.decayed_near(self._decay)
        if counts.sum() < self.min_samples:
            return None
        reading = estimate_near_miss(scope.near_log_mixture, counts)
        scope.estimate = MixReading(table.unanswerable_share, 0.0, reading, mixed=False)
        return scope.estimate

    def _mixture(self, version: str, table: MixTable) -> tuple[FloatArray, AboveMixture]:
        """The two-kind log-mixtures of a calibration, whole and over the cut (ADR 045),
        computed once for all its scopes (the lock is held)."""
        got = self._mixtures.get(version)
        if got is None:
            if len(self._mixtures) >= _NEAR_MIXTURES:
                self._mixtures.clear()
            got = self._mixtures[version] = (_log_mixture(table), _above_mixture(table))
        return got

    def _near_mixture(self, version: str, table: NearMissTable) -> FloatArray:
        """The three-kind log-mixture of a calibration, computed once for all its scopes
        (about 2,600 candidates by 20 bins; the lock is held)."""
        got = self._near_mixtures.get(version)
        if got is None:
            if len(self._near_mixtures) >= _NEAR_MIXTURES:
                self._near_mixtures.clear()
            got = self._near_mixtures[version] = near_miss_log_mixture(table)
        return got

    def export(self) -> list[ScopeState]:
        """Every scope's decayed histogram, to be restored after a restart."""
        with self._lock:
            return [
                ScopeState(
                    tenant=tenant,
                    collection=collection,
                    version=scope.version,
                    counts=tuple(float(c) for c in scope.decayed(self._decay)),
                    near_counts=None
                    if scope.near_counts is None
                    else tuple(float(c) for c in scope.decayed_near(self._decay)),
                    scale=None if scope.scale in ("", scope.version) else scope.scale,
                    near_scale=scope.near_scale,
                )
                for (tenant, collection), scope in self._scopes.items()
            ]

    def restore(self, states: list[ScopeState]) -> int:
        """Take up saved histograms; how many. A scope this process has seen keeps its
        own; a saved one is used once its scope's next query is observed (its table
        comes with that query): whole under the same calibration version, and under
        another, the histograms on a scale that version reads (ADR 040), as a running
        process carries them."""
        taken = 0
        with self._lock:
            for state in states:
                key = (state.tenant, state.collection)
                if key in self._scopes or len(self._restored) >= MAX_SCOPES:
                    continue
                self._restored[key] = state
                taken += 1
        return taken

    def reading(self, tenant: str, collection: str, version: str) -> MixReading | None:
        """A scope's latest reading without counting a query (None: none yet, or an
        older calibration's), for a query already counted once (a corrective retry)."""
        with self._lock:
            scope = self._scopes.peek((tenant, collection))  # not a query: no refresh
            if scope is None or scope.version != version:
                return None
            return scope.estimate


@dataclass(slots=True)
class _MixScope:
    """One scope's decayed histogram, kept without touching every bin per query.

    The query at step t is added with weight ``decay ** -t`` (``increment``);
    dividing by the latest increment gives every query its decayed weight
    ``decay ** (age)``. The weights are brought back to 1 before they overflow.
    """

    version: str
    log_mixture: FloatArray
    near_log_mixture: FloatArray | None = None
    counts: list[float] = field(default_factory=lambda: [0.0] * HISTOGRAM_BINS)
    total: float = 0.0
    increment: float = 1.0
    estimate: MixReading | None = None
    since: int = 0
    #: The near-miss table's inner bin edges, and its histogram at them (ADR 039).
    near_edges: FloatArray | None = None
    near_counts: list[float] | None = None
    #: Whose served confidence the two histograms are binned on (ADR 040): ``counts``
    #: always; ``near_counts`` where known.
    scale: str = ""
    near_scale: str | None = None
    #: The mixture over the queries the raise reads (ADR 045).
    above: AboveMixture | None = None

    @classmethod
    def saved(cls, state: ScopeState, decay: float) -> _MixScope:
        """A scope as an earlier process left it, to carry from (:meth:`carry`)."""
        scope = cls(
            state.version,
            np.empty((0, HISTOGRAM_BINS)),
            scale=state.scale or state.version,
            near_scale=state.near_scale,
        )
        if state.near_counts is not None:
            scope.near_counts = [0.0] * HISTOGRAM_BINS
        scope.resume(state.counts, decay, state.near_counts)
        return scope

    def add(self, b: int, decay: float, confidence: float = 0.0) -> float:
        """Count a query in bin ``b`` (and ``confidence`` at the near-miss table's
        edges, where it has its own); the scope's decayed weight after it."""
        self.counts[b] += self.increment
        if self.near_counts is not None and self.near_edges is not None:
            self.near_counts[int(np.searchsorted(self.near_edges, confidence, "right"))] += (
                self.increment
            )
        self.total += self.increment
        weight = self.total / self.increment
        self.since += 1
        self.increment /= decay
        if self.increment > _RESCALE_AT:
            self.counts = [c / self.increment for c in self.counts]
            if self.near_counts is not None:
                self.near_counts = [c / self.increment for c in self.near_counts]
            self.total /= self.increment
            self.increment = 1.0
        return weight

    def resume(
        self, counts: Sequence[float], decay: float, near: Sequence[float] | None = None
    ) -> None:
        """Start from a saved decayed histogram (its newest query at weight 1), and the
        near-miss one where this scope keeps one and it was saved."""
        self.counts = list(counts)
        if near is not None and self.near_counts is not None:
            self.near_counts = list(near)
        self.total = float(sum(counts))
        self.increment = 1.0 / decay  # decayed() divides by increment * decay

    def carry(self, old: _MixScope, decay: float) -> None:
        """Start from ``old``'s histograms that are on this scope's scales (ADR 040):
        after a version change, a histogram on the same bins of the same confidence
        reads the same traffic, and is kept rather than learnt again."""
        kept = {old.scale: old.decayed(decay)}
        if old.near_scale is not None and old.near_counts is not None:
            kept[old.near_scale] = old.decayed_near(decay)
        counts = kept.get(self.scale)
        near = None
        if self.near_scale is not None and self.near_counts is not None:
            near = kept.get(self.near_scale)
        if counts is None and near is None:
            return
        empty = [0.0] * HISTOGRAM_BINS
        self.resume(
            empty if counts is None else counts.tolist(),
            decay,
            None if near is None else near.tolist(),
        )

    def decayed(self, decay: float) -> FloatArray:
        """The histogram with every query at its decayed weight (the newest at 1)."""
        # The newest query was added at increment * decay (add() has moved on since).
        return np.asarray(self.counts, dtype=np.float64) / (self.increment * decay)

    def decayed_near(self, decay: float) -> FloatArray:
        """The near-miss histogram at the table's edges (kept only where it has them)."""
        assert self.near_counts is not None
        return np.asarray(self.near_counts, dtype=np.float64) / (self.increment * decay)
