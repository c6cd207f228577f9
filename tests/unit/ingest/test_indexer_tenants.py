"""Issue 12: two tenants ingesting the same document id keep their own chunks and answers.

Chunk ids are ``<doc_id>:<n>`` and tenants pick their doc ids, so the index must
scope point ids (and every delete) by tenant. Checked on both adapters, through
the indexer, the documents-topic handler and the embedded runtime.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import SearchRequest, VectorIndex
from ragsift.retrieval.server import QdrantServerIndex
from ragsift.schemas import DocumentEvent, QueryEvent, RetrievalResult
from ragsift.settings import Settings
from ragsift.workers.indexer import IndexerHandler
from tests.factories import low_bar_confidence

DIM = 64
EMBEDDER = HashingEmbedder(DIM)
COLLECTION = "docs"
ALPHA_TEXT = "Alpha handbook: refunds are paid within fourteen days by bank transfer."
BRAVO_TEXT = "Bravo handbook: the cafeteria opens at noon and closes at two."


@pytest.fixture(params=["edge", "server"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    """Each adapter in turn, empty."""
    built: VectorIndex = (
        EdgeIndex(tmp_path / "edge")
        if request.param == "edge"
        else QdrantServerIndex(AsyncQdrantClient(":memory:"))
    )
    yield built
    await built.close()


async def _texts(index: VectorIndex, tenant: str, query: str) -> list[str]:
    vector = (await EMBEDDER.embed([query]))[0]
    hits = await index.search(
        COLLECTION,
        SearchRequest(tenant_id=tenant, query=query, dense_vector=vector, mode="dense", limit=10),
    )
    return [h.text for h in hits]


async def test_same_doc_id_from_two_tenants_keeps_both(index: VectorIndex) -> None:
    cache = InMemoryCache()
    indexer = Indexer(index, EMBEDDER, cache=cache)
    await indexer.ingest("alpha", COLLECTION, [SourceDocument("handbook.md", ALPHA_TEXT)])
    await indexer.ingest("bravo", COLLECTION, [SourceDocument("handbook.md", BRAVO_TEXT)])

    info = await index.collection_info(COLLECTION)
    assert dict(info.tenants or {}) == {"alpha": 1, "bravo": 1}
    assert await _texts(index, "alpha", "refunds") == [ALPHA_TEXT]
    assert await _texts(index, "bravo", "cafeteria") == [BRAVO_TEXT]
    # Invalidation stays per (tenant, collection): bravo's ingestion left alpha's version.
    assert await cache.index_versions([("alpha", COLLECTION), ("bravo", COLLECTION)]) == [1, 1]


async def test_replace_and_delete_touch_only_the_tenants_own_document(
    index: VectorIndex,
) -> None:
    handler = IndexerHandler(Indexer(index, EMBEDDER))

    def event(n: int, tenant: str, **fields: object) -> DocumentEvent:
        return DocumentEvent.model_validate(
            {"event_id": f"e{n}", "tenant_id": tenant, "collection": COLLECTION,
             "doc_id": "handbook.md", **fields}
        )  # fmt: skip

    outcomes = await handler.handle_batch(
        [
            event(1, "alpha", text=ALPHA_TEXT),
            event(2, "bravo", text=BRAVO_TEXT),
            event(3, "bravo", text="Bravo handbook, second edition: lunch is at one."),
        ]
    )
    assert outcomes == [[], [], []]
    info = await index.collection_info(COLLECTION)
    assert dict(info.tenants or {}) == {"alpha": 1, "bravo": 1}
    assert await _texts(index, "alpha", "refunds") == [ALPHA_TEXT]

    assert await handler.handle_batch([event(4, "bravo", op="delete")]) == [[]]
    info = await index.collection_info(COLLECTION)
    assert dict(info.tenants or {}) == {"alpha": 1}
    assert await _texts(index, "alpha", "refunds") == [ALPHA_TEXT]


async def test_embedded_runtime_keeps_each_tenants_answers(tmp_path: Path) -> None:
    # Low bars: the hashing embedder's cosines are small; the isolation is what is checked.
    settings = Settings(
        data_dir=tmp_path,
        confidence=low_bar_confidence(),
    )
    async with EmbeddedRuntime(settings) as rt:
        await rt.ingest("alpha", [SourceDocument("handbook.md", ALPHA_TEXT)])
        ask_alpha = QueryEvent(query_id="q-a", tenant_id="alpha", query="When are refunds paid?")
        [before] = await rt.ask([ask_alpha])
        assert isinstance(before, RetrievalResult)
        assert [h.text for h in before.hits] == [ALPHA_TEXT]

        await rt.ingest("bravo", [SourceDocument("handbook.md", BRAVO_TEXT)])
        info = await rt.index.collection_info("default")
        assert dict(info.tenants or {}) == {"alpha": 1, "bravo": 1}
        [cached] = await rt.ask([ask_alpha])
        assert isinstance(cached, RetrievalResult)
        assert cached.cache.hit  # alpha's version was not bumped, and its text still exists
        assert [h.text for h in cached.hits] == [ALPHA_TEXT]
        ask_bravo = QueryEvent(query_id="q-a", tenant_id="bravo", query="When are refunds paid?")
        [other] = await rt.ask([ask_bravo])
        assert isinstance(other, RetrievalResult)
        assert not other.cache.hit
        assert all(h.text == BRAVO_TEXT for h in other.hits)
        assert other.result_id != cached.result_id


async def test_a_document_replacing_its_id_from_another_source_is_reported(
    index: VectorIndex,
) -> None:
    # "opening hours.txt" and "opening-hours.txt" map to one id: one ingest refuses
    # them, but two ingests replaced the first without a word.
    indexer = Indexer(index, EMBEDDER)
    first = SourceDocument(
        "opening-hours.txt", "The zebra enclosure opens at nine.", source="opening hours.txt"
    )
    done = await indexer.ingest("alpha", COLLECTION, [first])
    assert done.other_sources == ()
    second = SourceDocument("opening-hours.txt", "Parking costs five euros.")
    done = await indexer.ingest("alpha", COLLECTION, [second])
    assert done.other_sources == (("opening-hours.txt", "opening hours.txt", "opening-hours.txt"),)
    # The same source again, changed or not, is an update: nothing to report.
    again = SourceDocument("opening-hours.txt", "Parking costs six euros.")
    assert (await indexer.ingest("alpha", COLLECTION, [again])).other_sources == ()
    # A JSONL line that moved within its file (source "file:line") is the same document.
    line = SourceDocument("faq-7", "Question seven.", source="faq.jsonl:3")
    await indexer.ingest("alpha", COLLECTION, [line])
    moved = SourceDocument("faq-7", "Question seven, answered.", source="faq.jsonl:4")
    assert (await indexer.ingest("alpha", COLLECTION, [moved])).other_sources == ()
    elsewhere = SourceDocument("faq-7", "Another file's seven.", source="other.jsonl:4")
    assert (await indexer.ingest("alpha", COLLECTION, [elsewhere])).other_sources == (
        ("faq-7", "faq.jsonl:4", "other.jsonl:4"),
    )
    # Another tenant's document of that id is not this one's.
    other = SourceDocument("opening-hours.txt", "Bravo's hours.", source="elsewhere.txt")
    assert (await indexer.ingest("bravo", COLLECTION, [other])).other_sources == ()
    # The documents topic reports it as well.
    event = DocumentEvent(
        event_id="e-1",
        doc_id="opening-hours.txt",
        tenant_id="alpha",
        collection=COLLECTION,
        text="The zebra enclosure opens at ten.",
        source="opening hours.txt",
    )
    assert (await indexer.apply(event)).other_sources == (
        ("opening-hours.txt", "opening-hours.txt", "opening hours.txt"),
    )
