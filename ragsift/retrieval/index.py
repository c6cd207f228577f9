"""The ``VectorIndex`` protocol: what a tenant-isolating hybrid index does.

Two adapters implement it: :class:`ragsift.retrieval.edge.EdgeIndex`
(Qdrant Edge, in-process, the embedded runtime) and
:class:`ragsift.retrieval.server.QdrantServerIndex` (a Qdrant server through
``qdrant_client.AsyncQdrantClient``). The records it takes and returns live in
:mod:`ragsift.retrieval.records` (tenant isolation and point ids are described
there); the search plan, RRF fusion and hit assembly both adapters share live
in :mod:`ragsift.retrieval.search_plan` (hybrid search is described there).

Callers import all three from here: the names of those two modules are
re-exported, so ``from ragsift.retrieval.index import SearchRequest, rrf_fuse``
keeps working wherever it was written before the split (issue 18).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ragsift.retrieval.records import (
    DEFAULT_LIMIT,
    DEFAULT_PREFETCH_LIMIT,
    DENSE_VECTOR,
    DOC_FIELD,
    METADATA_FORMAT,
    POINT_ID_NAMESPACE,
    RESERVED_FIELDS,
    SPARSE_VECTOR,
    TENANT_FIELD,
    ChunkRecord,
    CollectionInfo,
    DenseCut,
    PayloadValue,
    SearchHit,
    SearchMode,
    SearchRequest,
    StoredCollection,
    Vector,
    as_vector,
    check_embedder,
    dense_for_upsert,
    filter_conditions,
    point_id,
    record_payload,
    require_tenant,
    validate_collection_name,
)
from ragsift.retrieval.search_plan import (
    RRF_K,
    ChannelKind,
    ChannelQuery,
    HybridFusion,
    PointKey,
    RankedAnswers,
    RawPoint,
    SearchPlan,
    assemble_hits,
    cut_dense,
    plan_search,
    rank_answers,
    rrf_fuse,
)

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_PREFETCH_LIMIT",
    "DENSE_VECTOR",
    "DOC_FIELD",
    "METADATA_FORMAT",
    "POINT_ID_NAMESPACE",
    "RESERVED_FIELDS",
    "RRF_K",
    "SPARSE_VECTOR",
    "TENANT_FIELD",
    "ChannelKind",
    "ChannelQuery",
    "ChunkRecord",
    "CollectionInfo",
    "DenseCut",
    "HybridFusion",
    "PayloadValue",
    "PointKey",
    "RankedAnswers",
    "RawPoint",
    "SearchHit",
    "SearchMode",
    "SearchPlan",
    "SearchRequest",
    "StoredCollection",
    "Vector",
    "VectorIndex",
    "as_vector",
    "assemble_hits",
    "check_embedder",
    "cut_dense",
    "dense_for_upsert",
    "filter_conditions",
    "plan_search",
    "point_id",
    "rank_answers",
    "record_payload",
    "require_tenant",
    "rrf_fuse",
    "validate_collection_name",
]


@runtime_checkable
class VectorIndex(Protocol):
    """A tenant-isolating hybrid vector index (Qdrant Edge or Qdrant server)."""

    async def ensure_collection(self, name: str, dim: int, embedder_id: str) -> CollectionInfo:
        """Create the collection, or check an existing one was built with this embedder.

        Raises:
            EmbedderMismatchError: the collection exists with another embedder id.
            DimensionMismatchError: the collection exists with another dimension.
        """
        ...

    async def upsert(self, collection: str, records: Sequence[ChunkRecord]) -> int:
        """Insert or overwrite chunks (idempotent by tenant, collection and ``chunk_id``).

        Returns how many. A chunk never overwrites another tenant's chunk.
        """
        ...

    async def delete(self, collection: str, tenant_id: str, doc_id: str) -> None:
        """Delete every chunk of one tenant's document (before re-ingesting it)."""
        ...

    async def search(self, collection: str, request: SearchRequest) -> list[SearchHit]:
        """Search one tenant's chunks."""
        ...

    async def search_batch(
        self, collection: str, requests: Sequence[SearchRequest]
    ) -> list[list[SearchHit]]:
        """Run several searches in one engine call; one hit list per request, in order."""
        ...

    async def collection_info(self, collection: str) -> CollectionInfo:
        """Embedder, dimension and counts of a collection."""
        ...

    async def close(self) -> None:
        """Release the engine (flush to disk, close connections)."""
        ...
