"""What the owners of a :class:`~ragsift.lru.Recent` count as a use.

A look that is not a query (a drift state, a mix reading for a corrective retry, a
cache entry's TTL) leaves its key where it was; the next new key past the bound
evicts it as if it had not been looked at. A bound below one is refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragsift.confidence import drift, mix_monitor
from ragsift.confidence.drift import DriftMonitor
from ragsift.confidence.mix import fit_mix_table
from ragsift.confidence.mix_monitor import MixMonitor
from ragsift.confidence.served import ServedBars
from ragsift.retrieval.cache import InMemoryCache

pytestmark = pytest.mark.unit


def test_a_drift_state_is_not_a_query(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drift, "MAX_SCOPES", 2)
    monitor = DriftMonitor(min_samples=5, half_life=20)
    evicted: list[None] = []
    monitor.on_evict = lambda: evicted.append(None)
    monitor.observe("a", "docs", "v1", 0.5)
    monitor.observe("b", "docs", "v1", 0.5)
    monitor.state("a", "docs", "v1")
    monitor.observe("c", "docs", "v1", 0.5)
    assert list(monitor._scopes) == [("b", "docs"), ("c", "docs")]
    assert evicted == [None]


def test_a_mix_reading_is_not_a_query(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mix_monitor, "MAX_SCOPES", 2)
    confidence = np.linspace(0.0, 1.0, 600)
    table = fit_mix_table(confidence, confidence > 0.5, alpha=0.1, delta=0.1)
    assert table is not None
    monitor = MixMonitor(min_samples=5, half_life=50)
    evicted: list[None] = []
    monitor.on_evict = lambda: evicted.append(None)
    monitor.observe("a", "docs", "v1", table, 0.5)
    monitor.observe("b", "docs", "v1", table, 0.5)
    monitor.reading("a", "docs", "v1")
    monitor.observe("c", "docs", "v1", table, 0.5)
    assert list(monitor._scopes) == [("b", "docs"), ("c", "docs")]
    assert evicted == [None]


async def test_asking_a_cached_entrys_ttl_is_not_a_use() -> None:
    cache = InMemoryCache(max_entries=2)
    await cache.set("a", b"1", 100)
    await cache.set("b", b"2", 100)
    assert await cache.ttl("a") is not None
    await cache.set("c", b"3", 100)
    assert await cache.get("a") is None
    assert await cache.get("b") == b"2"


def test_served_bars_refuse_to_remember_no_scope() -> None:
    with pytest.raises(ValueError, match="max_size must be >= 1, got 0"):
        ServedBars(max_scopes=0)
