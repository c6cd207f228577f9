"""``QdrantServerIndex``: the :class:`~ragsift.retrieval.index.VectorIndex` of production.

Talks to a Qdrant server or cluster through ``qdrant_client.AsyncQdrantClient``
and the Query API. The collection layout, the BM25 encoding, the search plan
and the hit assembly are the ones :class:`~ragsift.retrieval.edge.EdgeIndex`
uses, so both return the same hits for the same data. Also runs against
qdrant-client's local mode (``AsyncQdrantClient(":memory:")``), which the unit
tests use (it ignores payload indexes and is slow: fine for tests only).

The embedder id, dimension and BM25 encoding are stored in the collection's
``metadata`` (Qdrant server >= 1.16, and local mode), so every worker replica
checks its embedder against the collection itself, not against its settings.
Server failures (connection, timeout, 429, 5xx) are raised as
:class:`~ragsift.errors.ServiceUnavailableError` for the caller's retry policy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from ragsift.errors import ConfigurationError, ServiceUnavailableError
from ragsift.retrieval import qdrant_common
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.errors import CollectionNotFoundError
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
from ragsift.retrieval.search_plan import HybridFusion, PointKey, SearchPlan, assemble_hits
from ragsift.retrieval.server_requests import (
    raw_points,
    server_filter,
    server_sparse,
    to_request,
)

__all__ = ["QdrantServerIndex"]

_HTTP_CONFLICT = 409
_HTTP_NOT_FOUND = 404
_HTTP_TOO_MANY_REQUESTS = 429
_HTTP_SERVER_ERROR = 500
#: The payload indexes of every collection: is_tenant lets the server co-locate each
#: tenant's points; both fields are faceted (collection_info, documents) and filtered.
_PAYLOAD_INDEXES: dict[str, models.KeywordIndexParams | models.PayloadSchemaType] = {
    TENANT_FIELD: models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
    DOC_FIELD: models.PayloadSchemaType.KEYWORD,
}


def _reason(exc: Exception) -> str:
    """What went wrong, never empty: the message, else the type (``ConnectError('')``)."""
    # qdrant-client wraps transport failures; the wrapped one's type says more.
    if isinstance(exc, ResponseHandlingException) and isinstance(exc.source, Exception):
        exc = exc.source
    return str(exc) or type(exc).__name__


@asynccontextmanager
async def _qdrant_errors(collection: str) -> AsyncIterator[None]:
    """Map transport and server failures to ragsift errors; let the rest through."""
    try:
        yield
    except UnexpectedResponse as exc:
        status = exc.status_code or 0
        if status == _HTTP_NOT_FOUND:
            raise CollectionNotFoundError(collection) from exc
        if status == _HTTP_TOO_MANY_REQUESTS or status >= _HTTP_SERVER_ERROR:
            raise ServiceUnavailableError(
                f"Qdrant answered {status} for collection {collection!r}", service="qdrant"
            ) from exc
        raise
    except (ResponseHandlingException, httpx.TransportError) as exc:
        raise ServiceUnavailableError(
            f"Qdrant unreachable for collection {collection!r}: {_reason(exc)}",
            service="qdrant",
        ) from exc


class QdrantServerIndex:
    """Hybrid, tenant-isolated vector index on a Qdrant server through the Query API.

    Args:
        client: an ``AsyncQdrantClient`` (server URL, or ``":memory:"`` for tests);
            the index owns it from now on and closes it in :meth:`close`.
        bm25: the BM25 encoder (default parameters if ``None``).
        hybrid_fusion: ``client`` (fuse here, default) or ``qdrant`` (``FusionQuery``).
        max_collections: most collections the server lists (any application's count); a
            new one past it is refused (``CollectionLimitError``). None: no cap.
    """

    def __init__(
        self,
        client: AsyncQdrantClient,
        *,
        bm25: Bm25Encoder | None = None,
        hybrid_fusion: HybridFusion = "client",
        max_collections: int | None = None,
    ) -> None:
        if not isinstance(client, AsyncQdrantClient):
            raise TypeError(f"client must be an AsyncQdrantClient, got {type(client).__name__}")
        if hybrid_fusion not in ("client", "qdrant"):
            raise ValueError(f"hybrid_fusion must be 'client' or 'qdrant', got {hybrid_fusion!r}")
        self.client = client
        self.bm25 = bm25 or Bm25Encoder()
        self.hybrid_fusion: HybridFusion = hybrid_fusion
        self._stored: dict[str, StoredCollection] = {}
        self.max_collections = qdrant_common.check_max_collections(max_collections)

    # -- collections --------------------------------------------------------

    @asynccontextmanager
    async def _calls(self, collection: str) -> AsyncIterator[None]:
        """:func:`_qdrant_errors`, forgetting ``collection``'s metadata when it is gone.

        The metadata never changes for one collection, but the collection can be
        deleted and made again (another embedder, another dimension): once it is
        seen missing, the next :meth:`_load` reads the new one.
        """
        try:
            async with _qdrant_errors(collection):
                yield
        except CollectionNotFoundError:
            self._stored.pop(collection, None)
            raise

    async def _load(self, name: str) -> StoredCollection:
        """The stored metadata of ``name``, cached until it is seen missing (:meth:`_calls`)."""
        validate_collection_name(name)
        cached = self._stored.get(name)
        if cached is not None:
            return cached
        async with self._calls(name):
            if not await self.client.collection_exists(name):
                raise CollectionNotFoundError(name)
            info = await self.client.get_collection(name)
        return self._remember(name, info)

    def _remember(self, name: str, info: models.CollectionInfo) -> StoredCollection:
        """``name``'s metadata read from its ``get_collection`` answer, checked and cached."""
        try:
            stored = StoredCollection.from_dict(name, info.config.metadata)
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"{exc.message} (collection metadata needs Qdrant server >= 1.16)"
            ) from exc
        qdrant_common.check_bm25(name, stored, self.bm25)
        self._stored[name] = stored
        return stored

    async def _create(self, name: str, dim: int, embedder_id: str) -> None:
        stored = StoredCollection(embedder_id, dim, self.bm25.encoder_id)
        async with self._calls(name):
            try:
                await self.client.create_collection(
                    name,
                    vectors_config={
                        DENSE_VECTOR: models.VectorParams(size=dim, distance=models.Distance.COSINE)
                    },
                    sparse_vectors_config={
                        SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
                    },
                    metadata=stored.to_dict(),
                )
            except UnexpectedResponse as exc:
                if exc.status_code == _HTTP_CONFLICT:
                    return  # another replica created it first; _load checks it matches
                raise
            except ValueError:
                # local mode's "already exists"; a real conflict is caught by _load's check
                if not await self.client.collection_exists(name):
                    raise

    async def _index_payload(self, name: str, info: models.CollectionInfo) -> None:
        """Make the payload indexes ``name`` does not list yet (in ``info``, its
        ``get_collection`` answer).

        Not only at creation: one that failed then (a timeout, a 503, a replica
        stopped in between) would be missing for good, every facet on its field
        refused. Local mode lists none, so there they are asked for each time (no-ops).
        """
        listed = info.payload_schema or {}
        async with self._calls(name):
            for field, schema in _PAYLOAD_INDEXES.items():
                if field not in listed:
                    await self.client.create_payload_index(name, field, schema)

    async def ensure_collection(self, name: str, dim: int, embedder_id: str) -> CollectionInfo:
        """Create collection ``name`` or check the existing one matches ``dim``/``embedder_id``."""
        qdrant_common.check_new_collection(name, dim, embedder_id)
        async with self._calls(name):
            exists = await self.client.collection_exists(name)
        # This is the check against the collection as it is now: it may have been made
        # again (by another replica) since it was cached, without this one seeing it gone.
        self._stored.pop(name, None)
        if not exists:
            if self.max_collections is not None:  # replicas creating at once may each pass
                async with self._calls(name):
                    listed = (await self.client.get_collections()).collections
                qdrant_common.check_room(name, len(listed), self.max_collections)
            await self._create(name, dim, embedder_id)
        async with self._calls(name):  # one read for the metadata, indexes and count
            info = await self.client.get_collection(name)
        stored = self._remember(name, info)
        qdrant_common.check_stored_embedder(name, stored, embedder_id, dim)
        await self._index_payload(name, info)
        return await self._info(name, stored, info)

    async def collection_info(self, collection: str) -> CollectionInfo:
        """Embedder, dimension, point count and chunks per tenant of a collection."""
        stored = await self._load(collection)
        async with self._calls(collection):
            info = await self.client.get_collection(collection)
        return await self._info(collection, stored, info)

    async def _info(
        self, collection: str, stored: StoredCollection, info: models.CollectionInfo
    ) -> CollectionInfo:
        async with self._calls(collection):
            facet = await self.client.facet(
                collection, key=TENANT_FIELD, limit=qdrant_common.MAX_TENANTS_IN_INFO, exact=True
            )
        return CollectionInfo(
            name=collection,
            embedder_id=stored.embedder_id,
            dim=stored.dim,
            points_count=info.points_count or 0,
            tenants=qdrant_common.tenant_counts(facet.hits),
        )

    # -- writes ---------------------------------------------------------------

    async def upsert(self, collection: str, records: Sequence[ChunkRecord]) -> int:
        """Insert or overwrite chunks; the point id derives from tenant, collection and chunk id."""
        stored = await self._load(collection)
        qdrant_common.check_records(collection, records)
        for batch in qdrant_common.record_batches(records):
            points = [
                models.PointStruct(id=point_id(record), vector=vector, payload=payload)
                for record in batch
                for vector, payload in [
                    qdrant_common.point_parts(record, stored.dim, self.bm25, server_sparse)
                ]
            ]
            async with self._calls(collection):
                await self.client.upsert(collection, points=points, wait=True)
        return len(records)

    async def delete(self, collection: str, tenant_id: str, doc_id: str) -> int:
        """Delete every chunk of ``doc_id`` owned by ``tenant_id``; how many there were.

        Counted just before the delete: a document's events are applied in order by one
        indexer (the documents topic is keyed by doc id), so none is written between."""
        qdrant_common.check_delete(tenant_id, doc_id)
        await self._load(collection)
        flt = server_filter([(TENANT_FIELD, tenant_id), (DOC_FIELD, doc_id)])
        async with self._calls(collection):
            found = await self.client.count(collection, count_filter=flt, exact=True)
        if not found.count:
            return 0
        selector = models.FilterSelector(filter=flt)
        async with self._calls(collection):
            await self.client.delete(collection, points_selector=selector, wait=True)
        return int(found.count)

    # -- reads ----------------------------------------------------------------

    async def chunk_payloads(
        self, collection: str, tenant_id: str, chunk_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        """The stored payloads of a tenant's chunks by chunk id; one not stored is absent."""
        tenant = require_tenant(tenant_id)
        await self._load(collection)
        ids = {chunk_point_id(tenant, collection, c): c for c in chunk_ids}
        async with self._calls(collection):
            records = await self.client.retrieve(
                collection, ids=list(ids), with_payload=True, with_vectors=False
            )
        return {
            ids[str(r.id)]: r.payload or {}
            for r in records
            if (r.payload or {}).get(TENANT_FIELD) == tenant
        }

    async def documents(self, collection: str, tenant_id: str) -> dict[str, int]:
        """One tenant's document ids and their chunk counts."""
        require_tenant(tenant_id)
        await self._load(collection)
        async with self._calls(collection):
            facet = await self.client.facet(
                collection,
                key=DOC_FIELD,
                facet_filter=server_filter([(TENANT_FIELD, tenant_id)]),
                limit=qdrant_common.MAX_DOCUMENTS_LISTED,
                exact=True,
            )
        return qdrant_common.document_counts(collection, tenant_id, facet.hits)

    async def search(self, collection: str, request: SearchRequest) -> list[SearchHit]:
        """Search one tenant's chunks (see :mod:`ragsift.retrieval.search_plan` for hybrid)."""
        return (await self.search_batch(collection, [request]))[0]

    async def search_batch(
        self, collection: str, requests: Sequence[SearchRequest]
    ) -> list[list[SearchHit]]:
        """All channel queries in one ``query_batch_points`` call, then one payload fetch."""
        stored = await self._load(collection)
        plans: list[SearchPlan] = [
            qdrant_common.plan_for(collection, stored, request, self.bm25, self.hybrid_fusion)
            for request in requests
        ]
        native = [
            to_request(query, server_filter(plan.conditions))
            for plan in plans
            for query in plan.queries
        ]
        async with self._calls(collection):
            answers = await self.client.query_batch_points(collection, native) if native else []
        ranked = qdrant_common.rank_batch(plans, [raw_points(a.points) for a in answers])
        wanted = [pid for r in ranked for pid in r.payload_ids]
        payloads: Mapping[PointKey, Mapping[str, Any]] = {}
        if wanted:
            async with self._calls(collection):
                records = await self.client.retrieve(
                    collection, list(dict.fromkeys(wanted)), with_payload=True, with_vectors=False
                )
            payloads = {str(r.id): r.payload or {} for r in records}
        return [assemble_hits(r, payloads) for r in ranked]

    async def close(self) -> None:
        """Close the client."""
        await self.client.close()
