"""Properties: a search never returns a chunk of another tenant, in any mode, on either
adapter; and tenants writing the same chunk ids never overwrite one another."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from retrieval_corpus import local_client

from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import ChunkRecord, SearchRequest, VectorIndex
from ragsift.retrieval.server import QdrantServerIndex

pytestmark = pytest.mark.unit

DIM = 64
EMBEDDER = HashingEmbedder(DIM)
WORDS = ["alpha", "beta", "gamma", "delta", "refund", "password", "invoice", "kafka", "qdrant"]
TENANTS = st.sampled_from(["t1", "t2", "t3", "tenant-with-dash", "T1"])  # T1 != t1
TEXTS = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
DOCS = st.lists(st.tuples(TENANTS, TEXTS), min_size=1, max_size=25)
QUERIES = st.lists(
    st.tuples(TENANTS, TEXTS, st.sampled_from(["hybrid", "dense", "keyword"])),
    min_size=1,
    max_size=6,
)


async def _check(
    index: VectorIndex, docs: list[tuple[str, str]], queries: list[tuple[str, str, str]]
) -> None:
    await index.ensure_collection("c", DIM, EMBEDDER.embedder_id)
    # Chunk and doc ids are numbered per tenant, as tenants pick them: several tenants
    # use "doc-0"/"doc-0:0", which must never overwrite one another (issue 12).
    seen: dict[str, int] = {}
    numbered = []
    for tenant, text in docs:
        numbered.append((tenant, seen.get(tenant, 0), text))
        seen[tenant] = seen.get(tenant, 0) + 1
    records = [
        ChunkRecord(
            chunk_id=f"doc-{i}:0",
            tenant_id=tenant,
            collection="c",
            doc_id=f"doc-{i}",
            text=text,
            source="s",
            source_type="web",
            vector=EMBEDDER.embed_sync(text),
        )
        for tenant, i, text in numbered
    ]
    await index.upsert("c", records)
    info = await index.collection_info("c")
    assert dict(info.tenants or {}) == seen  # every tenant kept every chunk it wrote
    assert info.points_count == len(records)
    text_of = {(r.tenant_id, r.chunk_id): r.text for r in records}
    requests = [
        SearchRequest(
            tenant_id=tenant,
            query=text,
            dense_vector=EMBEDDER.embed_sync(text),
            mode=mode,  # type: ignore[arg-type]
            limit=25,
            prefetch_limit=25,
        )
        for tenant, text, mode in queries
    ]
    results = await index.search_batch("c", requests)
    for req, hits in zip(requests, results, strict=True):
        assert all(h.tenant_id == req.tenant_id for h in hits)
        assert all(text_of[(h.tenant_id, h.chunk_id)] == h.text for h in hits)
        own = seen.get(req.tenant_id, 0)
        if req.mode == "dense":
            assert len(hits) == own  # dense sees every chunk of the tenant, and nothing else
    await index.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=DOCS, queries=QUERIES)
def test_edge_never_leaks_across_tenants(
    docs: list[tuple[str, str]], queries: list[tuple[str, str, str]]
) -> None:
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(_check(EdgeIndex(Path(root)), docs, queries))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=DOCS, queries=QUERIES)
def test_server_never_leaks_across_tenants(
    docs: list[tuple[str, str]], queries: list[tuple[str, str, str]]
) -> None:
    asyncio.run(_check(QdrantServerIndex(local_client()), docs, queries))
