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

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

# Star imports on purpose: each module's ``__all__`` is the one list of what it
# publishes, so the re-export cannot drift from it (``test_index_modules`` checks).
from ragsift.retrieval import records, search_plan
from ragsift.retrieval.records import *  # noqa: F403
from ragsift.retrieval.records import ChunkRecord, CollectionInfo, SearchHit, SearchRequest
from ragsift.retrieval.search_plan import *  # noqa: F403

__all__ = ["VectorIndex", *records.__all__, *search_plan.__all__]


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

    async def delete(self, collection: str, tenant_id: str, doc_id: str) -> int:
        """Delete every chunk of one tenant's document (before re-ingesting it); how many
        it removed (0: the tenant had none, and nothing indexed changed)."""
        ...

    async def documents(self, collection: str, tenant_id: str) -> dict[str, int]:
        """One tenant's document ids and their chunk counts (``ingest --prune``).

        Raises:
            MissingTenantError: no tenant.
            ValueError: more documents than can be listed whole.
        """
        ...

    async def chunk_payloads(
        self, collection: str, tenant_id: str, chunk_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        """The stored payloads of a tenant's chunks by chunk id; one not stored is absent."""
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
