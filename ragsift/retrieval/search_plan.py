"""The search plan both Qdrant adapters share: channel queries, RRF fusion, hit assembly.

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

The plan is engine-neutral: each adapter translates its :class:`ChannelQuery`
list into its own client's requests (``ragsift.retrieval.qdrant_common`` holds
the adapter-side steps they share around it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import gt
from typing import Any, Literal, NamedTuple, TypeAlias

from ragsift.retrieval.bm25 import SparseEncoding
from ragsift.retrieval.errors import DimensionMismatchError, TenantIsolationError
from ragsift.retrieval.records import (
    DOC_FIELD,
    TENANT_FIELD,
    DenseCut,
    PayloadValue,
    SearchHit,
    SearchRequest,
    as_vector,
    filter_conditions,
)

__all__ = [
    "RRF_K",
    "ChannelKind",
    "ChannelQuery",
    "HybridFusion",
    "PointKey",
    "RankedAnswers",
    "RawPoint",
    "SearchPlan",
    "assemble_hits",
    "cut_dense",
    "plan_search",
    "rank_answers",
    "rrf_fuse",
]

HybridFusion: TypeAlias = Literal["client", "qdrant"]
#: A point id as an adapter ranks it: the UUID string from a Qdrant server, the
#: UUID's 128-bit integer from Qdrant Edge. A UUID's integer orders like its
#: canonical string, so ties broken by either break the same way. Edge keeps
#: integers: formatting every candidate's id as a string, or hashing UUID
#: objects, cost more than the fusion itself.
PointKey: TypeAlias = str | int

#: Qdrant's default RRF constant (``FusionQuery(fusion=RRF)`` uses 2, not the paper's 60).
RRF_K = 2

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
        array = as_vector(request.dense_vector, "query vector")
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
    scores = [point.score for point in points]
    if all(map(gt, scores, scores[1:])):
        # Strictly best first (no ties), as engines answer almost always: already
        # canonical, and checking in C costs a tenth of sorting with a key per point.
        return list(points)
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
