"""A FoldedGauge looks each series up once, and every write still lands in it.

``Gauge.labels`` checks and converts its values under a lock on every call; the
pipeline sets ~6 folded series a query (issue 17), always the same few.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge

from ragsift.observability.folded import FoldedGauge

pytestmark = pytest.mark.unit

OTHER = "(other)"


def _folded(registry: CollectorRegistry) -> tuple[FoldedGauge, list[tuple[str, ...]]]:
    gauge = Gauge("ragsift_test_share", "test", ["tenant", "collection"], registry=registry)
    looked_up: list[tuple[str, ...]] = []
    labels = gauge.labels

    def counting(*values: Any) -> Any:
        looked_up.append(values)
        return labels(*values)

    gauge.labels = counting  # type: ignore[method-assign]  # count the look-ups
    bound = {"acme", "globex"}
    labelers = [lambda t: t if t in bound else OTHER, lambda c: c]
    return FoldedGauge(gauge, labelers, "highest", OTHER), looked_up


def _read(registry: CollectorRegistry, tenant: str) -> float | None:
    return registry.get_sample_value("ragsift_test_share", {"tenant": tenant, "collection": "docs"})


def test_each_series_is_looked_up_once_and_every_write_lands() -> None:
    registry = CollectorRegistry()
    folded, looked_up = _folded(registry)
    for value in (0.1, 0.4, 0.2):
        folded.set(("acme", "docs"), value)
        folded.set(("globex", "docs"), value / 2)
    assert _read(registry, "acme") == 0.2
    assert _read(registry, "globex") == 0.1
    assert looked_up == [("acme", "docs"), ("globex", "docs")]


def test_the_other_series_is_looked_up_once_and_still_keeps_the_worst_value() -> None:
    registry = CollectorRegistry()
    folded, looked_up = _folded(registry)
    folded.set(("tenant-1", "docs"), 0.7)
    folded.set(("tenant-2", "docs"), 0.3)  # better than the held 0.7: it stands
    assert _read(registry, OTHER) == 0.7
    folded.set(("tenant-1", "docs"), 0.2)  # the holder moves its own value back
    folded.set(("tenant-2", "docs"), 0.9)
    assert _read(registry, OTHER) == 0.9
    assert looked_up == [(OTHER, "docs")]
