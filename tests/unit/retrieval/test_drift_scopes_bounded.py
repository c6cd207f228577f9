"""Hostile tenant ids on the query path: the drift monitor's memory stays bounded, and
the scopes that flood it cannot take the alarm from a tenant whose traffic goes on.

Tenant ids come from query events. Past :data:`~ragsift.confidence.drift.MAX_SCOPES`
the least recently seen scope gives way (an LRU), counted in
``ragsift_scope_state_evictions_total{monitor="drift"}``; a cap that refused every scope
past it left the first ones seen (hostile or long gone) holding the slots, and a tenant
that came later had no drift alarm, silently, until the worker restarted.
"""

from __future__ import annotations

import pytest

import ragsift.confidence.drift as drift
from ragsift.confidence.drift import DriftMonitor
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.drift_watch import watch_drift
from ragsift.schemas import RetrievalResult
from tests.unit.workers.test_calibration_worker import result

pytestmark = pytest.mark.unit

MIN_SAMPLES = 40
#: a small cap, so a flood of a few hundred times it runs in milliseconds per scope
CAP = 100
#: distinct hostile tenant ids: 200 times the cap
FLOOD = 20_000


def _hostile(n: int) -> list[str]:
    """Distinct valid tenant ids, some of the longest allowed (64 characters)."""
    return [f"t{i}" if i % 3 else f"t.{i}-".ljust(64, "x") for i in range(n)]


def _watch(
    monitor: DriftMonitor, metrics: Metrics, tenant: str, tops: list[float], tag: str
) -> list[RetrievalResult]:
    return [
        watch_drift(monitor, result(f"{tag}-{i}", top, tenant=tenant), metrics, source="test")[0]
        for i, top in enumerate(tops)
    ]


def test_a_flood_of_tenant_ids_neither_grows_the_monitor_nor_silences_a_later_tenant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(drift, "MAX_SCOPES", CAP)
    monitor = DriftMonitor(min_samples=MIN_SAMPLES, half_life=60)
    evicted: list[None] = []
    monitor.on_evict = lambda: evicted.append(None)
    metrics = Metrics()
    template = result("flood", 0.3)
    for i, tenant in enumerate(_hostile(FLOOD)):
        flooded = template.model_copy(update={"tenant_id": tenant, "query_id": f"f{i}"})
        watch_drift(monitor, flooded, metrics, source="test")
    assert len(monitor._scopes) <= CAP
    assert evicted == [None] * (FLOOD - CAP)
    # A tenant that first queries after the flood: its traffic settles, then moves.
    settled = _watch(monitor, metrics, "late", [0.3] * (3 * MIN_SAMPLES), "in")
    assert not any(r.calibration_shift for r in settled)
    moved = _watch(monitor, metrics, "late", [0.95] * (3 * MIN_SAMPLES), "out")
    assert moved[-1].calibration_shift
    assert len(monitor._scopes) <= CAP


def test_a_scope_in_use_keeps_its_sketch_through_a_flood(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scope evicted is the least recently seen: one whose queries go on between the
    flood's keeps its reference, and its drift is seen without a new one."""
    monkeypatch.setattr(drift, "MAX_SCOPES", CAP)
    monitor = DriftMonitor(min_samples=MIN_SAMPLES, half_life=60)
    metrics = Metrics()
    _watch(monitor, metrics, "acme", [0.3] * (3 * MIN_SAMPLES), "in")
    hostile = iter(_hostile(FLOOD))
    moved: list[RetrievalResult] = []
    for i in range(3 * MIN_SAMPLES):
        for n, tenant in enumerate([next(hostile) for _ in range(CAP // 2)]):
            watch_drift(monitor, result(f"f{n}", 0.3, tenant=tenant), metrics, source="t")
        moved += _watch(monitor, metrics, "acme", [0.95], f"out{i}")
    assert moved[-1].calibration_shift
    assert len(monitor._scopes) <= CAP
