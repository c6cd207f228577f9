"""What the two Qdrant adapters do the same way, whatever client they talk through.

:class:`~ragsift.retrieval.edge.EdgeIndex` (Qdrant Edge, in-process) and
:class:`~ragsift.retrieval.server.QdrantServerIndex` (a Qdrant server) build
their engine requests with different libraries, but check their callers, lay
out a point's vectors, plan a search and rank its answers with the functions
here, so both return the same hits for the same data and refuse the same input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from ragsift.errors import ConfigurationError
from ragsift.retrieval.bm25 import Bm25Encoder, SparseEncoding
from ragsift.retrieval.errors import CollectionLimitError
from ragsift.retrieval.records import (
    DENSE_VECTOR,
    SPARSE_VECTOR,
    ChunkRecord,
    SearchRequest,
    StoredCollection,
    check_embedder,
    dense_for_upsert,
    record_payload,
    require_tenant,
    validate_collection_name,
)
from ragsift.retrieval.search_plan import (
    RRF_K,
    HybridFusion,
    RankedAnswers,
    RawPoint,
    SearchPlan,
    plan_search,
    rank_answers,
)

__all__ = [
    "MAX_DOCUMENTS_LISTED",
    "MAX_TENANTS_IN_INFO",
    "UPSERT_BATCH",
    "check_bm25",
    "check_delete",
    "check_max_collections",
    "check_new_collection",
    "check_records",
    "check_room",
    "check_stored_embedder",
    "document_counts",
    "plan_for",
    "point_parts",
    "rank_batch",
    "record_batches",
    "tenant_counts",
]

#: Points per write: keeps a server request well under Qdrant's 32 MiB body limit
#: with 384-d vectors and chunk-sized text; on Qdrant Edge the event loop gets a
#: turn between batches.
UPSERT_BATCH = 256
#: Most tenants listed by ``collection_info`` (a facet over the keyword index).
MAX_TENANTS_IN_INFO = 1000
#: Most documents of one tenant ``documents`` lists (a facet over the doc id index):
#: at the limit the list may be cut, and :func:`document_counts` refuses it.
MAX_DOCUMENTS_LISTED = 1_000_000


class FacetHit(Protocol):
    """One value of a facet answer and how many points carry it (both clients' shape)."""

    @property
    def value(self) -> Any:
        """The payload value."""
        ...

    @property
    def count(self) -> int:
        """Points with that value."""
        ...


def check_new_collection(name: str, dim: int, embedder_id: str) -> None:
    """Refuse a collection name, dimension or embedder id that cannot make a collection."""
    validate_collection_name(name)
    if dim <= 0:
        raise ValueError(f"dim must be > 0, got {dim}")
    if not embedder_id:
        raise ValueError(f"embedder_id must be non-empty, got {embedder_id!r}")


def check_max_collections(limit: int | None) -> int | None:
    """An adapter's ``max_collections``: None (no cap) or at least 1."""
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise ValueError(f"max_collections must be >= 1, or None for no cap, got {limit!r}")
    return limit


def check_room(name: str, count: int, limit: int | None) -> None:
    """Refuse to create collection ``name`` where the index holds ``count`` and its cap
    is ``limit`` (None: no cap). Called only for a collection that does not exist yet:
    the ones that do keep taking documents at the cap (or past it, once it is lowered)."""
    if limit is not None and count >= limit:
        raise CollectionLimitError(collection=name, limit=limit, count=count)


def check_bm25(name: str, stored: StoredCollection, bm25: Bm25Encoder) -> None:
    """Refuse to use a collection whose keyword channel another BM25 encoding built."""
    if stored.bm25_id != bm25.encoder_id:
        raise ConfigurationError(
            f"collection {name!r} was indexed with BM25 encoding {stored.bm25_id!r}, "
            f"this index encodes with {bm25.encoder_id!r}"
        )


def check_stored_embedder(
    name: str, stored: StoredCollection, embedder_id: str | None, dim: int | None
) -> None:
    """Refuse an embedder other than the one that built collection ``name`` (``None``: unstated)."""
    check_embedder(
        name,
        stored_id=stored.embedder_id,
        stored_dim=stored.dim,
        embedder_id=embedder_id,
        dim=dim,
    )


def check_records(collection: str, records: Sequence[ChunkRecord]) -> None:
    """Refuse, before anything is written, a chunk that names another collection."""
    for record in records:
        if record.collection != collection:
            raise ValueError(
                f"chunk {record.chunk_id!r} belongs to collection {record.collection!r}, "
                f"not {collection!r}"
            )


def check_delete(tenant_id: str, doc_id: str) -> None:
    """Refuse a delete without a tenant (isolation) or without a document."""
    require_tenant(tenant_id)
    if not doc_id:
        raise ValueError(f"doc_id must be non-empty, got {doc_id!r}")


def record_batches(records: Sequence[ChunkRecord]) -> Iterator[Sequence[ChunkRecord]]:
    """``records`` in writes of at most :data:`UPSERT_BATCH` points, in order."""
    for start in range(0, len(records), UPSERT_BATCH):
        yield records[start : start + UPSERT_BATCH]


def point_parts(
    record: ChunkRecord,
    dim: int,
    bm25: Bm25Encoder,
    sparse_vector: Callable[[SparseEncoding], Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A chunk's named vectors and payload, its text BM25-encoded once.

    The vectors are the checked dense one and the BM25 one unless it is empty; the
    payload carries the BM25 term ids too (``TERMS_FIELD``). ``sparse_vector`` turns a
    BM25 encoding into the client library's sparse vector; the value type is ``Any``
    because each library types its point's vectors its own way.
    """
    vectors: dict[str, Any] = {DENSE_VECTOR: dense_for_upsert(record, dim)}
    sparse = bm25.encode_document(record.text)
    if not sparse.is_empty:
        vectors[SPARSE_VECTOR] = sparse_vector(sparse)
    return vectors, record_payload(record, sparse.indices)


def plan_for(
    name: str,
    stored: StoredCollection,
    request: SearchRequest,
    bm25: Bm25Encoder,
    hybrid_fusion: HybridFusion,
) -> SearchPlan:
    """The engine queries of ``request`` on collection ``name``, after checking its embedder."""
    check_stored_embedder(name, stored, request.embedder_id, None)
    sparse = bm25.encode_query(request.query) if request.mode != "dense" else None
    return plan_search(request, dim=stored.dim, sparse=sparse, hybrid_fusion=hybrid_fusion)


def rank_batch(
    plans: Sequence[SearchPlan], answers: Sequence[Sequence[RawPoint]]
) -> list[RankedAnswers]:
    """Each plan's answers ranked; ``answers`` holds every plan's queries' answers, in order."""
    ranked: list[RankedAnswers] = []
    cursor = 0
    for plan in plans:
        ranked.append(rank_answers(plan, answers[cursor : cursor + len(plan.queries)], k=RRF_K))
        cursor += len(plan.queries)
    return ranked


def document_counts(collection: str, tenant_id: str, hits: Sequence[FacetHit]) -> dict[str, int]:
    """Chunks per document from a facet over the doc id field within one tenant.

    Raises:
        ValueError: the facet reached :data:`MAX_DOCUMENTS_LISTED`: it may be cut.
    """
    if len(hits) >= MAX_DOCUMENTS_LISTED:
        raise ValueError(
            f"{collection}: tenant {tenant_id!r} has {MAX_DOCUMENTS_LISTED:,} documents or"
            " more: too many to list whole"
        )
    return tenant_counts(hits)


def tenant_counts(hits: Iterable[FacetHit]) -> dict[str, int]:
    """Chunks per tenant from a facet over the tenant field.

    Deleted points can leave a zero count in the facet: a tenant with no chunks is absent.
    """
    return {str(hit.value): hit.count for hit in hits if hit.count}
