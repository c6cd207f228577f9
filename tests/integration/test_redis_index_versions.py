"""On the real redis-server: document events that change nothing indexed leave the
tenant's version counter (and so its cached results) alone; a change still moves it."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from ragsift.ingest.indexer import Indexer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.redis_cache import RedisCache
from ragsift.schemas import DocumentEvent
from ragsift.settings import RedisSettings

TEXT = "Refunds are paid within fourteen days by bank transfer."


def event(doc_id: str, op: str = "upsert") -> DocumentEvent:
    body = {"event_id": f"e-{doc_id}-{op}", "tenant_id": "acme", "doc_id": doc_id, "op": op}
    return DocumentEvent.model_validate({**body, "text": TEXT} if op == "upsert" else body)


async def test_redeliveries_and_deletes_of_nothing_leave_the_redis_counter(
    redis_settings: RedisSettings, unique: str, tmp_path: Path
) -> None:
    cache = RedisCache(redis_settings.model_copy(update={"key_prefix": f"it:{unique}"}))
    index = EdgeIndex(tmp_path / "edge")
    metrics = Metrics(CollectorRegistry())
    indexer = Indexer(index, HashingEmbedder(64), cache=cache, metrics=metrics)
    try:
        await indexer.apply(event("gdpr"))
        version = await cache.index_version("acme", "default")
        for _ in range(3):  # redeliveries, and tombstones of documents acme never had
            await indexer.apply(event("gdpr"))
            await indexer.apply(event("never", op="delete"))
        assert await cache.index_version("acme", "default") == version
        skipped = metrics.registry.get_sample_value
        assert skipped("ragsift_index_version_bumps_skipped_total", {"reason": "unchanged"}) == 3
        assert skipped("ragsift_index_version_bumps_skipped_total", {"reason": "absent"}) == 3
        await indexer.apply(event("gdpr", op="delete"))  # removes its chunks: bumps
        assert await cache.index_version("acme", "default") == (version or 0) + 1
    finally:
        await cache.client.delete(*[k async for k in cache.client.scan_iter(f"it:{unique}:*")])
        await cache.close()
        await index.close()
