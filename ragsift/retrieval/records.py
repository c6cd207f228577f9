"""The records a :class:`~ragsift.retrieval.index.VectorIndex` stores and answers with.

Chunks to index (:class:`ChunkRecord`), searches (:class:`SearchRequest`,
:class:`DenseCut`), hits (:class:`SearchHit`) and what a collection holds
(:class:`CollectionInfo`, :class:`StoredCollection`), with the checks both
Qdrant adapters apply to them. Each point is one chunk: a named dense vector
``"dense"`` (cosine), a named sparse vector ``"bm25"`` (Qdrant's BM25 with the
IDF modifier) and a payload holding the chunk's fields.

**Tenant isolation.** A :class:`SearchRequest` cannot be built without a
non-empty ``tenant_id``, and :func:`filter_conditions` — the only source of
payload conditions the adapters use — always begins with
``tenant_id == request.tenant_id`` and re-checks it.

**Point ids** are UUIDv5 of (tenant, collection, chunk id) in a fixed
namespace: re-ingesting a chunk overwrites it instead of duplicating it, and
two tenants' chunks never share a point even when their document ids are the
same (chunk ids are ``<doc_id>:<n>`` and tenants choose their doc ids).
Before issue 12 the id was UUIDv5 of the chunk id alone; see ADR 004 for what
that means for shards written then.

**Why one module.** It is the index layer's vocabulary: every type here is
data plus the checks that keep it valid, and both adapters, the search plan
and the pipeline read all of it. Split by type, the payload layout (its field
names, the reserved keys, what :meth:`SearchHit.indexed_terms` reads back) would
sit in one file and the records that write it in another.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from ragsift.errors import ConfigurationError
from ragsift.retrieval.errors import (
    DimensionMismatchError,
    EmbedderMismatchError,
    MissingTenantError,
)
from ragsift.schemas.base import tenant_scoped
from ragsift.schemas.payload import metadata_problem

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_PREFETCH_LIMIT",
    "DENSE_VECTOR",
    "DOC_FIELD",
    "FINGERPRINT_FIELD",
    "METADATA_FORMAT",
    "POINT_ID_NAMESPACE",
    "RESERVED_FIELDS",
    "SPARSE_VECTOR",
    "TENANT_FIELD",
    "TERMS_FIELD",
    "ChunkRecord",
    "CollectionInfo",
    "DenseCut",
    "PayloadValue",
    "SearchHit",
    "SearchMode",
    "SearchRequest",
    "StoredCollection",
    "Vector",
    "as_vector",
    "check_embedder",
    "chunk_point_id",
    "dense_for_upsert",
    "filter_conditions",
    "metadata_error",
    "point_id",
    "record_payload",
    "require_tenant",
    "validate_collection_name",
]

SearchMode: TypeAlias = Literal["hybrid", "dense", "keyword"]
PayloadValue: TypeAlias = str | int | bool | Sequence[str] | Sequence[int]
Vector: TypeAlias = Sequence[float] | npt.NDArray[np.floating[Any]]

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "bm25"
TENANT_FIELD = "tenant_id"
DOC_FIELD = "doc_id"
#: The chunk's distinct BM25 term ids, as its sparse vector indexes them: term coverage
#: (ADR 020) reads them from the payload instead of tokenizing the text at query time.
TERMS_FIELD = "bm25_terms"
#: What the chunk's document was when it was written (text, metadata, chunking,
#: embedder): an ingest leaves a document alone whose fingerprint has not moved.
FINGERPRINT_FIELD = "doc_fingerprint"
#: Payload keys the index writes itself; a record's metadata cannot shadow them.
RESERVED_FIELDS = frozenset(
    {
        *("chunk_id", TENANT_FIELD, "collection", DOC_FIELD, "text", "source", "source_type"),
        TERMS_FIELD,
        FINGERPRINT_FIELD,
    }
)
DEFAULT_LIMIT = 10
#: Candidates per channel before fusion; 5x the default limit, as in Qdrant's hybrid examples.
DEFAULT_PREFETCH_LIMIT = 50
#: Fixed namespace of the UUIDv5 point ids; changing it re-keys every index.
POINT_ID_NAMESPACE = uuid.UUID("6f0f4a8e-7c1e-5b8a-9d3c-2a1b0c9d8e7f")
_COLLECTION_NAME_MAX = 64


def point_id(record: ChunkRecord) -> str:
    """The deterministic Qdrant point id of a chunk, unique per (tenant, collection, chunk).

    The tenant and collection are part of the name because chunk ids are only
    unique within a tenant: without them one tenant's upsert overwrote another
    tenant's chunk of the same document id (issue 12).
    """
    return chunk_point_id(record.tenant_id, record.collection, record.chunk_id)


def chunk_point_id(tenant_id: str, collection: str, chunk_id: str) -> str:
    """:func:`point_id` of the chunk ``chunk_id`` of a tenant's collection."""
    scoped = tenant_scoped(tenant_id, f"{collection}/{chunk_id}")
    return str(uuid.uuid5(POINT_ID_NAMESPACE, scoped))


def validate_collection_name(name: str) -> str:
    """Return ``name`` if it is 1-64 characters of letters, digits, ``_`` and ``-``.

    The same rule in both adapters keeps a collection portable between them,
    and keeps Qdrant Edge's per-collection directory inside its root.
    """
    ok = (
        isinstance(name, str)
        and 0 < len(name) <= _COLLECTION_NAME_MAX
        and all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    )
    if not ok:
        raise ValueError(
            f"collection name must be 1-{_COLLECTION_NAME_MAX} ASCII letters, digits, "
            f"'_' or '-', got {name!r}"
        )
    return name


def require_tenant(tenant_id: object) -> str:
    """Return ``tenant_id`` if it is a non-blank string; anything else is a missing tenant."""
    if not isinstance(tenant_id, str) or not tenant_id.strip():
        raise MissingTenantError(tenant_id)
    return tenant_id


def as_vector(vector: Vector, context: str) -> npt.NDArray[np.float32]:
    """``vector`` as a finite, non-empty 1-d float32 array; ``context`` names it in errors."""
    array = np.asarray(vector, dtype=np.float32)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{context} must be a non-empty 1-d vector, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{context} contains NaN or infinite values")
    return array


def check_embedder(
    collection: str, *, stored_id: str, stored_dim: int, embedder_id: str | None, dim: int | None
) -> None:
    """Refuse an embedder (id or dimension) other than the one a collection was built with.

    ``None`` means "not stated" and is not checked.
    """
    if embedder_id is not None and embedder_id != stored_id:
        raise EmbedderMismatchError(
            expected=stored_id, actual=embedder_id, collection=collection, stored=True
        )
    if dim is not None and dim != stored_dim:
        raise DimensionMismatchError(
            expected=stored_dim, actual=dim, context=f"embedder for collection {collection!r}"
        )


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """One chunk to index.

    Attributes:
        chunk_id: stable id of the chunk within its tenant (its point id is derived
            from tenant, collection and chunk id).
        tenant_id: owner; every search is filtered on it.
        collection: the collection it belongs to.
        doc_id: the source document, for re-ingestion (``VectorIndex.delete``).
        text: the chunk's text, BM25-encoded by the index and returned in hits.
        source: provenance (URL, path) for citations.
        source_type: kind of source (``government``, ``regulatory``...).
        vector: the dense embedding.
        metadata: extra JSON-serializable payload; may not use reserved keys.
        fingerprint: its document's fingerprint (:data:`FINGERPRINT_FIELD`), if any.
    """

    chunk_id: str
    tenant_id: str
    collection: str
    doc_id: str
    text: str
    source: str
    source_type: str
    vector: Vector
    metadata: Mapping[str, Any] | None = None
    fingerprint: str | None = None

    def __post_init__(self) -> None:
        require_tenant(self.tenant_id)
        for name in ("chunk_id", "doc_id", "collection"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        for name in ("text", "source"):  # stored as they are: nothing else may nest there
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string, got {type(getattr(self, name))}")
        problem = metadata_error(self.metadata or {})
        if problem is not None:  # the last check before the write-ahead log
            raise ValueError(f"metadata of chunk {self.chunk_id!r} {problem}")


def metadata_error(metadata: Mapping[str, Any]) -> str | None:
    """Why a document's ``metadata`` cannot go into its chunks' payloads, or None.

    A reserved key would shadow a field the index writes; anything else is what
    :func:`~ragsift.schemas.payload.metadata_problem` refuses (nesting the shard could
    not read back, NaN, lone surrogates).
    """
    clash = RESERVED_FIELDS.intersection(metadata)
    if clash:
        return f"may not use reserved payload keys: {sorted(clash)}"
    return metadata_problem(metadata)


def record_payload(record: ChunkRecord, terms: Sequence[int] = ()) -> dict[str, Any]:
    """The payload stored with a chunk's point; ``terms``: its BM25 term ids, if any."""
    payload: dict[str, Any] = dict(record.metadata or {})
    if terms:
        payload[TERMS_FIELD] = list(terms)
    if record.fingerprint:
        payload[FINGERPRINT_FIELD] = record.fingerprint
    payload.update(
        chunk_id=record.chunk_id,
        tenant_id=record.tenant_id,
        collection=record.collection,
        doc_id=record.doc_id,
        text=record.text,
        source=record.source,
        source_type=record.source_type,
    )
    return payload


def dense_for_upsert(record: ChunkRecord, dim: int) -> list[float]:
    """The record's vector as floats, after checking it has the collection's dimension."""
    array = as_vector(record.vector, f"vector of chunk {record.chunk_id!r}")
    if array.shape[0] != dim:
        raise DimensionMismatchError(
            expected=dim, actual=int(array.shape[0]), context=f"chunk {record.chunk_id!r}"
        )
    values: list[float] = array.tolist()
    return values


@dataclass(frozen=True, slots=True)
class DenseCut:
    """E3: adaptive k in the dense step of a hybrid search, before fusion (seed E).

    Over the dense candidates, best first: drop those under ``floor``; keep
    adding until the mean similarity of those kept reaches ``threshold`` with at
    least ``min_k`` kept, or ``max_k`` are kept. Fusion is unchanged. Seed E's
    entity coverage needs the hits' text, which the dense step does not load:
    the cut uses similarity alone, and coverage stays with the confidence engine.
    """

    floor: float
    threshold: float
    min_k: int
    max_k: int

    def __post_init__(self) -> None:
        for name in ("floor", "threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 1 <= self.min_k <= self.max_k:
            raise ValueError(f"need 1 <= min_k <= max_k, got {self.min_k} and {self.max_k}")


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One search, always scoped to a tenant.

    Attributes:
        tenant_id: mandatory; only this tenant's chunks can be returned.
        query: the query text (BM25 channel; required for ``keyword``).
        dense_vector: the query embedding (required for ``dense`` and ``hybrid``).
        mode: ``hybrid`` (dense + BM25, RRF-fused), ``dense`` or ``keyword``.
        limit: hits to return, ``> 0``.
        prefetch_limit: candidates per channel before fusion, ``>= limit``.
        filter: extra exact-match payload conditions (value, or list = any of);
            they narrow the tenant filter, they cannot replace it.
        embedder_id: the embedder that produced ``dense_vector``; when given,
            the index refuses it unless it matches the collection's embedder.
        dense_cut: E3 adaptive k of the dense channel before fusion (hybrid only);
            it makes the fusion client-side.
    """

    tenant_id: str
    query: str = ""
    dense_vector: Vector | None = None
    mode: SearchMode = "hybrid"
    limit: int = DEFAULT_LIMIT
    prefetch_limit: int = DEFAULT_PREFETCH_LIMIT
    filter: Mapping[str, PayloadValue] | None = None
    embedder_id: str | None = None
    dense_cut: DenseCut | None = None

    def __post_init__(self) -> None:
        require_tenant(self.tenant_id)
        if self.mode not in ("hybrid", "dense", "keyword"):
            raise ValueError(f"mode must be hybrid, dense or keyword, got {self.mode!r}")
        if self.limit <= 0:
            raise ValueError(f"limit must be > 0, got {self.limit}")
        if self.prefetch_limit < self.limit:
            raise ValueError(
                f"prefetch_limit must be >= limit ({self.limit}), got {self.prefetch_limit}"
            )
        if self.mode in ("hybrid", "dense") and self.dense_vector is None:
            raise ValueError(f"mode {self.mode!r} needs a dense_vector")
        if self.mode == "keyword" and not self.query.strip():
            raise ValueError("mode 'keyword' needs a non-empty query")
        for key, value in (self.filter or {}).items():
            if key == TENANT_FIELD:
                raise ValueError("filter may not mention tenant_id; set SearchRequest.tenant_id")
            if isinstance(value, str | int | bool):
                continue
            items = list(value)
            if not items or not (
                all(isinstance(v, str) for v in items) or all(isinstance(v, int) for v in items)
            ):
                raise ValueError(
                    f"filter {key!r} must be a value or a non-empty list of all str or all int, "
                    f"got {value!r}"
                )


def filter_conditions(request: SearchRequest) -> list[tuple[str, PayloadValue]]:
    """Every payload condition of a search, the tenant condition first and always."""
    conditions: list[tuple[str, PayloadValue]] = [(TENANT_FIELD, require_tenant(request.tenant_id))]
    for key, value in (request.filter or {}).items():
        if key == TENANT_FIELD:
            raise ValueError("filter may not mention tenant_id; set SearchRequest.tenant_id")
        conditions.append((key, value))
    return conditions


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One retrieved chunk with its scores.

    Attributes:
        score: the score the ranking used: RRF (hybrid), cosine (dense) or BM25 (keyword).
        dense_score: cosine similarity, when the dense channel returned the chunk.
        sparse_score: BM25 score (IDF applied), when the keyword channel returned it.
        fused_score: RRF score (hybrid only).
        rank: position in the result, from 1.
        dense_rank, sparse_rank: position in each channel's candidates, from 1.
        rerank_score: cross-encoder logit, when a reranker scored the chunk.
        payload: the full stored payload (chunk fields and metadata).
        collection: the collection searched, set by a multi-collection query (D3).
    """

    chunk_id: str
    doc_id: str
    tenant_id: str
    text: str
    source: str
    source_type: str
    score: float
    rank: int
    dense_score: float | None = None
    sparse_score: float | None = None
    fused_score: float | None = None
    dense_rank: int | None = None
    sparse_rank: int | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)
    rerank_score: float | None = None
    collection: str | None = None

    def indexed_terms(self) -> frozenset[int] | None:
        """The chunk's BM25 term ids as ingested (:data:`TERMS_FIELD`); None when the
        point was written without them (before they were stored) or not as a list of ints.

        Only the first id's type is checked: ragsift writes the field (metadata cannot
        shadow it), and a per-id check cost twice the set itself on every hit. A later
        element of another type matches no query term; one that cannot be hashed (a
        point written by another tool) reads as None rather than failing the query.
        """
        terms = self.payload.get(TERMS_FIELD)
        if not isinstance(terms, list) or (terms and type(terms[0]) is not int):
            return None
        try:
            return frozenset(terms)
        except TypeError:  # an unhashable element past the first: free to catch when absent
            return None


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """What a collection holds and which embedder built it.

    Attributes:
        tenants: chunk count per tenant (from the keyword index's facet), when cheap.
    """

    name: str
    embedder_id: str
    dim: int
    points_count: int
    tenants: Mapping[str, int] | None = None


#: Version of the stored collection metadata (sidecar file / Qdrant collection metadata).
METADATA_FORMAT = 1


@dataclass(frozen=True, slots=True)
class StoredCollection:
    """What an adapter stores beside a collection so a reopened index can check its callers.

    Attributes:
        embedder_id: the embedder whose vectors fill the dense channel.
        dim: their dimension.
        bm25_id: the BM25 encoding of the sparse channel (``Bm25Encoder.encoder_id``).
    """

    embedder_id: str
    dim: int
    bm25_id: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form, tagged with the ragsift metadata format."""
        return {
            "ragsift_format": METADATA_FORMAT,
            "embedder_id": self.embedder_id,
            "dim": self.dim,
            "bm25": self.bm25_id,
        }

    @classmethod
    def from_dict(cls, collection: str, raw: Mapping[str, Any] | None) -> StoredCollection:
        """Parse :meth:`to_dict` output; a missing or foreign record is a configuration error."""
        if not raw or raw.get("ragsift_format") != METADATA_FORMAT:
            raise ConfigurationError(
                f"collection {collection!r} has no ragsift metadata (format {METADATA_FORMAT}); "
                f"it was not created by ragsift, or by an incompatible version: {raw!r}"
            )
        try:
            return cls(str(raw["embedder_id"]), int(raw["dim"]), str(raw["bm25"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"collection {collection!r} has malformed ragsift metadata {raw!r}: {exc}"
            ) from exc
