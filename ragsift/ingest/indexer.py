"""Index documents: chunk, embed, replace the document's old chunks, bump the version.

Used by ``ragsift ingest`` and by the indexer worker (DocumentEvents). Chunk
ids are ``<doc_id>:<n>`` and point ids derive from (tenant, collection, chunk
id), so re-ingesting a document is idempotent and never touches another
tenant's document of the same id; the tenant's old chunks of the document are
deleted first so a shorter new version leaves no stale tail. The tenant's
index version is bumped afterwards, which invalidates its cache keys only, and
only where something indexed changed: an upsert identical to what is stored or a
delete of a document the tenant does not have leaves its cached results alone
(counted in ``ragsift_index_version_bumps_skipped_total``), unless another
indexer's pending mark is left on the scope: every write is marked first
(:mod:`ragsift.ingest.versions`), so a crash between a write and its bump is seen.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ragsift.errors import InvalidEventError
from ragsift.ingest.chunking import Chunk, Chunker
from ragsift.ingest.loaders import SourceDocument, check_unique_ids
from ragsift.ingest.versions import IndexVersions
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import ResultCache
from ragsift.retrieval.embedders import Embedder, FloatMatrix
from ragsift.retrieval.errors import CollectionNotFoundError
from ragsift.retrieval.index import FINGERPRINT_FIELD, ChunkRecord, CollectionInfo, VectorIndex
from ragsift.retrieval.qdrant_common import MAX_TENANTS_IN_INFO
from ragsift.schemas import DocumentEvent

__all__ = ["Indexer", "IngestReport"]


EMBED_BATCH = 64  # chunks embedded per call: bounded memory, fewer round trips


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingestion did: ``documents`` written as ``chunks``, and ``unchanged``
    documents left as they were indexed (their fingerprint had not moved).

    ``other_sources``: ``(doc_id, stored source, new source)`` of each document that
    replaced one of its id indexed from another source: two files that map to one id
    across ingests (``a b.txt`` and ``a-b.txt``), where one ingest refuses them.
    """

    documents: int
    chunks: int
    deleted_documents: int
    index_version: int | None
    unchanged: int = 0
    other_sources: tuple[tuple[str, str, str], ...] = ()


class Indexer:
    """Writes documents into one vector index with one embedder."""

    def __init__(
        self,
        index: VectorIndex,
        embedder: Embedder,
        *,
        chunker: Chunker | None = None,
        cache: ResultCache | None = None,
        metrics: Metrics | None = None,
    ):
        self.index = index
        self.embedder = embedder
        self.chunker = chunker or Chunker()
        self.cache = cache
        self.versions = IndexVersions(cache, metrics)

    async def ensure(self, collection: str) -> CollectionInfo:
        """Create the collection for this embedder (or check it matches); what it holds."""
        return await self.index.ensure_collection(
            collection, self.embedder.dim, self.embedder.embedder_id
        )

    async def ingest(
        self,
        tenant_id: str,
        collection: str,
        documents: Iterable[SourceDocument],
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> IngestReport:
        """Index documents for a tenant; ``progress(done, total)`` counts chunks written.

        Chunks of consecutive documents share embedding calls (``EMBED_BATCH``
        at a time): a corpus of short documents, one chunk each, would
        otherwise cost one embedder call per document. Every document is split
        before the first is embedded, so progress counts chunks of the whole
        ingest: one large file among small ones no longer holds it at one
        document for minutes. A document indexed before exactly as it would be
        written now (:meth:`_stored`) is left alone: ingesting a folder again
        embeds only what changed.

        Raises:
            InvalidEventError: two documents share an id (one would overwrite
                the other), or one cannot be stored (:meth:`SourceDocument.problem`);
                raised before anything is written.
        """
        docs = check_unique_ids(documents)
        for doc in docs:
            _check_storable(doc)
        info = await self.ensure(collection)
        prints = {doc.doc_id: self.fingerprint(doc) for doc in docs}
        split = [(doc, self.chunker.split(doc.doc_id, doc.text)) for doc in docs]
        unchanged, sources = await self._stored(tenant_id, collection, split, prints, info)
        split = [(doc, pieces) for doc, pieces in split if doc.doc_id not in unchanged]
        other = _other_sources([doc for doc, _ in split], sources)
        total = sum(len(pieces) for _, pieces in split)
        pending: list[tuple[int, SourceDocument, Chunk]] = []  # (document index, ...)
        replaced: set[str] = set()  # documents whose old chunks are already deleted
        chunks = removed = 0
        async with self.versions.writing(tenant_id, collection):
            for n, (doc, pieces) in enumerate(split):
                if not pieces:  # nothing to write: the old version still has to go
                    removed += await self.index.delete(collection, tenant_id, doc.doc_id)
                pending.extend((n, doc, c) for c in pieces)
                while len(pending) >= EMBED_BATCH:
                    part = pending[:EMBED_BATCH]
                    chunks += await self._flush(tenant_id, collection, part, replaced, prints)
                    del pending[:EMBED_BATCH]
                    if progress is not None:
                        progress(chunks, total)
            chunks += await self._flush(tenant_id, collection, pending, replaced, prints)
        if progress is not None and docs:
            progress(chunks, total)
        # One process's ingest: its bump follows its writes, and a run cut off before it
        # leaves nothing stale behind in the embedded runtime's in-memory cache.
        version = None
        if chunks or removed:
            version = await self.versions.bump(tenant_id, collection)
        elif docs:
            version = await self.versions.bump_if(False, tenant_id, collection, "unchanged")
        await self.versions.release()
        return IngestReport(
            len(split), chunks, 0, version, unchanged=len(unchanged), other_sources=other
        )

    def fingerprint(self, doc: SourceDocument) -> str:
        """What ``doc``'s chunks are made of here: its text, title, source, metadata, the
        chunking and the embedder (stored with each chunk, ``FINGERPRINT_FIELD``)."""
        made_of = [
            doc.doc_id,
            doc.text,
            doc.source or doc.doc_id,
            doc.source_type,
            doc.stored_metadata(),
            [self.chunker.max_chars, self.chunker.overlap_chars],
            self.embedder.embedder_id,
        ]
        text = json.dumps(made_of, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    async def _stored(
        self,
        tenant_id: str,
        collection: str,
        split: list[tuple[SourceDocument, list[Chunk]]],
        prints: Mapping[str, str],
        info: CollectionInfo,
    ) -> tuple[set[str], dict[str, str]]:
        """The documents already indexed as they would be written now, and the source
        each document id was indexed from (its first chunk's), where one is.

        Unchanged: their first and last chunks stored with this document's fingerprint,
        and no chunk after the last. Three point reads per document, whatever the
        collection's size. A version cut short by a failed write lacks its last chunk,
        an old one written before fingerprints has none: both are written again. A
        tenant the collection holds nothing of (``info``) is not asked: a first ingest
        reads no points."""
        tenants = info.tenants
        if tenants is not None and len(tenants) < MAX_TENANTS_IN_INFO and tenant_id not in tenants:
            return set(), {}
        asked = [(doc, pieces) for doc, pieces in split if pieces]
        if not asked:
            return set(), {}
        ids = [
            chunk_id
            for doc, pieces in asked
            for chunk_id in (pieces[0].chunk_id, pieces[-1].chunk_id, _after(doc, pieces))
        ]
        stored = await self.index.chunk_payloads(collection, tenant_id, ids)
        unchanged = set()
        sources: dict[str, str] = {}
        for doc, pieces in asked:
            mark = prints[doc.doc_id]
            ends = (stored.get(pieces[0].chunk_id), stored.get(pieces[-1].chunk_id))
            if ends[0] is not None and isinstance(ends[0].get("source"), str):
                sources[doc.doc_id] = ends[0]["source"]
            if _after(doc, pieces) not in stored and all(
                end is not None and end.get(FINGERPRINT_FIELD) == mark for end in ends
            ):
                unchanged.add(doc.doc_id)
        return unchanged, sources

    async def remove(self, tenant_id: str, collection: str, doc_ids: Iterable[str]) -> IngestReport:
        """Delete a tenant's documents (``ingest --prune``), under one new index version
        (cached results citing them are stale with it); none indexed: nothing changes."""
        gone = 0
        async with self.versions.writing(tenant_id, collection):
            for doc_id in sorted(set(doc_ids)):
                gone += await self.index.delete(collection, tenant_id, doc_id) > 0
        version = await self.versions.bump(tenant_id, collection) if gone else None
        if doc_ids and not gone:
            self.versions.skipped("absent")
        await self.versions.release()
        return IngestReport(0, 0, gone, version)

    async def apply(self, event: DocumentEvent) -> IngestReport:
        """Apply one DocumentEvent (upsert or delete) from the documents topic."""
        if event.op == "delete":
            # Not ensured first: a delete in a collection that does not exist deletes
            # nothing, where it created the collection (collections are shared by
            # every tenant, and any tombstone could add one).
            async with self.versions.writing(event.tenant_id, event.collection):
                try:
                    removed = await self.index.delete(
                        event.collection, event.tenant_id, event.doc_id
                    )
                except CollectionNotFoundError:
                    return IngestReport(0, 0, 0, None)
            version = await self.versions.bump_if(
                removed > 0, event.tenant_id, event.collection, "absent"
            )
            return IngestReport(0, 0, int(removed > 0), version)
        info = await self.ensure(event.collection)
        doc = SourceDocument(
            doc_id=event.doc_id,
            text=event.text or "",
            title=event.title,
            source=event.source or event.doc_id,
            source_type=event.source_type,
            metadata=dict(event.metadata),
        )
        try:
            _check_storable(doc)  # before anything of it is written
        except InvalidEventError as exc:
            # The topic keeps this record as the document's last, not the version
            # before: withdrawn here too, so this index agrees with one rebuilt from
            # the topic (BatchRouter._withdraw says why).
            async with self.versions.writing(event.tenant_id, event.collection):
                removed = await self.index.delete(event.collection, event.tenant_id, event.doc_id)
            await self.versions.bump_if(removed > 0, event.tenant_id, event.collection, "absent")
            raise InvalidEventError(
                f"{exc}; its indexed version is withdrawn, as an index rebuilt from the"
                " compacted topic would not have it: send a valid version to restore it"
            ) from exc
        pieces = self.chunker.split(doc.doc_id, doc.text)
        prints = {doc.doc_id: self.fingerprint(doc)}
        # A replay (at-least-once, a rebalance) of what is indexed already embeds nothing.
        unchanged, sources = await self._stored(
            event.tenant_id, event.collection, [(doc, pieces)], prints, info
        )
        if unchanged:
            version = await self.versions.bump_if(
                False, event.tenant_id, event.collection, "unchanged"
            )
            return IngestReport(0, 0, 0, version, unchanged=1)
        chunks = await self._write(event.tenant_id, event.collection, doc, pieces, prints)
        version = await self.versions.bump(event.tenant_id, event.collection)
        return IngestReport(1, chunks, 0, version, other_sources=_other_sources([doc], sources))

    async def _write(
        self,
        tenant_id: str,
        collection: str,
        doc: SourceDocument,
        split: list[Chunk],
        prints: Mapping[str, str],
    ) -> int:
        pieces = [(0, doc, c) for c in split]
        if not pieces:  # nothing to write: the old version still has to go
            async with self.versions.writing(tenant_id, collection):
                await self.index.delete(collection, tenant_id, doc.doc_id)
            return 0
        # Every chunk is embedded before any is written: a version that cannot be
        # embedded in full (the embedder down, or slow past the deadline) leaves the old
        # one whole. Before, the old chunks went with the first 64 new ones, and a
        # failure after them left part of the new version, served and never repaired
        # (its offset was committed with its dead letter; helper-24, 2026-12-02).
        parts = [
            pieces[start : start + EMBED_BATCH] for start in range(0, len(pieces), EMBED_BATCH)
        ]
        vectors = [await self.embedder.embed([c.text for _, _, c in part]) for part in parts]
        written = 0
        replaced: set[str] = set()
        async with self.versions.writing(tenant_id, collection):  # marked once embedded
            for part, embedded in zip(parts, vectors, strict=True):
                written += await self._flush(
                    tenant_id, collection, part, replaced, prints, vectors=embedded
                )
        return written

    async def _flush(
        self,
        tenant_id: str,
        collection: str,
        part: list[tuple[int, SourceDocument, Chunk]],
        replaced: set[str],
        prints: Mapping[str, str],
        *,
        vectors: FloatMatrix | None = None,
    ) -> int:
        """Embed one batch of chunks (of one or more documents; ``vectors`` where they
        are embedded already), then write them with their documents' fingerprints
        (``prints``, by doc id: each computed once).

        A document's old chunks are deleted right before its first new ones are
        written (so a shorter new version leaves no stale tail); ``replaced``
        remembers which documents that was done for.
        """
        if not part:
            return 0
        if vectors is None:
            vectors = await self.embedder.embed([c.text for _, _, c in part])
        records = [
            ChunkRecord(
                chunk_id=c.chunk_id,
                tenant_id=tenant_id,
                collection=collection,
                doc_id=doc.doc_id,
                text=c.text,
                source=_source(doc),
                source_type=doc.source_type,
                vector=vec,
                metadata=doc.stored_metadata(),
                fingerprint=prints[doc.doc_id],
            )
            for (_, doc, c), vec in zip(part, vectors, strict=True)
        ]
        # Embedding is batched across documents, writing is not: each document is
        # deleted and upserted on its own, in order, as before batching. Writing
        # many documents' points in one update made Qdrant Edge's BM25 sums come
        # out a float ulp apart from run to run, and so calibrations fit on the
        # same data differ between runs.
        start = 0
        for end in range(1, len(records) + 1):
            if end == len(records) or records[end].doc_id != records[start].doc_id:
                doc_id = records[start].doc_id
                if doc_id not in replaced:
                    await self.index.delete(collection, tenant_id, doc_id)
                    replaced.add(doc_id)
                await self.index.upsert(collection, records[start:end])
                start = end
        return len(part)

    @property
    def owed(self) -> frozenset[tuple[str, str]]:
        """Scopes whose index changed but whose new version the cache did not take
        (:attr:`IndexVersions.owed`)."""
        return self.versions.owed

    async def settle(self) -> None:
        """Try once more to bump each scope in :attr:`owed` (:meth:`IndexVersions.settle`)."""
        await self.versions.settle()


def _source(doc: SourceDocument) -> str:
    """The source a document's chunks are stored with (its id where it names none)."""
    return doc.source or doc.doc_id


def _other_sources(
    docs: Iterable[SourceDocument], stored: Mapping[str, str]
) -> tuple[tuple[str, str, str], ...]:
    """``(doc_id, stored source, new source)`` of each document whose id was indexed from
    another file than it is now. A JSONL line's source is ``file:line`` where the line
    names none: a line moved within its file is the same document."""
    return tuple(
        (doc.doc_id, before, _source(doc))
        for doc in docs
        if (before := stored.get(doc.doc_id)) is not None
        and _LINE.sub("", before) != _LINE.sub("", _source(doc))
    )


_LINE = re.compile(r":\d+$")


def _after(doc: SourceDocument, pieces: list[Chunk]) -> str:
    """The id a chunk after ``doc``'s last would have (chunk ids are ``<doc_id>:<n>``)."""
    return f"{doc.doc_id}:{len(pieces)}"


def _check_storable(doc: SourceDocument) -> None:
    problem = doc.problem()
    if problem is not None:
        raise InvalidEventError(f"document {doc.doc_id!r} {problem}; nothing was written")
