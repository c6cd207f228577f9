"""A command Redis refuses for good bypasses the cache, counted apart; it never fails a query."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.pipeline import PipelineOutput
from ragsift.retrieval.redis_replies import RedisRefusedError
from ragsift.schemas import QueryEvent
from ragsift.settings import Settings
from ragsift.wiring import build_pipeline

pytestmark = pytest.mark.unit

EMBEDDER = HashingEmbedder()


class RefusingCache(InMemoryCache):
    """Versions refused for good, as Redis Cluster refuses a script over keys of several
    slots (``CROSSSLOT``): the same at every try."""

    async def index_versions(self, scopes: Sequence[tuple[str, str]]) -> list[int | None]:
        raise RedisRefusedError(
            "redis cache: Redis refuses a command (ResponseError)",
            store="cache",
            key_kind="version",
            code="CROSSSLOT",
        )


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    built = EdgeIndex(tmp_path / "edge")
    await Indexer(built, EMBEDDER).ingest(
        "acme", "default", [SourceDocument("a.md", "Refunds are paid by bank transfer.")]
    )
    yield built
    await built.close()


async def test_a_refused_cache_command_is_counted_and_every_query_answered(
    tmp_path: Path, index: EdgeIndex
) -> None:
    metrics = Metrics()
    pipeline = build_pipeline(
        Settings(data_dir=tmp_path),
        index=index,
        embedder=EMBEDDER,
        metrics=metrics,
        cache=RefusingCache(),
    )
    queries = [
        QueryEvent(query_id=f"q{n}", tenant_id=tenant, query="How are refunds paid?")
        for n, tenant in enumerate(["acme", "bravo"])
    ]
    # Before: RedisRefusedError is no ServiceUnavailableError: it failed the batch.
    outputs = await pipeline.process(queries)
    assert all(isinstance(o, PipelineOutput) for o in outputs)
    assert metrics.cache.labels("memory", "error")._value.get() == 2
    assert metrics.redis_refused.labels("cache", "version")._value.get() == 1
