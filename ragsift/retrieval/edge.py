"""``EdgeIndex``: the :class:`~ragsift.retrieval.index.VectorIndex` of the embedded runtime.

Qdrant Edge (``qdrant-edge-py``) runs the Qdrant engine in-process: no server.
Layout under the root ``path``, one shard per collection::

    <path>/<collection>/                  the EdgeShard directory
    <path>/<collection>.ragsift.json      embedder id, dimension, BM25 encoding

Threading: ``EdgeShard`` calls are synchronous and may come from any thread,
but a shard directory is locked by the process that opened it (a second
``EdgeShard.load`` of the same directory fails on its write-ahead-log lock),
so one ``EdgeIndex`` per root per process. Searches take well under a
millisecond after :meth:`EdgeIndex.optimize`, so they run directly on the
event loop behind the async protocol; upserts are applied in batches with a
yield to the loop between them. Writes to a collection are serialized by a lock.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ragsift.errors import ConfigurationError, ServiceUnavailableError
from ragsift.file_lock import exclusive
from ragsift.retrieval import qdrant_common
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.edge_holder import (
    describe_holder,
    load_waiting,
    record_holder,
    release_holder,
)
from ragsift.retrieval.edge_requests import (
    Conditions,
    edge_filter,
    edge_sparse,
    raw_points,
    shared_filter,
    to_request,
    uuid_text,
)
from ragsift.retrieval.edge_unfinished import clear_unfinished
from ragsift.retrieval.errors import CollectionNotFoundError
from ragsift.retrieval.qdrant_common import MAX_DOCUMENTS_LISTED, MAX_TENANTS_IN_INFO
from ragsift.retrieval.records import (
    DENSE_VECTOR,
    DOC_FIELD,
    SPARSE_VECTOR,
    TENANT_FIELD,
    ChunkRecord,
    CollectionInfo,
    SearchHit,
    SearchRequest,
    StoredCollection,
    chunk_point_id,
    point_id,
    require_tenant,
    validate_collection_name,
)
from ragsift.retrieval.search_plan import (
    HybridFusion,
    PointKey,
    SearchPlan,
    assemble_hits,
)

__all__ = ["MAX_TENANTS_IN_INFO", "EdgeIndex"]

SIDECAR_SUFFIX = ".ragsift.json"
#: Held while a collection is created (see :meth:`EdgeIndex._creating`).
CREATE_LOCK = ".create.lock"


class _Collection:
    """An open shard and its stored metadata."""

    def __init__(self, name: str, shard: qe.EdgeShard, stored: StoredCollection) -> None:
        self.name = name
        self.shard = shard
        self.stored = stored
        self.write_lock = threading.Lock()


class EdgeIndex:
    """Hybrid, tenant-isolated vector index on Qdrant Edge shards under ``path``.

    Args:
        path: root directory; created if missing.
        bm25: the BM25 encoder (default parameters if ``None``); a collection
            refuses to open with an encoder other than the one that built it.
        hybrid_fusion: ``client`` (fuse the two channels here: fastest, see
            :mod:`ragsift.retrieval.search_plan`) or ``qdrant`` (Qdrant's ``Fusion.Rrf``).
        search_threads: threads of each shard's search pool (``max_search_threads``,
            written to the shard's config); None keeps what the shard has: Qdrant
            Edge's default, derived from the CPUs, unless it was set before.
        max_collections: most collections under ``path``; a new one past it is refused
            (``CollectionLimitError``), counted on disk as it would be made. None: no cap.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        bm25: Bm25Encoder | None = None,
        hybrid_fusion: HybridFusion = "client",
        search_threads: int | None = None,
        max_collections: int | None = None,
    ) -> None:
        if hybrid_fusion not in ("client", "qdrant"):
            raise ValueError(f"hybrid_fusion must be 'client' or 'qdrant', got {hybrid_fusion!r}")
        if search_threads is not None and search_threads < 1:
            raise ValueError(f"search_threads must be >= 1, got {search_threads}")
        self.search_threads = search_threads
        self.max_collections = qdrant_common.check_max_collections(max_collections)
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise ValueError(f"path must be a directory, got the file {str(root)!r}")
        root.mkdir(parents=True, exist_ok=True)
        self.path = root
        self.bm25 = bm25 or Bm25Encoder()
        self.hybrid_fusion: HybridFusion = hybrid_fusion
        self._collections: dict[str, _Collection] = {}
        self._open_lock = threading.Lock()

    # -- collections --------------------------------------------------------

    def _sidecar(self, name: str) -> Path:
        return self.path / f"{name}{SIDECAR_SUFFIX}"

    def _write_sidecar(self, name: str, stored: StoredCollection) -> None:
        target = self._sidecar(name)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(stored.to_dict(), indent=2, sort_keys=True))
        os.replace(tmp, target)  # atomic: a reader sees the old file or the new one

    def _read_sidecar(self, name: str) -> StoredCollection | None:
        target = self._sidecar(name)
        if not target.exists():
            return None
        try:
            raw = json.loads(target.read_text(encoding="utf-8"))
        except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested past the parser
            raise ConfigurationError(
                f"unreadable metadata file {str(target)!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(raw, dict):
            raise ConfigurationError(f"unreadable metadata file {str(target)!r}: not a JSON object")
        return StoredCollection.from_dict(name, raw)

    def _open(self, name: str) -> _Collection:
        """The open collection ``name``, loading it from disk on first use."""
        validate_collection_name(name)
        with self._open_lock:
            opened = self._collections.get(name)
            if opened is not None:
                return opened
            stored = self._read_sidecar(name)
            shard_dir = self.path / name
            if stored is None or not shard_dir.is_dir():
                raise CollectionNotFoundError(name)
            qdrant_common.check_bm25(name, stored, self.bm25)
            # The shard's own config, to size its search pool (Qdrant Edge checks it
            # against the stored one); None keeps what is stored.
            sized = None if self.search_threads is None else self._config(stored.dim)
            opened = _Collection(name, self._load(shard_dir, sized), stored)
            self._collections[name] = opened
            return opened

    def _load(self, shard_dir: Path, sized: qe.EdgeConfig | None) -> qe.EdgeShard:
        """Open a stored shard; what the engine refuses becomes an error that says why."""
        try:
            shard = load_waiting(
                lambda: qe.EdgeShard.load(str(shard_dir), sized), self.path, shard_dir.name
            )
        except Exception as exc:  # the binding raises bare Exceptions with the engine's text
            text = str(exc)
            if "WouldBlock" in text:  # another process holds the shard's write-ahead log
                holder = describe_holder(self.path, shard_dir.name)
                by = f"held by {holder}" if holder else "open in another process"
                raise ServiceUnavailableError(
                    f"the index at {str(shard_dir)!r} is {by}: a console or a worker on"
                    " this data dir keeps it until it stops, an ingest until it ends; stop"
                    " it or wait, or give this command another --data-dir",
                    service="qdrant-edge",  # in process: no server or setting to name
                ) from exc
            raise ConfigurationError(
                f"cannot open the index at {str(shard_dir)!r}: {text}. If its files are"
                f" damaged, restore the data dir from a backup, or remove {str(shard_dir)!r}"
                f" and {str(self._sidecar(shard_dir.name))!r} and ingest again"
            ) from exc
        record_holder(self.path, shard_dir.name)
        return shard

    def _config(self, dim: int) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            vectors={DENSE_VECTOR: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            max_search_threads=self.search_threads,
        )

    def _stored_count(self) -> int:
        """The collections on disk (one sidecar each, written last): every process's, and
        every one made before a restart. One directory listing, only as one is made."""
        with os.scandir(self.path) as entries:
            return sum(1 for entry in entries if entry.name.endswith(SIDECAR_SUFFIX))

    def _creating(self) -> AbstractContextManager[None]:
        """The index folder's creation lock, across processes: two ingests creating one
        new collection at once made one of them fail on the other's half-made shard."""
        return exclusive(self.path / CREATE_LOCK)

    def _create(self, name: str, dim: int, embedder_id: str) -> _Collection:
        stored = StoredCollection(embedder_id, dim, self.bm25.encoder_id)
        try:
            shard = qe.EdgeShard.create(str(self.path / name), self._config(dim))
        except Exception as exc:  # the binding raises bare Exceptions with the engine's text
            raise ConfigurationError(
                f"cannot create the shard of collection {name!r} in {self.path}: {exc}"
            ) from exc
        # is_tenant lets Qdrant co-locate each tenant's points; doc_id serves re-ingestion deletes.
        shard.update(
            qe.UpdateOperation.create_field_index(
                TENANT_FIELD, qe.KeywordIndexParams(is_tenant=True)
            )
        )
        shard.update(qe.UpdateOperation.create_field_index(DOC_FIELD, qe.PayloadSchemaType.Keyword))
        shard.flush()
        record_holder(self.path, name)
        self._write_sidecar(name, stored)  # last: a sidecar only ever names a complete shard
        return _Collection(name, shard, stored)

    async def ensure_collection(self, name: str, dim: int, embedder_id: str) -> CollectionInfo:
        """Create collection ``name`` or check the existing one matches ``dim``/``embedder_id``."""
        qdrant_common.check_new_collection(name, dim, embedder_id)
        try:
            opened = self._open(name)
        except CollectionNotFoundError:
            with self._open_lock, self._creating():
                made = name in self._collections or self._sidecar(name).exists()
                if not made:
                    qdrant_common.check_room(name, self._stored_count(), self.max_collections)
                if not made and (self.path / name).exists():
                    # Under the lock no other process is creating it: a creation that did
                    # not finish (a kill). Another ingest creating the same new collection
                    # read as this before, with advice to remove its shard.
                    clear_unfinished(self.path / name, self._sidecar(name))
                if not made:
                    self._collections[name] = self._create(name, dim, embedder_id)
            opened = self._open(name)  # made here, or by another process meanwhile
        qdrant_common.check_stored_embedder(name, opened.stored, embedder_id, dim)
        return await self.collection_info(name)

    async def collection_info(self, collection: str) -> CollectionInfo:
        """Embedder, dimension, point count and chunks per tenant of a collection."""
        opened = self._open(collection)
        facet = opened.shard.facet(
            qe.FacetRequest(key=TENANT_FIELD, limit=MAX_TENANTS_IN_INFO, exact=True)
        )
        return CollectionInfo(
            name=collection,
            embedder_id=opened.stored.embedder_id,
            dim=opened.stored.dim,
            points_count=opened.shard.info().points_count,
            tenants=qdrant_common.tenant_counts(facet.hits),
        )

    # -- writes ---------------------------------------------------------------

    async def upsert(self, collection: str, records: Sequence[ChunkRecord]) -> int:
        """Insert or overwrite chunks; the point id derives from tenant, collection and chunk id."""
        opened = self._open(collection)
        qdrant_common.check_records(collection, records)
        for batch in qdrant_common.record_batches(records):
            points = [
                qe.Point(id=point_id(record), vector=vector, payload=payload)
                for record in batch
                for vector, payload in [
                    qdrant_common.point_parts(record, opened.stored.dim, self.bm25, edge_sparse)
                ]
            ]
            with opened.write_lock:
                opened.shard.update(qe.UpdateOperation.upsert_points(points))
            await asyncio.sleep(0)
        return len(records)

    async def delete(self, collection: str, tenant_id: str, doc_id: str) -> int:
        """Delete every chunk of ``doc_id`` owned by ``tenant_id``; how many there were
        (counted under the write lock, so no write of this process comes between)."""
        qdrant_common.check_delete(tenant_id, doc_id)
        opened = self._open(collection)
        flt = edge_filter([(TENANT_FIELD, tenant_id), (DOC_FIELD, doc_id)])
        with opened.write_lock:
            removed = opened.shard.count(qe.CountRequest(exact=True, filter=flt))
            if removed:
                opened.shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
        return int(removed)

    # -- reads ----------------------------------------------------------------

    async def documents(self, collection: str, tenant_id: str) -> dict[str, int]:
        """One tenant's document ids and their chunk counts."""
        flt, most = edge_filter([(TENANT_FIELD, require_tenant(tenant_id))]), MAX_DOCUMENTS_LISTED
        facet = self._open(collection).shard.facet(qe.FacetRequest(DOC_FIELD, most, True, flt))
        return qdrant_common.document_counts(collection, tenant_id, facet.hits)

    async def chunk_payloads(
        self, collection: str, tenant_id: str, chunk_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        """The stored payloads of a tenant's chunks by chunk id; one not stored is absent."""
        tenant = require_tenant(tenant_id)
        keys: dict[PointKey, str] = {
            uuid.UUID(chunk_point_id(tenant, collection, c)).int: c for c in chunk_ids
        }
        found = self._payloads(self._open(collection), list(keys))
        return {keys[k]: p for k, p in found.items() if p.get(TENANT_FIELD) == tenant}

    def _payloads(
        self, opened: _Collection, keys: list[PointKey]
    ) -> dict[PointKey, Mapping[str, Any]]:
        if not keys:
            return {}
        ids: list[qe.PointId] = [uuid_text(key) for key in keys]
        records = opened.shard.retrieve(ids, True, False)
        return {r.id.int: r.payload or {} for r in records}  # type: ignore[union-attr]  # UUIDs, see raw_points

    async def search(self, collection: str, request: SearchRequest) -> list[SearchHit]:
        """Search one tenant's chunks (see :mod:`ragsift.retrieval.search_plan` for hybrid)."""
        return (await self.search_batch(collection, [request]))[0]

    async def search_batch(
        self, collection: str, requests: Sequence[SearchRequest]
    ) -> list[list[SearchHit]]:
        """All channel queries of all requests in one ``query_batch``, then one payload fetch."""
        opened = self._open(collection)
        plans: list[SearchPlan] = [
            qdrant_common.plan_for(
                opened.name, opened.stored, request, self.bm25, self.hybrid_fusion
            )
            for request in requests
        ]
        filters: dict[Conditions, qe.Filter] = {}
        native = [
            to_request(query, shared_filter(filters, plan.conditions))
            for plan in plans
            for query in plan.queries
        ]
        answers = opened.shard.query_batch(qe.QueryBatchRequest(native)) if native else []
        asked = [query.with_payload for plan in plans for query in plan.queries]
        raw = [raw_points(answer, payload) for answer, payload in zip(answers, asked, strict=True)]
        ranked = qdrant_common.rank_batch(plans, raw)
        wanted = {pid: None for r in ranked for pid in r.payload_ids}
        payloads = self._payloads(opened, list(wanted))
        return [assemble_hits(r, payloads) for r in ranked]

    # -- maintenance ------------------------------------------------------------

    def optimize(self, collection: str | None = None) -> bool:
        """Build HNSW and merge segments (blocking; seconds for 10k points).

        Returns True if any segment changed. ``None`` optimizes every open collection.
        """
        names = [collection] if collection is not None else list(self._collections)
        changed = False
        for name in names:
            opened = self._open(name)
            with opened.write_lock:
                changed = opened.shard.optimize() or changed
        return changed

    def flush(self) -> None:
        """Persist pending writes of every open collection."""
        for opened in list(self._collections.values()):
            with opened.write_lock:
                opened.shard.flush()

    async def close(self) -> None:
        """Flush and close every open shard (releases their directory locks)."""
        with self._open_lock:
            for opened in self._collections.values():
                with opened.write_lock:
                    opened.shard.flush()
                    opened.shard.close()
                release_holder(self.path, opened.name)
            self._collections.clear()
