"""Bounded label values: tenant ids and collection names come from events, so each
label keeps a fixed number of values with their own series, the rest share ``(other)``.

The values an operator names (``RAGSIFT_WORKER_METRICS_TENANTS`` /
``_COLLECTIONS``) always keep their own series and are not counted against the
bound: slots otherwise go first come, first served, for good, so a burst of made-up
tenant ids (or test tenants at start-up) could take them all and fold the real
tenants into ``(other)`` until the worker restarted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from prometheus_client import Counter

__all__ = ["DEFAULT_MAX_LABEL_VALUES", "BoundedCounter", "BoundedLabeler", "TenantLabeler"]

#: Label values with their own series before the rest share "(other)": ample for
#: the tenants and collections of one deployment, small for Prometheus.
DEFAULT_MAX_LABEL_VALUES = 50


class BoundedLabeler:
    """Maps free-form values (tenant ids, collections) to a bounded label set.

    Each of ``pinned`` keeps its own label, outside the bound; of the others, the
    first ``max_values`` distinct values seen keep theirs, and every later one is
    ``(other)``. Values come from events, so an unbounded label would let hostile
    input grow /metrics (and Prometheus) without limit. ``on_fold`` is told of each
    look-up answered ``(other)`` (the container counts them). Callers look a value
    up only once its event was accepted: a refused one must not take a slot.
    """

    #: No tenant id or collection name can be this (neither pattern allows
    #: parentheses): named ``other``, the bucket merged a real tenant "other" with
    #: every overflow one.
    OTHER = "(other)"

    def __init__(
        self,
        max_values: int = DEFAULT_MAX_LABEL_VALUES,
        on_fold: Callable[[], None] | None = None,
        pinned: Iterable[str] = (),
    ):
        if max_values < 0:
            raise ValueError(f"max_values must be >= 0, got {max_values}")
        self.pinned = frozenset(pinned)
        if self.OTHER in self.pinned:
            raise ValueError(f"{self.OTHER!r} cannot be pinned: it is the shared label")
        self.max_values = max_values
        self.on_fold = on_fold
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        """``value`` if it has (or may take) its own series, else :attr:`OTHER`."""
        if value in self._seen or value in self.pinned:
            return value
        with self._lock:
            if len(self._seen) < self.max_values:
                self._seen.add(value)
                return value
        if self.on_fold is not None:
            self.on_fold()
        return self.OTHER


#: Tenant ids as labels (A9: per tenant where cardinality allows).
TenantLabeler = BoundedLabeler


class BoundedCounter:
    """A counter whose first label goes through a :class:`BoundedLabeler`.

    Callers use it like the counter (``.labels(collection, kind).inc()``) and
    cannot forget the bound.
    """

    def __init__(self, counter: Counter, labeler: BoundedLabeler):
        self.counter = counter
        self.labeler = labeler

    def labels(self, first: str, *rest: str) -> Counter:
        """The child counter for the bounded first label and the other labels."""
        return self.counter.labels(self.labeler(first), *rest)
