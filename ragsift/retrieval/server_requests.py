"""How ragsift's requests are written in qdrant-client's terms, and its answers read back.

Filters from (field, value) conditions, a channel query (dense, sparse, or both
fused by RRF) as a ``QueryRequest``, scored points as ``RawPoint``s.
:mod:`ragsift.retrieval.server` is the index that uses them, as
:mod:`ragsift.retrieval.edge` uses :mod:`ragsift.retrieval.edge_requests`.
"""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_client import models

from ragsift.retrieval.bm25 import SparseEncoding
from ragsift.retrieval.records import DENSE_VECTOR, SPARSE_VECTOR, PayloadValue
from ragsift.retrieval.search_plan import ChannelQuery, RawPoint

__all__ = ["raw_points", "server_filter", "server_sparse", "to_request"]


def _match(value: PayloadValue) -> models.MatchValue | models.MatchAny:
    if isinstance(value, str | int | bool):
        return models.MatchValue(value=value)
    return models.MatchAny(any=list(value))


def server_filter(conditions: Sequence[tuple[str, PayloadValue]]) -> models.Filter:
    """A filter every one of whose (field, value) conditions must match."""
    return models.Filter(
        must=[models.FieldCondition(key=key, match=_match(value)) for key, value in conditions]
    )


def server_sparse(encoding: SparseEncoding | None) -> models.SparseVector:
    """A BM25 encoding as the client's sparse vector."""
    assert encoding is not None  # plan_search sets it for sparse channels
    return models.SparseVector(indices=list(encoding.indices), values=list(encoding.values))


def to_request(query: ChannelQuery, flt: models.Filter) -> models.QueryRequest:
    """One channel query (dense, sparse, or both fused by RRF) under ``flt``."""
    if query.kind == "dense":
        return models.QueryRequest(
            query=query.dense,
            using=DENSE_VECTOR,
            filter=flt,
            limit=query.limit,
            with_payload=query.with_payload,
        )
    if query.kind == "sparse":
        return models.QueryRequest(
            query=server_sparse(query.sparse),
            using=SPARSE_VECTOR,
            filter=flt,
            limit=query.limit,
            with_payload=query.with_payload,
        )
    prefetch = []
    if query.dense is not None:
        prefetch.append(
            models.Prefetch(
                query=query.dense, using=DENSE_VECTOR, filter=flt, limit=query.prefetch_limit
            )
        )
    if query.sparse is not None:
        prefetch.append(
            models.Prefetch(
                query=server_sparse(query.sparse),
                using=SPARSE_VECTOR,
                filter=flt,
                limit=query.prefetch_limit,
            )
        )
    return models.QueryRequest(
        prefetch=prefetch,
        # Plain RRF is Qdrant's k = 2 (RRF_K) and works on every server with the Query API.
        query=models.FusionQuery(fusion=models.Fusion.RRF),
        filter=flt,
        limit=query.limit,
        with_payload=query.with_payload,
    )


def raw_points(points: Sequence[models.ScoredPoint]) -> list[RawPoint]:
    """Scored points as the search plan ranks them, keyed by their id's text."""
    return [RawPoint(str(p.id), float(p.score), p.payload) for p in points]
