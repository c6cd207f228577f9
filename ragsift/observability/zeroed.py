"""Counters whose series all show from the start, at 0.

A labelled counter's series appears at its first count, at 1; Prometheus'
``increase()`` needs two samples of a series, so an alert on it never sees that
first count (a worker's first lost event fired nothing). Where the label values
are known ahead, create every series at 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter

__all__ = ["zeroed_counter"]


def zeroed_counter(
    name: str,
    documentation: str,
    labelnames: Sequence[str],
    series: Iterable[Sequence[str]],
    registry: CollectorRegistry,
) -> Counter:
    """A counter with each of ``series`` (one value per label name) created at 0."""
    counter = Counter(name, documentation, list(labelnames), registry=registry)
    for values in series:
        counter.labels(*values)
    return counter
