"""The ``VectorIndex`` protocol, its data types, and the search plan both adapters share.

Two adapters implement the protocol: :class:`ragsift.retrieval.edge.EdgeIndex`
(Qdrant Edge, in-process, the embedded runtime) and
:class:`ragsift.retrieval.server.QdrantServerIndex` (a Qdrant server through
``qdrant_client.AsyncQdrantClient``). Each point is one chunk: a named dense
vector ``"dense"`` (cosine), a named sparse vector ``"bm25"`` (Qdrant's BM25
with the IDF modifier) and a payload holding the chunk's fields.

**Tenant isolation.** A :class:`SearchRequest` cannot be built without a
non-empty ``tenant_id``, and :func:`filter_conditions` — the only source of
payload conditions the adapters use — always begins with
``tenant_id == request.tenant_id`` and re-checks it.

**Hybrid search and per-channel scores.** The confidence engine needs each
hit's raw cosine and BM25 scores next to the fused RRF score. A hybrid search
therefore runs the two channel queries (dense top-``prefetch_limit``, sparse
top-``prefetch_limit``, both tenant-filtered, without payload) as *one*
``query_batch`` call, fuses them here with Qdrant's own RRF formula
(``sum 1 / (k + rank)``, rank from 0, ``k = 2`` as Qdrant's default), then
fetches the payload of the ``limit`` winners only. Every hit so carries
``fused_score``, ``dense_score``/``dense_rank`` when the dense channel
returned it and ``sparse_score``/``sparse_rank`` when BM25 did.
Measured on Qdrant Edge by ``bench/engine.py`` (10,000 × 384-d, tenant
filter, Zipf-distributed BM25 terms, after optimize, 2 cores), queries/s one
at a time / in batches of 32: fused query alone (no channel scores)
2,200 / -; dense + sparse + Qdrant-fused query in one batch, joined by id,
1,450 / 1,760; dense + sparse in one batch, fused here, payload of the
winners, 1,310 / 1,630. The two ways of getting channel scores cost about
the same on Edge (on uniform vocabularies fusing here was twice as fast);
fusing here is the default (``hybrid_fusion="client"``) because it breaks
ties deterministically (score, then id) where Qdrant orders tied points by
internal iteration order, so both adapters — and two runs of one — return
the same hits in the same order. Against a remote server it costs one extra
round trip (the payload fetch); ``hybrid_fusion="qdrant"`` runs Qdrant's
``Fusion.Rrf`` prefetch query in the same batch instead and needs none.

**Point ids** are UUIDv5 of (tenant, collection, chunk id) in a fixed
namespace: re-ingesting a chunk overwrites it instead of duplicating it, and
two tenants' chunks never share a point even when their document ids are the
same (chunk ids are ``<doc_id>:<n>`` and tenants choose their doc ids).
Before issue 12 the id was UUIDv5 of the chunk id alone; see ADR 004 for what
that means for shards written then.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, TypeAlias, runtime_checkable

import numpy as np
import numpy.typing as npt

from ragsift.errors import ConfigurationError
from ragsift.retrieval.bm25 import SparseEncoding
from ragsift.retrieval.errors import (
    DimensionMismatchError,
    EmbedderMismatchError,
    MissingTenantError,
    TenantIsolationError,
)
from ragsift.schemas.base import tenant_scoped

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_PREFETCH_LIMIT",
    "DENSE_VECTOR",
    "RRF_K",
    "SPARSE_VECTOR",
    "TENANT_FIELD",
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
    "VectorIndex",
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

SearchMode: TypeAlias = Literal["hybrid", "dense", "keyword"]
HybridFusion: TypeAlias = Literal["client", "qdrant"]
PayloadValue: TypeAlias = str | int | bool | Sequence[str] | Sequence[int]
Vector: TypeAlias = Sequence[float] | npt.NDArray[np.floating[Any]]
#: A point id as an adapter ranks it: the UUID string from a Qdrant server, the
#: UUID's 128-bit integer from Qdrant Edge. A UUID's integer orders like its
#: canonical string, so ties broken by either break the same way. Edge keeps
#: integers: formatting every candidate's id as a string, or hashing UUID
#: objects, cost more than the fusion itself.
PointKey: TypeAlias = str | int

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "bm25"
TENANT_FIELD = "tenant_id"
DOC_FIELD = "doc_id"
#: Payload keys the index writes itself; a record's metadata cannot shadow them.
RESERVED_FIELDS = frozenset(
    {"chunk_id", TENANT_FIELD, "collection", DOC_FIELD, "text", "source", "source_type"}
)
DEFAULT_LIMIT = 10
#: Candidates per channel before fusion; 5x the default limit, as in Qdrant's hybrid examples.
DEFAULT_PREFETCH_LIMIT = 50
#: Qdrant's default RRF constant (``FusionQuery(fusion=RRF)`` uses 2, not the paper's 60).
RRF_K = 2
#: Fixed namespace of the UUIDv5 point ids; changing it re-keys every index.
POINT_ID_NAMESPACE = uuid.UUID("6f0f4a8e-7c1e-5b8a-9d3c-2a1b0c9d8e7f")
_COLLECTION_NAME_MAX = 64


def point_id(record: ChunkRecord) -> str:
    """The deterministic Qdrant point id of a chunk, unique per (tenant, collection, chunk).

    The tenant and collection are part of the name because chunk ids are only
    unique within a tenant: without them one tenant's upsert overwrote another
    tenant's chunk of the same document id (issue 12).
    """
    scoped = tenant_scoped(record.tenant_id, f"{record.collection}/{record.chunk_id}")
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
    if not isinstance(tenant_id, str) or not tenant_id.strip():
        raise MissingTenantError(tenant_id)
    return tenant_id


def _as_vector(vector: Vector, context: str) -> npt.NDArray[np.float32]:
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

    def __post_init__(self) -> None:
        require_tenant(self.tenant_id)
        for name in ("chunk_id", "doc_id", "collection"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        if self.metadata:
            clash = RESERVED_FIELDS.intersection(self.metadata)
            if clash:
                raise ValueError(f"metadata may not use reserved payload keys: {sorted(clash)}")


def record_payload(record: ChunkRecord) -> dict[str, Any]:
    """The payload stored with a chunk's point."""
    payload: dict[str, Any] = dict(record.metadata or {})
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
    array = _as_vector(record.vector, f"vector of chunk {record.chunk_id!r}")
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


# ---------------------------------------------------------------------------
# The search plan: engine-neutral channel queries, translated by each adapter.
# ---------------------------------------------------------------------------

ChannelKind: TypeAlias = Literal["dense", "sparse", "fused"]


@dataclass(frozen=True, slots=True)
class ChannelQuery:
    """One engine query of a plan.

    ``fused`` queries prefetch ``prefetch_limit`` candidates from each channel
    whose vector is set and fuse them with Qdrant's RRF (only with
    ``hybrid_fusion="qdrant"``).
    """

    kind: ChannelKind
    limit: int
    with_payload: bool
    dense: list[float] | None = None
    sparse: SparseEncoding | None = None
    prefetch_limit: int = 0


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """The engine queries of one search and how to turn their answers into hits."""

    request: SearchRequest
    queries: tuple[ChannelQuery, ...]
    conditions: tuple[tuple[str, PayloadValue], ...]
    fetch_payload: bool
    """True when the channel queries carry no payload: fetch the winners' payload afterwards."""


class RawPoint(NamedTuple):
    """An engine answer row: id, score, payload if asked (a tuple: thousands per batch)."""

    id: PointKey
    score: float
    payload: Mapping[str, Any] | None = None


def plan_search(
    request: SearchRequest,
    *,
    dim: int,
    sparse: SparseEncoding | None,
    hybrid_fusion: HybridFusion = "client",
) -> SearchPlan:
    """Decide the engine queries of a search.

    Args:
        dim: the collection's dense dimension; the query vector must match.
        sparse: the BM25 encoding of ``request.query`` (``None`` or empty: no
            keyword channel, e.g. a query of stopwords only).
        hybrid_fusion: ``client`` (fuse here) or ``qdrant`` (Qdrant's ``Fusion.Rrf``).
    """
    conditions = tuple(filter_conditions(request))
    dense: list[float] | None = None
    if request.mode != "keyword" and request.dense_vector is not None:
        array = _as_vector(request.dense_vector, "query vector")
        if array.shape[0] != dim:
            raise DimensionMismatchError(
                expected=dim, actual=int(array.shape[0]), context="query vector"
            )
        dense = array.tolist()
    has_sparse = sparse is not None and not sparse.is_empty
    queries: list[ChannelQuery] = []
    if request.mode == "dense":
        queries.append(ChannelQuery("dense", request.limit, True, dense=dense))
    elif request.mode == "keyword":
        if has_sparse:
            queries.append(ChannelQuery("sparse", request.limit, True, sparse=sparse))
    else:
        queries.append(ChannelQuery("dense", request.prefetch_limit, False, dense=dense))
        if has_sparse:
            queries.append(ChannelQuery("sparse", request.prefetch_limit, False, sparse=sparse))
        if hybrid_fusion == "qdrant" and request.dense_cut is None:
            queries.append(
                ChannelQuery(
                    "fused",
                    request.limit,
                    True,
                    dense=dense,
                    sparse=sparse if has_sparse else None,
                    prefetch_limit=request.prefetch_limit,
                )
            )
    # An E3 cut applies between the dense channel and fusion: only client fusion has one.
    client = hybrid_fusion == "client" or request.dense_cut is not None
    fetch = request.mode == "hybrid" and client
    return SearchPlan(request, tuple(queries), conditions, fetch_payload=fetch)


def _rank_key(point: RawPoint) -> tuple[float, PointKey]:
    return -point.score, point.id


def _canonical(points: Sequence[RawPoint]) -> list[RawPoint]:
    # Engines order tied scores arbitrarily; score then id makes ranks reproducible.
    return sorted(points, key=_rank_key)


def rrf_fuse(
    channels: Sequence[Sequence[RawPoint]], *, k: int = RRF_K
) -> list[tuple[PointKey, float]]:
    """Reciprocal rank fusion exactly as Qdrant computes it: ``sum 1 / (k + rank)``, rank from 0.

    Returns ``(id, fused score)`` best first, ties broken by id.
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    scores: dict[PointKey, float] = {}
    for channel in channels:
        for rank, point in enumerate(channel):
            scores[point.id] = scores.get(point.id, 0.0) + 1.0 / (k + rank)
    # Sorting (-score, id) tuples compares natively, without a key function per item.
    ranked = sorted([(-score, pid) for pid, score in scores.items()])
    return [(pid, -negated) for negated, pid in ranked]


def cut_dense(points: Sequence[RawPoint], cut: DenseCut) -> list[RawPoint]:
    """The dense candidates an E3 cut keeps (``points`` best first; see :class:`DenseCut`)."""
    kept: list[RawPoint] = []
    total = 0.0
    for point in points:
        if point.score < cut.floor:
            break  # best first: every later candidate is under the floor too
        kept.append(point)
        total += point.score
        n = len(kept)
        if (total / n >= cut.threshold and n >= cut.min_k) or n >= cut.max_k:
            break
    return kept


@dataclass(frozen=True, slots=True)
class RankedAnswers:
    """The engine answers of one plan, each channel in canonical order.

    Attributes:
        by_kind: each channel's points, best first, ties broken by id.
        winners: ``(id, fused score)`` of the ``limit`` best hits of a client-fused
            hybrid search (their payload is fetched afterwards); empty otherwise.
    """

    plan: SearchPlan
    by_kind: Mapping[ChannelKind, list[RawPoint]]
    winners: list[tuple[PointKey, float]]

    @property
    def payload_ids(self) -> list[PointKey]:
        """The ids whose payload must be fetched before :func:`assemble_hits`."""
        return [pid for pid, _ in self.winners]


def rank_answers(
    plan: SearchPlan, results: Sequence[Sequence[RawPoint]], *, k: int = RRF_K
) -> RankedAnswers:
    """Order a plan's engine answers (one list per ``plan.queries``), fusing them if it says so.

    Args:
        k: the RRF constant of client-side fusion.
    """
    if len(results) != len(plan.queries):
        raise ValueError(f"plan has {len(plan.queries)} queries, got {len(results)} answers")
    by_kind = {q.kind: _canonical(r) for q, r in zip(plan.queries, results, strict=True)}
    winners: list[tuple[PointKey, float]] = []
    if plan.fetch_payload:
        cut = plan.request.dense_cut
        channels = [
            cut_dense(by_kind[kind], cut) if kind == "dense" and cut is not None else by_kind[kind]
            for kind in ("dense", "sparse")
            if kind in by_kind
        ]
        winners = rrf_fuse(channels, k=k)[: plan.request.limit]
    return RankedAnswers(plan, by_kind, winners)


def _hit(
    payload: Mapping[str, Any],
    *,
    score: float,
    rank: int,
    dense: tuple[float, int] | None,
    sparse: tuple[float, int] | None,
    fused: float | None,
    tenant_id: str,
) -> SearchHit:
    if payload.get(TENANT_FIELD) != tenant_id:
        # The engine filter makes this impossible; fail loudly rather than leak or hide it.
        raise TenantIsolationError(expected=tenant_id, actual=str(payload.get(TENANT_FIELD)))
    return SearchHit(
        chunk_id=str(payload.get("chunk_id", "")),
        doc_id=str(payload.get(DOC_FIELD, "")),
        tenant_id=str(payload.get(TENANT_FIELD, "")),
        text=str(payload.get("text", "")),
        source=str(payload.get("source", "")),
        source_type=str(payload.get("source_type", "")),
        score=score,
        rank=rank,
        dense_score=dense[0] if dense else None,
        dense_rank=dense[1] if dense else None,
        sparse_score=sparse[0] if sparse else None,
        sparse_rank=sparse[1] if sparse else None,
        fused_score=fused,
        payload=dict(payload),
    )


def _channel_ranks(points: Sequence[RawPoint]) -> dict[PointKey, tuple[float, int]]:
    return {p.id: (p.score, rank) for rank, p in enumerate(points, 1)}


def assemble_hits(
    ranked: RankedAnswers, payloads: Mapping[PointKey, Mapping[str, Any]] | None = None
) -> list[SearchHit]:
    """Turn a plan's ranked engine answers into hits.

    Args:
        payloads: id -> payload of ``ranked.payload_ids``, for a client-fused hybrid plan.
    """
    plan, by_kind = ranked.plan, ranked.by_kind
    dense_of = _channel_ranks(by_kind.get("dense", []))
    sparse_of = _channel_ranks(by_kind.get("sparse", []))
    mode = plan.request.mode
    hits: list[SearchHit] = []
    if mode == "hybrid":
        rows: list[tuple[PointKey, float, Mapping[str, Any] | None]]
        if plan.fetch_payload:
            found = payloads or {}
            rows = [(pid, score, found.get(pid)) for pid, score in ranked.winners]
        else:
            rows = [(p.id, p.score, p.payload) for p in by_kind.get("fused", [])]
        for pid, score, payload in rows:
            if payload is None:  # deleted between the two calls: skip, never invent
                continue
            hits.append(
                _hit(
                    payload,
                    score=score,
                    rank=len(hits) + 1,
                    dense=dense_of.get(pid),
                    sparse=sparse_of.get(pid),
                    fused=score,
                    tenant_id=plan.request.tenant_id,
                )
            )
        return hits
    channel = by_kind.get("dense" if mode == "dense" else "sparse", [])
    for point in channel[: plan.request.limit]:
        if point.payload is None:
            continue
        rank = len(hits) + 1
        own = (point.score, rank)
        hits.append(
            _hit(
                point.payload,
                score=point.score,
                rank=rank,
                dense=own if mode == "dense" else None,
                sparse=own if mode == "keyword" else None,
                fused=None,
                tenant_id=plan.request.tenant_id,
            )
        )
    return hits
