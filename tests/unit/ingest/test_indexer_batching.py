"""Issue 13: the indexer embeds chunks of many documents per call and refuses duplicate ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsift.errors import InvalidEventError
from ragsift.ingest.indexer import EMBED_BATCH, Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import FloatMatrix, HashingEmbedder
from ragsift.retrieval.index import ChunkRecord, SearchRequest
from ragsift.schemas import DocumentEvent

DIM = 64


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, recording the size of every embed call."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.calls: list[int] = []

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.calls.append(len(texts))
        return await super().embed(texts)


def _docs(n: int) -> list[SourceDocument]:
    return [SourceDocument(doc_id=f"p{i}", text=f"Paragraph {i} on topic {i}.") for i in range(n)]


async def test_short_documents_share_embedding_calls(tmp_path: Path) -> None:
    # Before: one embed call per document (a 5,000-paragraph set = 5,000 model calls).
    embedder = CountingEmbedder()
    index = EdgeIndex(tmp_path)
    done: list[tuple[int, int]] = []
    try:
        report = await Indexer(index, embedder).ingest(
            "t", "c", _docs(EMBED_BATCH * 2 + 5), progress=lambda *at: done.append(at)
        )
        hits = await index.search(
            "c", SearchRequest(tenant_id="t", query="Paragraph 130", mode="keyword", limit=3)
        )
    finally:
        await index.close()
    assert report.documents == report.chunks == EMBED_BATCH * 2 + 5
    assert embedder.calls == [EMBED_BATCH, EMBED_BATCH, 5]
    # Chunks written of all the ingest's chunks, counted as each embedding call lands.
    n = report.chunks
    assert done == [(EMBED_BATCH, n), (EMBED_BATCH * 2, n), (n, n)]
    assert hits[0].doc_id == "p130"  # every chunk was written with its own document


async def test_duplicate_ids_in_one_ingest_are_refused_before_writing(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    index = EdgeIndex(tmp_path)
    docs = [*_docs(3), SourceDocument(doc_id="p1", text="another paragraph with the same id")]
    try:
        with pytest.raises(InvalidEventError, match="'p1' is used twice"):
            await Indexer(index, embedder).ingest("t", "c", docs)
    finally:
        await index.close()
    assert embedder.calls == []


async def test_one_large_document_shows_progress_as_its_chunks_land(tmp_path: Path) -> None:
    # Before: progress counted documents, so a folder's one big file sat at "0/1" until
    # every one of its chunks was embedded (minutes with the model).
    words = " ".join(f"word{i}" for i in range(EMBED_BATCH * 400))
    index = EdgeIndex(tmp_path)
    done: list[tuple[int, int]] = []
    try:
        report = await Indexer(index, CountingEmbedder()).ingest(
            "t",
            "c",
            [SourceDocument(doc_id="big", text=words)],
            progress=lambda *at: done.append(at),
        )
    finally:
        await index.close()
    assert report.chunks > 2 * EMBED_BATCH
    assert [d for d, _ in done] == sorted(d for d, _ in done)
    assert {t for _, t in done} == {report.chunks}
    assert [d for d, _ in done][:2] == [EMBED_BATCH, 2 * EMBED_BATCH]
    assert done[-1] == (report.chunks, report.chunks)


async def test_a_document_indexed_as_it_is_now_is_not_embedded_again(tmp_path: Path) -> None:
    # Before: every ingest of a folder embedded every document again, changed or not.
    embedder = CountingEmbedder()
    index = ReadCountingIndex(tmp_path)
    docs = _docs(5)
    try:
        indexer = Indexer(index, embedder, cache=InMemoryCache())
        first = await indexer.ingest("t", "c", docs)
        assert index.reads == 0  # a tenant the collection holds nothing of: no point read
        again = await indexer.ingest("t", "c", docs)
        assert index.reads == 1
        assert (again.documents, again.chunks, again.unchanged) == (0, 0, 5)
        assert again.index_version is None  # nothing changed: cached results stand
        assert embedder.calls == [5]
        edited = [docs[0], SourceDocument(doc_id="p1", text="Paragraph 1, edited."), *docs[2:]]
        retitled = SourceDocument(doc_id="p2", text=docs[2].text, title="A new title")
        later = await indexer.ingest("t", "c", [*edited[:2], retitled, *edited[3:]])
        assert (later.documents, later.unchanged) == (2, 3)
        assert embedder.calls == [5, 2]
        other = await indexer.ingest("u", "c", docs)  # another tenant's same ids: its own
        assert (other.documents, other.unchanged) == (5, 0)
        # A version with a chunk past its last, or written before fingerprints, is
        # written again, whatever its first chunk says.
        big = SourceDocument(doc_id="big", text=" ".join(f"w{i}" for i in range(4000)))
        whole = await indexer.ingest("t", "c", [big])
        assert whole.chunks > 2
        assert (await indexer.ingest("t", "c", [big])).unchanged == 1
        tail = _record("t", "big", f"big:{whole.chunks}", "w1", indexer.fingerprint(big))
        await index.upsert("c", [tail])
        assert (await indexer.ingest("t", "c", [big])).documents == 1
        assert f"big:{whole.chunks}" not in await index.chunk_payloads("c", "t", [tail.chunk_id])
        await index.delete("c", "t", "big")
        await index.upsert("c", [_record("t", "big", "big:0", "w0 w1")])  # no fingerprint
        assert (await indexer.ingest("t", "c", [big])).documents == 1
    finally:
        await index.close()
    assert first.index_version is not None


class ReadCountingIndex(EdgeIndex):
    """Qdrant Edge, counting the chunk reads the indexer asks for."""

    reads = 0

    async def chunk_payloads(
        self, collection: str, tenant_id: str, chunk_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        self.reads += 1
        return await super().chunk_payloads(collection, tenant_id, chunk_ids)


def _record(
    tenant: str, doc_id: str, chunk_id: str, text: str, fingerprint: str | None = None
) -> ChunkRecord:
    return ChunkRecord(
        fingerprint=fingerprint,
        chunk_id=chunk_id,
        tenant_id=tenant,
        collection="c",
        doc_id=doc_id,
        text=text,
        source=doc_id,
        source_type="unknown",
        vector=HashingEmbedder(DIM).embed_sync(text),
    )


async def test_a_replayed_document_event_embeds_nothing(tmp_path: Path) -> None:
    # At-least-once: a rebalance or a restart hands the indexer events it applied.
    embedder = CountingEmbedder()
    index = EdgeIndex(tmp_path)
    event = DocumentEvent(
        event_id="e1", tenant_id="t", collection="c", doc_id="policy", text="Refunds in 30 days."
    )
    try:
        indexer = Indexer(index, embedder, cache=InMemoryCache())
        first = await indexer.apply(event)
        replay = await indexer.apply(event)
        edited = await indexer.apply(event.model_copy(update={"text": "Refunds in 14 days."}))
    finally:
        await index.close()
    assert (first.documents, replay.documents, replay.unchanged, edited.documents) == (1, 0, 1, 1)
    assert embedder.calls == [1, 1]
    assert replay.index_version is None  # nothing changed: cached results stand
