"""Cache keys, TTL by confidence level, and the in-memory backend."""

from __future__ import annotations

import pytest

from ragsift.retrieval.cache import InMemoryCache, cache_key, normalize_query, ttl_for_status
from ragsift.settings import CacheSettings


def key(**overrides: object) -> str:
    fields: dict[str, object] = {
        "tenant_id": "acme",
        "collection": "default",
        "index_version": 0,
        "query": "Refund policy?",
        "params": {"k": 5, "mode": "hybrid"},
        "embedder_id": "e1",
        "calibration_version": "c1",
    }
    fields.update(overrides)
    return cache_key(**fields)  # type: ignore[arg-type]  # fields typed loosely on purpose


def test_key_ignores_case_and_spacing_but_not_meaning() -> None:
    assert key() == key(query="  refund   POLICY? ")
    assert normalize_query("Ｒｅｆｕｎｄ") == "refund"  # full-width folds too
    for change in (
        {"tenant_id": "other"},
        {"collection": "c2"},
        {"index_version": 1},
        {"query": "refund policy!"},
        {"params": {"k": 6, "mode": "hybrid"}},
        {"embedder_id": "e2"},
        {"calibration_version": "c2"},
    ):
        assert key(**change) != key(), change


def test_key_keeps_tenant_readable() -> None:
    assert key().startswith("ragsift:r:acme:default:")


def test_ttl_grows_with_confidence() -> None:
    s = CacheSettings()
    ttls = [
        ttl_for_status(st, s)
        for st in ("no_relevant_context", "low_confidence", "medium_confidence", "high_confidence")
    ]
    assert ttls == [0, 300, 3600, 86400]
    assert ttl_for_status("unknown", s) == 0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_expiry_lru_and_versions() -> None:
    clock = FakeClock()
    cache = InMemoryCache(max_entries=2, clock=clock)
    await cache.set("a", b"1", 10)
    await cache.set("zero", b"x", 0)
    assert await cache.get("zero") is None
    assert await cache.ttl("a") == 10
    clock.now += 11
    assert await cache.get("a") is None
    await cache.set("a", b"1", 100)
    await cache.set("b", b"2", 100)
    await cache.get("a")  # a is now most recently used
    await cache.set("c", b"3", 100)
    assert await cache.get("b") is None
    assert await cache.get("a") == b"1"
    assert len(cache) == 2
    assert await cache.index_version("acme", "default") == 0
    assert await cache.bump_index_version("acme", "default") == 1
    assert await cache.index_version("acme", "default") == 1
    assert await cache.index_version("other", "default") == 0
    with pytest.raises(ValueError, match="max_entries"):
        InMemoryCache(max_entries=0)


async def test_batch_calls_match_the_single_ones() -> None:
    cache = InMemoryCache()
    await cache.set_many([("a", b"1", 10), ("zero", b"x", 0), ("b", b"2", 10)])
    assert await cache.get_many(["a", "zero", "missing", "b"]) == [b"1", None, None, b"2"]
    assert await cache.get_many([]) == []
    await cache.bump_index_version("acme", "default")
    assert await cache.index_versions([("acme", "default"), ("other", "default")]) == [1, 0]
